//! The compile cache and the compiler process as a user meets them through `hcq run` and
//! `hcq compile`: includes resolve next to the source file, a changed header is never served
//! from the cache, a damaged cache entry is rebuilt, and an interrupted compile leaves no file
//! and no clang behind.

mod kept_objects;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

fn hcq_in(cwd: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hcq"));
    c.args(args).current_dir(cwd).env_remove("HCQ_DEVICE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("hcq runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes a file and dates it a minute back, so that the cache trusts it at once (files
/// changed within seconds of a compile are compiled but not stored).
fn write_settled(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
}

const WITH_INCLUDE: &str = r#"#include "local.h"
extern "C" __attribute__((global)) void inc(int* out) { out[0] = VALUE; }
"#;

fn header(value: i32) -> String {
    format!("#define VALUE {value}\n")
}

/// Runs kernel `inc` of `source` from `cwd` and returns the int it wrote.
fn run_inc(cwd: &Path, source: &str, cache: &Path, out: &Path) -> i32 {
    let out_arg = format!("out:{}:4", out.display());
    let o = hcq_in(
        cwd,
        &[
            "run", source, "--kernel", "inc", "--grid", "1", "--block", "1", "--arg", &out_arg,
        ],
        &[("HCQ_CACHE_DIR", cache)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(out).unwrap();
    i32::from_le_bytes(bytes[..4].try_into().unwrap())
}

fn cache_entries(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "bin"));
    v
}

#[test]
fn includes_resolve_next_to_the_source_and_a_changed_header_is_never_served_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (inc, elsewhere, cache) = (
        dir.path().join("inc"),
        dir.path().join("elsewhere"),
        dir.path().join("cache"),
    );
    std::fs::create_dir_all(&inc).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let source = inc.join("withinc.hip");
    write_settled(&source, WITH_INCLUDE);
    write_settled(&inc.join("local.h"), &header(42));
    // A header of the same name in the working directory must not be the one included.
    write_settled(&elsewhere.join("local.h"), &header(7));
    let out = dir.path().join("out.bin");
    let src = source.to_str().unwrap();

    assert_eq!(run_inc(&elsewhere, src, &cache, &out), 42);
    assert_eq!(cache_entries(&cache).len(), 1, "the compile was stored");
    assert_eq!(run_inc(&elsewhere, src, &cache, &out), 42);

    // The issue's scenario: change the header, run again with the cache on.
    write_settled(&inc.join("local.h"), &header(43));
    assert_eq!(run_inc(&inc, "withinc.hip", &cache, &out), 43);
    assert_eq!(run_inc(&elsewhere, src, &cache, &out), 43);

    // A header changed moments ago (while a compile may be reading it) is compiled, not
    // trusted from the cache either.
    std::fs::write(inc.join("local.h"), header(44)).unwrap();
    assert_eq!(run_inc(&elsewhere, src, &cache, &out), 44);

    // A removed header is a compile error naming it, not a cache hit.
    std::fs::remove_file(inc.join("local.h")).unwrap();
    let out_arg = format!("out:{}:4", out.display());
    let o = hcq_in(
        &elsewhere,
        &[
            "run", src, "--kernel", "inc", "--grid", "1", "--block", "1", "--arg", &out_arg,
        ],
        &[("HCQ_CACHE_DIR", &cache)],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("local.h"), "{}", stderr(&o));

    // `hcq compile` resolves the same way, from any working directory.
    write_settled(&inc.join("local.h"), &header(45));
    let object = dir.path().join("withinc.hsaco");
    let o = hcq_in(
        &elsewhere,
        &["compile", src, "-o", object.to_str().unwrap()],
        &[("HCQ_CACHE_DIR", &cache)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        run_inc(&elsewhere, object.to_str().unwrap(), &cache, &out),
        45
    );
    // A relative file name that looks like an option is still the file.
    write_settled(&inc.join("-dash.hip"), WITH_INCLUDE);
    std::fs::remove_file(&object).unwrap();
    let o = hcq_in(
        &inc,
        &["compile", "-o", object.to_str().unwrap(), "--", "-dash.hip"],
        &[("HCQ_CACHE_DIR", &cache)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        run_inc(&elsewhere, object.to_str().unwrap(), &cache, &out),
        45
    );
    kept_objects::keep("compile_cache-includes", &cache);
}

#[test]
fn a_damaged_or_old_cache_entry_is_rebuilt_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let source = dir.path().join("k.hip");
    write_settled(&dir.path().join("local.h"), &header(42));
    write_settled(&source, WITH_INCLUDE);
    let out = dir.path().join("out.bin");
    let src = source.to_str().unwrap();
    assert_eq!(run_inc(dir.path(), src, &cache, &out), 42);
    let entries = cache_entries(&cache);
    assert_eq!(entries.len(), 1);
    let entry = entries[0].clone();
    let good = std::fs::read(&entry).unwrap();

    // What an older hcq stored: the bare code object, here one that returns another value.
    write_settled(&dir.path().join("local.h"), &header(99));
    let other = dir.path().join("other.hsaco");
    let o = hcq_in(
        dir.path(),
        &["compile", src, "-o", other.to_str().unwrap()],
        &[("HCQ_CACHE_DIR", Path::new("off"))],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    write_settled(&dir.path().join("local.h"), &header(42));
    let old_format = std::fs::read(&other).unwrap();

    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    let mut flipped_header = good.clone();
    flipped_header[9] ^= 1;
    let damaged: [(&str, Vec<u8>); 5] = [
        ("truncated", good[..good.len() / 2].to_vec()),
        ("a flipped byte", flipped),
        ("a flipped header byte", flipped_header),
        ("empty", Vec::new()),
        ("of the old format", old_format),
    ];
    for (what, bytes) in damaged {
        std::fs::write(&entry, &bytes).unwrap();
        assert_eq!(run_inc(dir.path(), src, &cache, &out), 42, "entry {what}");
        assert_eq!(
            std::fs::read(&entry).unwrap(),
            good,
            "entry {what} was replaced by a sound one"
        );
    }
    kept_objects::keep("compile_cache-damaged/cache", &cache);
    kept_objects::keep("compile_cache-damaged/other.hsaco", &other);
}

/// Whether `pid` is a live process (a zombie has ended).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
    })
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(files_under(&p));
        }
        found.push(p);
    }
    found
}

