//! Code objects shipped with the binary, so the demo runs where no clang is installed. Each is
//! built from a kernel source in this crate's `kernels/` and recorded with that source's SHA-256
//! in `kernels/prebuilt/MANIFEST`; a test fails when a source changes and its object was not
//! rebuilt (`crates/hcq-cli/kernels/rebuild.sh`). The kernels live inside the crate so that its
//! published package holds everything the binary embeds.

use sha2::{Digest, Sha256};

/// The demo's kernel source.
pub const DEMO_SOURCE: &str = include_str!("../kernels/demo.hip");

/// `(source file, arch, object bytes)` for each shipped object.
pub const OBJECTS: &[(&str, &str, &[u8])] = &[(
    "demo.hip",
    "gfx1100",
    include_bytes!("../kernels/prebuilt/demo.gfx1100.hsaco"),
)];

/// The manifest: `source arch sha256-of-source object-file` per line.
pub const MANIFEST: &str = include_str!("../kernels/prebuilt/MANIFEST");

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The shipped object for `source` on `arch`, if its manifest entry matches `text`.
pub fn object_for(source: &str, text: &str, arch: &str) -> Option<&'static [u8]> {
    let digest = sha256_hex(text.as_bytes());
    let listed = MANIFEST.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 4 && f[0] == source && f[1] == arch && f[2] == digest
    });
    if !listed {
        return None;
    }
    OBJECTS
        .iter()
        .find(|(s, a, _)| *s == source && *a == arch)
        .map(|(_, _, o)| *o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_text(name: &str) -> String {
        let path = format!("{}/kernels/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
    }

    /// Fails when a kernel source changed but its prebuilt object was not rebuilt.
    #[test]
    fn every_prebuilt_object_matches_its_source() {
        for (source, arch, obj) in OBJECTS {
            let text = source_text(source);
            assert!(
                object_for(source, &text, arch).is_some(),
                "kernels/{source} changed since kernels/prebuilt was built for {arch}: run crates/hcq-cli/kernels/rebuild.sh"
            );
            let line = MANIFEST
                .lines()
                .find(|l| l.starts_with(&format!("{source} {arch} ")))
                .expect("listed");
            let file = line.split_whitespace().nth(3).expect("object file column");
            let on_disk = std::fs::read(format!(
                "{}/kernels/prebuilt/{file}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .expect("object file");
            assert_eq!(
                &on_disk[..],
                *obj,
                "{file} is not the object built into the binary"
            );
        }
    }

    #[test]
    fn a_changed_source_has_no_prebuilt_object() {
        let text = source_text("demo.hip") + "\n// edited\n";
        assert!(object_for("demo.hip", &text, "gfx1100").is_none());
        assert!(object_for("demo.hip", &source_text("demo.hip"), "gfx1200").is_none());
    }
}
