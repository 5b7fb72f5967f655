//! Records the commit `hcq --version` names. A packaged source (from crates.io, or
//! `cargo package`) names the commit it was packaged from, which cargo wrote into
//! `.cargo_vcs_info.json`; that file wins because the unpacked source may sit inside some other
//! git checkout (cargo unpacks into `target/package/` when it verifies a package). Otherwise
//! it is `git describe` of the source tree (with `-dirty` for uncommitted changes), else
//! "unknown commit".

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

/// The commit in a packaged source's `.cargo_vcs_info.json` (`"sha1": "<40 hex>"`, and
/// `"dirty": true` when cargo packaged uncommitted changes), shortened as `git describe` does.
fn packaged_commit() -> Option<String> {
    let info = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cargo_vcs_info.json"),
    )
    .ok()?;
    let after = &info[info.find("\"sha1\"")? + "\"sha1\"".len()..];
    let start = after.find('"')? + 1;
    let sha: String = after[start..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    if sha.len() < 12 {
        return None;
    }
    let dirty = info.contains("\"dirty\": true") || info.contains("\"dirty\":true");
    Some(format!(
        "{}{}",
        &sha[..12],
        if dirty { "-dirty" } else { "" }
    ))
}

fn main() {
    if let Some(commit) = packaged_commit() {
        println!("cargo:rustc-env=HCQ_BUILD_COMMIT={commit}");
        // Only named when it exists: cargo reruns a script for a missing file at every build.
        println!("cargo:rerun-if-changed=.cargo_vcs_info.json");
        return;
    }
    // `--dirty` refreshes the index, which fails while another git command holds its lock (a
    // commit in another terminal): tried again before giving up. Either way the script reruns
    // when the commit or the index changes, so a failure does not stick.
    let commit = (0..3)
        .find_map(|attempt| {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            git(&["describe", "--always", "--dirty", "--abbrev=12"])
        })
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