fn wait_for(what: &str, deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A kernel that takes clang a second or more to compile.
fn slow_source() -> String {
    let mut s = String::from("extern \"C\" __attribute__((global)) void slow(float* x) {\n");
    for i in 0..3000 {
        s += &format!(
            "  x[{}] = x[{}] * {i}.5f + x[{}];\n",
            i % 64,
            (i * 7) % 64,
            (i * 13) % 64
        );
    }
    s + "}\n"
}

enum Interrupt {
    /// SIGINT to hcq alone, while the clang wrapper sleeps before starting clang.
    HcqWhileWrapperSleeps,
    /// SIGINT to hcq alone, while clang compiles (and has its temporary files open).
    HcqWhileClangRuns,
    /// SIGINT to hcq's whole process group, as Ctrl-C in a terminal does.
    ProcessGroupWhileClangRuns,
    /// SIGKILL to hcq alone, while clang compiles: nothing of hcq runs afterwards, so clang
    /// must die with it, and the next compile removes what it left.
    KillHcqWhileClangRuns,
}

fn interrupt_a_compile(how: Interrupt) {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let pids = dir.path().join("pids");
    let blocked = dir.path().join("blocked-signals");
    let sleep = match how {
        Interrupt::HcqWhileWrapperSleeps => "sleep 30",
        _ => "true",
    };
    let wrapper = dir.path().join("clang-wrapper.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] || while read -r k v; do [ \"$k\" = SigBlk: ] && echo \"$k $v\" > '{}'; done < /proc/$$/status\n\
             echo $$ >> '{}'\n[ \"$1\" = --version ] || {sleep}\nexec clang-19 \"$@\"\n",
            blocked.display(),
            pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let source = dir.path().join("slow.hip");
    std::fs::write(&source, slow_source()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcq"));
    cmd.args(["compile", source.to_str().unwrap(), "-o"])
        .arg(dir.path().join("slow.hsaco"))
        .env("HCQ_CLANG", &wrapper)
        .env("TMPDIR", &tmp)
        .env("HCQ_CACHE_DIR", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Interrupt::ProcessGroupWhileClangRuns = how {
        cmd.process_group(0);
    }
    let mut hcq = cmd.spawn().unwrap();
    // The first pid is the `--version` probe; the second is the compile.
    let compile_pid = || -> Option<i32> {
        let text = std::fs::read_to_string(&pids).ok()?;
        text.lines().nth(1)?.trim().parse().ok()
    };
    wait_for("the compile to start", Duration::from_secs(60), || {
        compile_pid().is_some()
    });
    let clang = compile_pid().unwrap();
    // hcq blocks signals to wait for them on a thread; clang must not inherit that.
    let mask = std::fs::read_to_string(&blocked).unwrap();
    assert!(
        mask.split_whitespace()
            .nth(1)
            .is_some_and(|m| m.chars().all(|c| c == '0')),
        "clang started with signals blocked: {mask}"
    );
    match how {
        Interrupt::HcqWhileWrapperSleeps => std::thread::sleep(Duration::from_millis(200)),
        // clang's own temporary object appears as soon as it starts compiling.
        _ => wait_for("clang's temporary files", Duration::from_secs(60), || {
            files_under(&tmp).iter().any(|p| p.is_file())
        }),
    }
    assert!(
        hcq.try_wait().unwrap().is_none(),
        "the compile was still running"
    );
    let target = match how {
        Interrupt::ProcessGroupWhileClangRuns => -(hcq.id() as i32),
        _ => hcq.id() as i32,
    };
    let signal = match how {
        Interrupt::KillHcqWhileClangRuns => libc::SIGKILL,
        _ => libc::SIGINT,
    };
    // SAFETY: sends a signal to the hcq process (or its group) this test started.
    assert_eq!(unsafe { libc::kill(target, signal) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = hcq.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = hcq.kill();
            panic!("hcq did not end after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    wait_for("clang to end", Duration::from_secs(5), || !alive(clang));
    if let Interrupt::KillHcqWhileClangRuns = how {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        let small = dir.path().join("small.hip");
        std::fs::write(
            &small,
            "extern \"C\" __attribute__((global)) void k(int* o) { o[0] = 1; }\n",
        )
        .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
            .args(["compile", small.to_str().unwrap(), "-o"])
            .arg(dir.path().join("small.hsaco"))
            .env("TMPDIR", &tmp)
            .env("HCQ_CACHE_DIR", "off")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    } else {
        assert_eq!(status.code(), Some(130), "{status:?}");
    }
    let left = files_under(&tmp);
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(!dir.path().join("slow.hsaco").exists());
}

#[test]
fn sigint_to_hcq_while_the_compiler_starts_leaves_nothing_behind() {
    interrupt_a_compile(Interrupt::HcqWhileWrapperSleeps);
}

#[test]
fn sigint_to_hcq_while_clang_compiles_leaves_nothing_behind() {
    interrupt_a_compile(Interrupt::HcqWhileClangRuns);
}

#[test]
fn sigint_to_the_process_group_while_clang_compiles_leaves_nothing_behind() {
    interrupt_a_compile(Interrupt::ProcessGroupWhileClangRuns);
}

#[test]
fn sigkill_to_hcq_while_clang_compiles_takes_clang_with_it() {
    interrupt_a_compile(Interrupt::KillHcqWhileClangRuns);
}
