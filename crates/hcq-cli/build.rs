//! Records the commit `hcq --version` names: `git describe` of the source tree when it is a
//! git checkout (with `-dirty` for uncommitted changes), else "unknown commit" (a packaged
//! source).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["describe", "--always", "--dirty", "--abbrev=12"])
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=HCQ_BUILD_COMMIT={commit}");
    // Rebuilt when the checked-out commit or the index changes.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = PathBuf::from(dir);
        for file in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={}", dir.join(file).display());
        }
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--git-common-dir"])
                .map(|c| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(c))
                .unwrap_or(dir);
            println!(
                "cargo:rerun-if-changed={}",
                common.join(reference).display()
            );
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
