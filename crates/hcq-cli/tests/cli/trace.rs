//! `--trace` and `HCQ_TRACE`: the trace file, written whatever happens and nothing else touched.

use crate::common::{floats, hcq, stdout, RUN_SRC};
use std::process::Command;

/// A kernel that spins until its flag (zeroed by `out:`) turns nonzero: it never finishes.
const SPIN_SRC: &str = r#"
extern "C" __attribute__((global)) void spin(volatile int* flag) {
  while (*flag == 0) {}
}
"#;

/// Writes `x[0] = 1` through a buffer, then stores to an unmapped address.
const FAULT_SRC: &str = r#"
extern "C" __attribute__((global)) void touch_then_fault(int* x, unsigned long address) {
  x[0] = 1;
  *(volatile int*)address = 7;
}
"#;

/// The non-metadata events of a Chrome trace, which must be a complete JSON document:
/// (phase, name, finished flag of a span).
fn trace_events(path: &std::path::Path) -> Vec<(String, String, Option<bool>)> {
    let text = std::fs::read_to_string(path).expect("the trace file exists");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("the trace is complete JSON");
    doc["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| {
            (
                e["ph"].as_str().unwrap().to_string(),
                e["name"].as_str().unwrap().to_string(),
                e["args"]["finished"].as_bool(),
            )
        })
        .collect()
}

fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `hcq compile` of `src` into `dir/name.hsaco`, returned.
fn code_object(dir: &std::path::Path, name: &str, src: &str) -> String {
    let source = dir.join(format!("{name}.hip"));
    std::fs::write(&source, src).unwrap();
    let out = dir.join(format!("{name}.hsaco"));
    let o = hcq(
        &[
            "compile",
            source.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out.to_str().unwrap().to_string()
}

#[test]
fn trace_touches_no_file_but_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let kernel = code_object(dir.path(), "k", RUN_SRC);
    // What a temporary file beside the trace could be called.
    for name in ["run.tmp", "run.json.tmp"] {
        std::fs::write(p(name), format!("{name}: the user's data")).unwrap();
    }
    std::fs::write(p("x.bin"), [0u8; 16]).unwrap();
    let (out_arg, in_arg) = (
        format!("out:{}:16", p("y.bin")),
        format!("in:{}", p("x.bin")),
    );
    let o = hcq(
        &[
            "--trace",
            &p("run.json"),
            "run",
            &kernel,
            "--kernel",
            "axpb",
            "--grid",
            "1",
            "--block",
            "4",
            "--arg",
            &out_arg,
            "--arg",
            &in_arg,
            "--arg",
            "f32:1",
            "--arg",
            "f32:2",
            "--arg",
            "i32:4",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(floats(&std::fs::read(p("y.bin")).unwrap()), [2.0; 4]);
    for name in ["run.tmp", "run.json.tmp"] {
        let kept = std::fs::read_to_string(p(name)).unwrap();
        assert_eq!(kept, format!("{name}: the user's data"));
    }
    assert_eq!(
        files_in(dir.path()),
        [
            "k.hip",
            "k.hsaco",
            "run.json",
            "run.json.tmp",
            "run.tmp",
            "x.bin",
            "y.bin"
        ]
    );
    let events = trace_events(std::path::Path::new(&p("run.json")));
    assert!(
        events.contains(&("X".into(), "axpb".into(), Some(true))),
        "{events:?}"
    );
}

#[test]
fn a_trace_file_that_cannot_be_written_fails_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(p("k.hip"), RUN_SRC).unwrap();
    std::fs::create_dir(p("a_directory")).unwrap();
    let out_arg = format!("out:{}:16", p("y.bin"));
    let run = |trace: Option<&str>, env: &[(&str, &str)]| {
        let mut args = vec![];
        if let Some(t) = trace {
            args.extend(["--trace", t]);
        }
        let k = p("k.hip");
        args.extend([
            "run",
            &k,
            "--kernel",
            "axpb",
            "--grid",
            "1",
            "--block",
            "4",
            "--arg",
            &out_arg,
            "--arg",
            "in:/dev/null",
            "--arg",
            "f32:1",
            "--arg",
            "f32:2",
            "--arg",
            "i32:4",
        ]);
        hcq(&args, env)
    };
    let missing = p("missing/t.json");
    let directory = p("a_directory");
    for (o, bad) in [
        (run(Some(&missing), &[]), &missing),
        (run(Some(&directory), &[]), &directory),
        (run(None, &[("HCQ_TRACE", &missing)]), &missing),
        (run(None, &[("HCQ_TRACE", &directory)]), &directory),
    ] {
        assert!(!o.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&format!("trace file {bad}")), "{bad}: {err}");
        assert!(o.stdout.is_empty(), "{bad}: ran: {}", stdout(&o));
        assert_eq!(
            files_in(dir.path()),
            ["a_directory", "k.hip"],
            "{bad}: a file was left behind"
        );
        assert_eq!(
            files_in(&dir.path().join("a_directory")),
            Vec::<String>::new()
        );
    }
}

#[test]
fn a_trace_file_without_write_permission_fails_before_any_work() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let trace = locked.join("t.json");
    let mut c = Command::new(env!("CARGO_BIN_EXE_hcq"));
    c.args(["--trace", trace.to_str().unwrap(), "devices"]);
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        // Root writes anywhere: run as nobody, to whom the directory is read-only.
        c.uid(65534).gid(65534);
    }
    let o = c.output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("trace file {}", trace.display())) && err.contains("ermission"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "ran: {}", stdout(&o));
    assert_eq!(files_in(&locked), Vec::<String>::new());
}

