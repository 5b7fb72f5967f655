//! `--help`, `--version`, and what `-v` and `RUST_LOG` log.

use crate::common::{hcq, stdout};
use std::process::Output;

#[test]
fn help_lists_every_variable_the_readme_documents_and_version_names_the_commit() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("the README");
    let mut names: Vec<&str> = readme
        .match_indices("HCQ_")
        .map(|(at, _)| {
            let rest = &readme[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|n| n.len() > 4)
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 10, "{names:?}");
    let o = hcq(&["--help"], &[]);
    let help = stdout(&o);
    assert!(
        o.status.success() && help.contains("Environment:"),
        "{help}"
    );
    for name in &names {
        assert!(help.contains(name), "--help does not list {name}:\n{help}");
    }
    // Every argument and option of every command says what it is.
    for command in [
        "devices",
        "demo",
        "run",
        "disasm",
        "compile",
        "exec",
        "soak",
        "bench",
        "bench launch",
        "bench copy",
        "bench emu",
        "bench graph",
    ] {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.push("--help");
        let o = hcq(&args, &[]);
        let text = stdout(&o);
        assert!(o.status.success(), "{text}");
        for line in text.lines() {
            let t = line.trim_start();
            let entry = t.starts_with('-') || (t.starts_with('<') && line.starts_with("  "));
            if entry && !line.trim_end().ends_with("...") {
                let (flag, help) = t.split_once("  ").unwrap_or((t, ""));
                assert!(
                    !help.trim().is_empty(),
                    "`hcq {command} --help`: {flag} has no help text:\n{text}"
                );
            }
        }
    }
    // `run --help` names every argument kind `--arg` takes (the list its errors give, which
    // comes from `hcq::VALUE_KINDS`), so the hand-written help cannot fall behind.
    let o = hcq(
        &[
            "run", "k.hip", "--kernel", "k", "--grid", "1", "--block", "1", "--arg", "nope:1",
        ],
        &[],
    );
    let error = String::from_utf8_lossy(&o.stderr).to_string();
    let kinds = error
        .split_once("one of ")
        .map(|(_, rest)| rest.lines().next().unwrap_or(""))
        .unwrap_or_else(|| panic!("no kind list in {error}"));
    let run_help = stdout(&hcq(&["run", "--help"], &[]));
    let words: Vec<&str> = run_help
        .split(|c: char| !c.is_ascii_alphanumeric())
        .collect();
    for kind in kinds.split_whitespace() {
        assert!(
            words.contains(&kind),
            "`hcq run --help` does not name the --arg kind {kind}:\n{run_help}"
        );
    }
    assert!(kinds.split_whitespace().count() >= 16, "{kinds}");
    // The version names the commit it was built from.
    let o = hcq(&["--version"], &[]);
    let version = stdout(&o);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    assert!(version.starts_with("hcq 0.1.0 ("), "{version}");
    if let Some(head) = head {
        assert!(version.contains(&head), "{version} names {head}?");
    }
}

#[test]
fn verbose_logs_devices_compiles_allocations_and_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("k.hip");
    std::fs::write(
        &k,
        "__global__ void fill(int* o) { o[blockIdx.x * 64 + threadIdx.x] = 5; }\n",
    )
    .unwrap();
    // Older than the 2 s the cache waits before it trusts a file that was just written.
    std::fs::File::options()
        .write(true)
        .open(&k)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    let k = k.to_str().unwrap();
    let out_arg = format!("out:{}:512", dir.path().join("o.bin").display());
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();
    let run = [
        "run", k, "--kernel", "fill", "--grid", "2", "--block", "64", "--arg", &out_arg,
    ];
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let mut verbose = vec!["-v"];
    verbose.extend_from_slice(&run);
    let o = hcq(&verbose, &[("HCQ_CACHE_DIR", cache)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    for needle in [
        "amd-emu: KFD 1.",
        "amd-emu:0: opened (gfx1100",
        "(compiled) in",
        "512 bytes of Vram",
        "fill grid 2x1x1 block 64x1x1 lds 0 code object 0x",
        " us",
        "copy out",
    ] {
        assert!(log.contains(needle), "{needle:?} is not in the log:\n{log}");
    }
    // The second compile comes from the cache, and says so.
    let o = hcq(&verbose, &[("HCQ_CACHE_DIR", cache)]);
    assert!(stderr(&o).contains("(from the cache)"), "{}", stderr(&o));
    // Without -v nothing is logged; RUST_LOG chooses what is.
    let o = hcq(&run, &[("HCQ_CACHE_DIR", cache)]);
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    let o = hcq(
        &run,
        &[("HCQ_CACHE_DIR", cache), ("RUST_LOG", "hcq::compile=debug")],
    );
    let log = stderr(&o);
    assert!(
        log.contains("from the cache") && !log.contains("grid"),
        "{log}"
    );
    crate::kept_objects::keep("help_and_logging-cache", std::path::Path::new(cache));
}
