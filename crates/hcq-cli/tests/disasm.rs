//! `hcq disasm` against LLVM, on every code object the test suite builds (the kernel suite, the
//! demo, benchmark and ML kernels, the checked-in objects): its listing equals
//! `llvm-objdump-19 -d`'s line for line (symbols, instructions, addresses, encodings, branch
//! targets); each kernel's header states what `llvm-readelf-19 --notes` reads from the
//! metadata; its occupancy is what LLVM's own compiler reports (`; Occupancy:` in `clang -S`).
//! HIP source given directly is compiled and listed the same as its object.

#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Kernels whose occupancy is below the 16 wave slots: one limited by its registers, two by
/// their LDS (with different workgroup sizes).
const OCCUPANCY_SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
// Many live values: a fully unrolled 96-element accumulator per work-item.
KERNEL void many_vgprs(const float* in, float* out, int n) {
  int g = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; i++) acc[i] = in[(g + i * 7) % n];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int i = 0; i < 96; i++) acc[i] = acc[i] * acc[(i + r + 1) % 96] + 1.0f;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 96; i++) s += acc[i];
  out[g] = s;
}
// 40 KiB of LDS per workgroup of at most 256 work-items.
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 256))) void big_lds(float* out) {
  __attribute__((shared)) float tile[10240];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 10240; i += 256) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 10240];
}
// 20 KiB of LDS, workgroups of at most 64.
KERNEL __attribute__((amdgpu_flat_work_group_size(1, 64))) void mid_lds(float* out) {
  __attribute__((shared)) float tile[5120];
  int t = __builtin_amdgcn_workitem_id_x();
  for (int i = t; i < 5120; i += 64) tile[i] = i;
  __builtin_amdgcn_s_barrier();
  out[t] = tile[(t * 37) % 5120];
}
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(program: &str, args: &[&str]) -> Output {
    let o = Command::new(program)
        .args(args)
        .env_remove("HCQ_DEVICE")
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} could not run ({e}); scripts/test.sh installs LLVM 19")
        });
    assert!(
        o.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hcq(args: &[&str]) -> String {
    text(&run(env!("CARGO_BIN_EXE_hcq"), args))
}

/// The kernels' metadata as llvm-readelf prints it: per kernel, its `.key: value` pairs.
fn metadata(object: &str) -> Vec<HashMap<String, String>> {
    let notes = text(&run("llvm-readelf-19", &["--notes", object]));
    let mut kernels: Vec<HashMap<String, String>> = Vec::new();
    let mut inside = false;
    for line in notes.lines() {
        if line.starts_with("amdhsa.kernels:") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if !line.starts_with(' ') {
            inside = false;
            continue;
        }
        let item = line.strip_prefix("  - ");
        if item.is_some() {
            kernels.push(HashMap::new());
        }
        // Keys of the kernel's own map: at four spaces, or right after the item's dash.
        let entry = item.or_else(|| line.strip_prefix("    ").filter(|l| !l.starts_with(' ')));
        if let (Some(entry), Some(k)) = (entry, kernels.last_mut()) {
            if let Some((key, value)) = entry.split_once(':') {
                k.insert(key.trim().to_string(), value.trim().to_string());
            }
        }
    }
    kernels
}

/// LLVM's `; Occupancy: N` for each kernel of `source`.
fn llvm_occupancy(source: &Path) -> HashMap<String, u32> {
    let mut args: Vec<String> = hcq_amd::compiler::base_flags("gfx1100");
    args.extend(["-S", "-o", "-"].map(String::from));
    args.push(source.to_str().unwrap().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let asm = text(&run("clang-19", &args));
    let mut out = HashMap::new();
    let mut function = None;
    for line in asm.lines() {
        // A function's label: `name:` at the start of a line, perhaps with a `; @name` comment.
        if let Some((label, rest)) = line.split_once(':') {
            let rest = rest.trim_start();
            if !label.is_empty()
                && !label.starts_with(['.', ' ', '\t', ';'])
                && !label.contains(char::is_whitespace)
                && (rest.is_empty() || rest.starts_with(';'))
            {
                function = Some(label.to_string());
            }
        }
        if let (Some(n), Some(f)) = (line.trim().strip_prefix("; Occupancy: "), &function) {
            out.insert(f.clone(), n.trim().parse().unwrap());
        }
    }
    out
}

/// `llvm-objdump -d` without its preamble (file name, format, section title).
fn objdump(object: &str) -> String {
    let all = text(&run("llvm-objdump-19", &["-d", "--mcpu=gfx1100", object]));
    let at = all
        .find("Disassembly of section .text:\n\n")
        .expect("a .text listing");
    all[at + "Disassembly of section .text:\n\n".len()..].to_string()
}

#[test]
fn listings_match_llvm_objdump_and_headers_match_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let root = repo();
    let mut objects: Vec<(PathBuf, Option<PathBuf>)> = vec![
        (
            root.join("crates/hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco"),
            None,
        ),
        (root.join("crates/rdna3/tests/kernels/kernels.hsaco"), None),
    ];
    for sub in ["crates/hcq-cli/kernels", "kernels/suite", "kernels/ml"] {
        let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "hip"))
            .collect();
        sources.sort();
        for src in sources {
            let name = format!(
                "{}-{}.hsaco",
                sub.replace('/', "-"),
                src.file_stem().unwrap().to_str().unwrap()
            );
            let out = dir.path().join(name);
            hcq(&[
                "compile",
                src.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ]);
            objects.push((out, Some(src)));
        }
    }
    let occupancy_src = dir.path().join("occupancy.hip");
    std::fs::write(&occupancy_src, OCCUPANCY_SRC).unwrap();
    let occupancy_obj = dir.path().join("occupancy.hsaco");
    hcq(&[
        "compile",
        occupancy_src.to_str().unwrap(),
        "-o",
        occupancy_obj.to_str().unwrap(),
    ]);
    objects.push((occupancy_obj, Some(occupancy_src)));
    assert!(objects.len() >= 15, "only {} objects", objects.len());
    let mut kernels_checked = 0;
    let mut occupancies_checked = std::collections::BTreeSet::new();
    for (object, source) in &objects {
        let path = object.to_str().unwrap();
        let ours = hcq(&["disasm", path]);
        let listing: String = ours
            .lines()
            .filter(|l| !l.starts_with(';'))
            .map(|l| format!("{l}\n"))
            .collect();
        let theirs = objdump(path);
        for (k, (a, b)) in listing.lines().zip(theirs.lines()).enumerate() {
            assert_eq!(a, b, "{path}: line {k} differs from llvm-objdump");
        }
        assert_eq!(
            listing.lines().count(),
            theirs.lines().count(),
            "{path}: listing length"
        );
        let occupancy = source.as_deref().map(llvm_occupancy);
        for meta in metadata(path) {
            let name = &meta[".name"];
            let header: Vec<&str> = ours
                .split(&format!("; kernel {name}: wave32\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("{path}: no header for {name}"))
                .lines()
                .take_while(|l| l.starts_with(';'))
                .collect();
            let header = header.join("\n");
            for (key, wording) in [
                (".vgpr_count", "VGPRs {}"),
                (".sgpr_count", "SGPRs {}"),
                (".group_segment_fixed_size", "LDS {} bytes"),
                (".private_segment_fixed_size", "scratch {} bytes"),
                (".kernarg_segment_size", "kernel arguments {} bytes"),
                (".max_flat_workgroup_size", "at most {} work-items"),
            ] {
                let want = wording.replace("{}", &meta[key]);
                assert!(
                    header.contains(&want),
                    "{path}: {name}: {want:?} missing from\n{header}"
                );
            }
            if let Some(llvm) = occupancy.as_ref().and_then(|o| o.get(name.as_str())) {
                let want = format!("occupancy {llvm} waves per SIMD");
                assert!(
                    header.contains(&want),
                    "{path}: {name}: LLVM says {llvm}:\n{header}"
                );
                occupancies_checked.insert(*llvm);
            }
            kernels_checked += 1;
        }
        if let Some(src) = source {
            assert_eq!(
                hcq(&["disasm", src.to_str().unwrap()]),
                ours,
                "{}: the source's listing",
                src.display()
            );
        }
    }
    assert!(kernels_checked >= 50, "only {kernels_checked} kernels");
    // Limited by VGPRs (9), by LDS (6 and 3), and by the wave slots (16).
    assert_eq!(
        occupancies_checked.into_iter().collect::<Vec<_>>(),
        vec![3, 6, 9, 16]
    );
}

#[test]
fn one_kernel_and_clear_errors() {
    let demo = repo().join("crates/hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");
    let demo = demo.to_str().unwrap();
    let one = hcq(&["disasm", demo, "--kernel", "mul_f32"]);
    assert!(one.starts_with("; kernel mul_f32: wave32\n"), "{one}");
    assert_eq!(one.matches(">:\n").count(), 1, "{one}");
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["disasm", demo, "--kernel", "nope"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("no function named \"nope\"")
            && err.contains("add_f32"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.hsaco");
    std::fs::write(&junk, b"\x7fELF\x02\x01\x01 not really").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["disasm", junk.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("ELF"), "{err}");
}