#[test]
fn a_trace_write_error_fails_the_command_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let kernel = code_object(dir.path(), "k", RUN_SRC);
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    std::fs::write(
        p("x.bin"),
        x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let (out_arg, in_arg) = (
        format!("out:{}:400", p("y.bin")),
        format!("in:{}", p("x.bin")),
    );
    // Files may grow to one block (512 or 1024 bytes): enough for the trace's first write
    // and the output, not for the whole trace. SIGXFSZ ignored, writes past it fail.
    let o = Command::new("sh")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 1; exec \"$@\"",
            "sh",
            env!("CARGO_BIN_EXE_hcq"),
            "--trace",
            &p("t.json"),
            "run",
            &kernel,
            "--kernel",
            "axpb",
            "--grid",
            "2",
            "--block",
            "64",
            "--arg",
            &out_arg,
            "--arg",
            &in_arg,
            "--arg",
            "f32:3",
            "--arg",
            "f32:1",
            "--arg",
            "i32:100",
        ])
        .env_remove("HCQ_DEVICE")
        .env("HCQ_CACHE_DIR", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "exited 0: {err}");
    assert!(
        err.contains(&format!("writing trace file {}", p("t.json"))),
        "{err}"
    );
    // The kernel itself ran and its output was written.
    let y = floats(&std::fs::read(p("y.bin")).unwrap());
    assert_eq!(y, x.iter().map(|v| 3.0 * v + 1.0).collect::<Vec<f32>>());
}

#[test]
fn a_timeout_fails_after_one_timeout_and_the_trace_shows_what_ran() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let kernel = code_object(dir.path(), "spin", SPIN_SRC);
    let flag = format!("out:{}:4", p("flag.bin"));
    let timeout_ms = 1000u64;
    let start = std::time::Instant::now();
    let o = hcq(
        &[
            "--trace",
            &p("t.json"),
            "run",
            &kernel,
            "--kernel",
            "spin",
            "--grid",
            "1",
            "--block",
            "1",
            "--arg",
            &flag,
        ],
        &[
            ("HCQ_WAIT_TIMEOUT_MS", &timeout_ms.to_string()),
            ("HCQ_EMU_MAX_STEPS", "1000000000000"),
        ],
    );
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "exited 0: {err}");
    assert!(
        err.contains(&format!("timed out after {timeout_ms} ms")),
        "{err}"
    );
    let limit = std::time::Duration::from_millis(timeout_ms * 8 / 5 + 250);
    assert!(took < limit, "took {took:?} with a {timeout_ms} ms timeout");
    // Written although the command failed: the zeroing copy finished, the kernel did not.
    let events = trace_events(std::path::Path::new(&p("t.json")));
    assert!(
        events.contains(&("X".into(), "copy in".into(), Some(true))),
        "{events:?}"
    );
    assert!(
        events.contains(&("X".into(), "spin".into(), Some(false))),
        "{events:?}"
    );
    assert!(
        events.contains(&("i".into(), "spin".into(), None)),
        "{events:?}"
    );
}

#[test]
fn a_device_fault_still_writes_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let kernel = code_object(dir.path(), "fault", FAULT_SRC);
    let x = format!("out:{}:4", p("x.bin"));
    let o = hcq(
        &[
            "--trace",
            &p("t.json"),
            "run",
            &kernel,
            "--kernel",
            "touch_then_fault",
            "--grid",
            "1",
            "--block",
            "1",
            "--arg",
            &x,
            "--arg",
            "u64:0x100000",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "exited 0: {err}");
    assert!(err.contains("device fault"), "{err}");
    // The kernel may count as finished or not, depending on whether the fault reached the host
    // before the end of its dispatch; its span is there either way.
    let events = trace_events(std::path::Path::new(&p("t.json")));
    for name in ["copy in", "touch_then_fault"] {
        assert!(
            events.iter().any(|(ph, n, _)| ph == "X" && n == name),
            "{name}: {events:?}"
        );
    }
}
