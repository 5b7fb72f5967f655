//! The `hcq` binary as a user runs it.

use std::process::{Command, Output};

fn hcq(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hcq"));
    c.args(args).env_remove("HCQ_DEVICE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("hcq runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn devices_lists_the_emulated_gpus() {
    let o = hcq(&["devices"], &[("HCQ_EMU_GPUS", "2")]);
    assert!(o.status.success(), "{o:?}");
    let s = stdout(&o);
    for name in ["amd-emu:0", "amd-emu:1"] {
        let line = s
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{s}"));
        assert!(
            line.contains("gfx1100") && line.contains("emulated"),
            "{line}"
        );
    }
    // No /dev/kfd here (as on CI machines): said, with the cause, not left to guess.
    if !std::path::Path::new("/dev/kfd").exists() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("no real AMD GPU (amd:N): /dev/kfd does not exist"),
            "{err}"
        );
    }
}

#[test]
fn demo_verifies_every_kernel() {
    let o = hcq(&["demo", "--n", "3000"], &[]);
    let s = stdout(&o);
    assert!(
        o.status.success(),
        "{s}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for k in [
        "add_f32",
        "mul_f32",
        "saxpy_f32",
        "add_i32",
        "mul_i32",
        "mix_i32",
    ] {
        assert!(
            s.lines()
                .any(|l| l.contains(k) && l.contains("verified") && l.contains("gpu")),
            "{k}:\n{s}"
        );
    }
    assert!(s.contains("host cost per launch"), "{s}");
    assert!(s.contains("all results verified"), "{s}");
}

#[test]
fn demo_runs_the_prebuilt_kernels_without_a_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let o = hcq(
        &["demo", "--n", "500"],
        &[
            ("HCQ_CLANG", "/nonexistent/clang"),
            ("HCQ_CACHE_DIR", dir.path().to_str().unwrap()),
        ],
    );
    let s = stdout(&o);
    assert!(
        o.status.success(),
        "{s}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(s.contains("prebuilt"), "{s}");
    assert!(s.contains("all results verified"), "{s}");
}

/// A benchmark figure's spread: its value is the median of at least `repetitions`
/// repetitions, between their min and max.
fn check_spread(v: &serde_json::Value, repetitions: u64) {
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert_eq!(f("median"), f("value"), "{v}");
    assert!(f("min") <= f("median") && f("median") <= f("max"), "{v}");
    assert!(v["repetitions"].as_u64().unwrap() >= repetitions, "{v}");
}

#[test]
fn bench_launch_prints_json_with_a_baseline() {
    let o = hcq(&["bench", "launch", "--json", "--launches", "3000"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 2, "{s}");
    for (line, name) in lines
        .iter()
        .zip(["launch_enqueue", "launch_enqueue_driver"])
    {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object per line");
        assert_eq!(v["name"], name);
        assert_eq!(v["unit"], "ns");
        check_spread(&v, 2);
        let (value, baseline, ratio) = (
            v["value"].as_f64().unwrap(),
            v["baseline"].as_f64().unwrap(),
            v["ratio"].as_f64().unwrap(),
        );
        assert!(value > 0.0 && baseline > 0.0);
        assert!(
            (ratio - value / baseline).abs() <= 0.01 * ratio.max(1.0),
            "{s}"
        );
    }
}

#[test]
fn a_bad_device_name_is_a_clear_error() {
    let o = hcq(&["demo", "--device", "cuda:0"], &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cuda:0") && err.contains("amd-emu"), "{err}");
    let o = hcq(&["demo"], &[("HCQ_DEVICE", "amd-emu:7")]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("amd-emu:7"));
}

const RUN_SRC: &str = r#"
extern "C" __attribute__((global)) void axpb(float* y, const float* x, float a, float b, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + b;
}
"#;

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn run_a_kernel_from_source_and_from_a_code_object() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(p("k.hip"), RUN_SRC).unwrap();
    let n = 100usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 30.0).collect();
    std::fs::write(
        p("x.bin"),
        x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let out_arg = format!("out:{}:{}", p("y.bin"), n * 4);
    let in_arg = format!("in:{}", p("x.bin"));
    let args = [
        "--arg", &out_arg, "--arg", &in_arg, "--arg", "f32:2.5", "--arg", "f32:-1", "--arg",
        "i32:100",
    ];
    let (k_hip, k_hsaco) = (p("k.hip"), p("k.hsaco"));
    let mut cmd = vec![
        "run",
        &k_hip[..],
        "--kernel",
        "axpb",
        "--grid",
        "2",
        "--block",
        "64",
    ];
    cmd.extend_from_slice(&args);
    let o = hcq(&cmd, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let y = floats(&std::fs::read(p("y.bin")).unwrap());
    assert_eq!(y.len(), n);
    for i in 0..n {
        assert_eq!(
            y[i].to_bits(),
            2.5f32.mul_add(x[i], -1.0).to_bits(),
            "element {i}"
        );
    }
    // The same kernel from a code object compiled by `hcq compile`.
    let o = hcq(&["compile", &k_hip, "-o", &k_hsaco], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(p("y.bin")).unwrap();
    let mut cmd = vec![
        "run",
        &k_hsaco[..],
        "--kernel",
        "axpb",
        "--grid",
        "2,1,1",
        "--block",
        "64,1,1",
    ];
    cmd.extend_from_slice(&args);
    let o = hcq(&cmd, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(floats(&std::fs::read(p("y.bin")).unwrap()), y);
}

#[test]
fn run_reports_mistakes_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("k.hip");
    std::fs::write(&k, RUN_SRC).unwrap();
    let k = k.to_str().unwrap();
    let expect_err = |args: &[&str], needle: &str| {
        let o = hcq(args, &[]);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    expect_err(
        &["run", k, "--kernel", "nope", "--grid", "1", "--block", "1"],
        "axpb",
    );
    expect_err(
        &[
            "run", k, "--kernel", "axpb", "--grid", "1", "--block", "1", "--arg", "i32:1",
        ],
        "takes 5 arguments",
    );
    expect_err(
        &["run", k, "--kernel", "axpb", "--grid", "0", "--block", "1"],
        "positive",
    );
    expect_err(
        &[
            "run", k, "--kernel", "axpb", "--grid", "1", "--block", "1", "--arg", "q8:1",
        ],
        "unknown kind",
    );
    expect_err(
        &[
            "run",
            k,
            "--kernel",
            "axpb",
            "--grid",
            "1",
            "--block",
            "1",
            "--arg",
            "out:/nonexistent-out:4",
            "--arg",
            "in:/nonexistent",
            "--arg",
            "f32:1",
            "--arg",
            "f32:1",
            "--arg",
            "i32:1",
        ],
        "/nonexistent",
    );
    expect_err(
        &[
            "run", k, "--kernel", "axpb", "--grid", "1", "--block", "1", "--arg", "i32:1", "--arg",
            "i32:1", "--arg", "f32:1", "--arg", "f32:1", "--arg", "i32:1",
        ],
        "buffer",
    );
    expect_err(
        &[
            "run",
            "/nonexistent.hip",
            "--kernel",
            "axpb",
            "--grid",
            "1",
            "--block",
            "1",
        ],
        "/nonexistent.hip",
    );
    let junk = dir.path().join("junk.hsaco");
    std::fs::write(&junk, b"\x7fELF not really").unwrap();
    expect_err(
        &[
            "run",
            junk.to_str().unwrap(),
            "--kernel",
            "axpb",
            "--grid",
            "1",
            "--block",
            "1",
        ],
        "invalid code object",
    );
}

#[test]
fn an_empty_source_or_one_without_kernels_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let env = [("HCQ_CACHE_DIR", cache.to_str().unwrap())];
    let expect_err = |args: &[&str], needles: &[&str]| {
        let o = hcq(args, &env);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    };
    let empty = dir.path().join("empty.hip");
    std::fs::write(&empty, "").unwrap();
    let blank = dir.path().join("blank.hip");
    std::fs::write(&blank, "\n  \n").unwrap();
    let out = dir.path().join("out.hsaco");
    for file in [&empty, &blank] {
        let f = file.to_str().unwrap();
        expect_err(
            &["run", f, "--kernel", "k", "--grid", "1", "--block", "1"],
            &[f, "is empty"],
        );
        expect_err(
            &["compile", f, "-o", out.to_str().unwrap()],
            &[f, "is empty"],
        );
        assert!(!out.exists());
    }
    let no_kernels = dir.path().join("helpers.hip");
    std::fs::write(
        &no_kernels,
        "__attribute__((device)) int twice(int x) { return 2 * x; }\n",
    )
    .unwrap();
    expect_err(
        &[
            "run",
            no_kernels.to_str().unwrap(),
            "--kernel",
            "k",
            "--grid",
            "1",
            "--block",
            "1",
        ],
        &["no kernels"],
    );
}

#[test]
fn bench_emu_verifies_and_times_each_kernel_against_native() {
    let o = hcq(
        &["bench", "emu", "--json", "--n", "4096", "--matmul", "32"],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = stdout(&o);
    let figures: Vec<serde_json::Value> = s
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let names: Vec<&str> = figures.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "emu_saxpy_4k",
            "emu_saxpy_4k_gpu",
            "emu_saxpy_4k_winst",
            "emu_matmul_32",
            "emu_matmul_32_gpu",
            "emu_matmul_32_winst",
            "emu_reduce_4k",
            "emu_reduce_4k_gpu",
            "emu_reduce_4k_winst",
        ],
        "{s}"
    );
    for v in &figures {
        let unit = if v["name"].as_str().unwrap().ends_with("_winst") {
            "Mwinst/s"
        } else {
            "ms"
        };
        assert_eq!(v["unit"], unit, "{v}");
        check_spread(v, 3);
        let (value, baseline, ratio) = (
            v["value"].as_f64().unwrap(),
            v["baseline"].as_f64().unwrap(),
            v["ratio"].as_f64().unwrap(),
        );
        assert!(value > 0.0 && baseline >= 0.0 && ratio > 0.0, "{v}");
        // The printed figures are rounded to 0.001 ms; the ratio is of the exact ones.
        if baseline >= 0.05 {
            assert!((ratio - value / baseline).abs() <= 0.05 * ratio, "{v}");
        }
    }
}

#[test]
fn bench_emu_rejects_empty_sizes() {
    let o = hcq(&["bench", "emu", "--n", "0"], &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--n"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn bench_copy_prints_three_throughputs_against_memcpy() {
    let o = hcq(&["bench", "copy", "--json", "--mib", "9"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = stdout(&o);
    let figures: Vec<serde_json::Value> = s
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let names: Vec<&str> = figures
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["copy_in_9mib", "copy_out_9mib", "d2d_same_gpu_9mib"],
        "{s}"
    );
    for v in &figures {
        assert_eq!(v["unit"], "GB/s");
        check_spread(v, 3);
        let (value, baseline, ratio) = (
            v["value"].as_f64().unwrap(),
            v["baseline"].as_f64().unwrap(),
            v["ratio"].as_f64().unwrap(),
        );
        assert!(value > 0.0 && baseline > 0.0, "{v}");
        assert!(
            (ratio - value / baseline).abs() <= 0.01 + 0.01 * ratio,
            "{v}"
        );
    }
}

#[test]
fn run_sizes_dynamic_lds_with_lds() {
    const SRC: &str = r#"
extern "C" __attribute__((global)) void rev(int* out) {
  extern __attribute__((shared)) int tile[];
  int t = __builtin_amdgcn_workitem_id_x();
  tile[t] = t * 5;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  out[t] = tile[63 - t];
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(p("rev.hip"), SRC).unwrap();
    let (src, out) = (p("rev.hip"), format!("out:{}:256", p("o.bin")));
    let base = [
        "run", &src, "--kernel", "rev", "--grid", "1", "--block", "64",
    ];
    let mut with_lds = base.to_vec();
    with_lds.extend_from_slice(&["--lds", "256", "--arg", &out]);
    let o = hcq(&with_lds, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<i32> = std::fs::read(p("o.bin"))
        .unwrap()
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want: Vec<i32> = (0..64).map(|t| (63 - t) * 5).collect();
    assert_eq!(got, want);
    // Without the LDS the kernel runs out of its workgroup's LDS: a fault naming the access.
    let mut without = base.to_vec();
    without.extend_from_slice(&["--arg", &out]);
    let o = hcq(&without, &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("LDS"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn run_passes_narrow_scalars_and_struct_bytes() {
    const SRC: &str = r#"
struct Three { int a; int b; int c; };
extern "C" __attribute__((global)) void take(int* out, bool f, unsigned char u, short s,
                                             struct Three t) {
  out[0] = f; out[1] = u; out[2] = s; out[3] = t.a; out[4] = t.b; out[5] = t.c;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(p("take.hip"), SRC).unwrap();
    let (src, out) = (p("take.hip"), format!("out:{}:24", p("o.bin")));
    // a = 1, b = -2, c = 0x01020304, little-endian.
    let args = [
        "run",
        &src,
        "--kernel",
        "take",
        "--grid",
        "1",
        "--block",
        "1",
        "--arg",
        &out,
        "--arg",
        "bool:true",
        "--arg",
        "u8:250",
        "--arg",
        "i16:-300",
        "--arg",
        "bytes:01000000feffffff04030201",
    ];
    let o = hcq(&args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<i32> = std::fs::read(p("o.bin"))
        .unwrap()
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [1, 250, -300, 1, -2, 0x01020304]);
    let mut bad = args.to_vec();
    bad[17] = "bytes:0100";
    let o = hcq(&bad, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains("argument 4") && err.contains("12 bytes"),
        "{err}"
    );
    bad[17] = "bytes:0g";
    assert!(!hcq(&bad, &[]).status.success());
}

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

/// `hcq devices --json` and `-v`: each device's compute shape, checked against the emulated
/// kernel's own topology and sysfs (the properties KFD publishes, the PCI device holding the
/// render node) and its KFD version under each kernel's rules.
#[cfg(target_os = "linux")]
#[test]
fn devices_json_and_verbose_describe_the_compute_shape() {
    use hcq_amd_sys::seam::Syscalls;
    use hcq_emu::{EmuConfig, EmuKernel, KfdRules};
    const NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";
    for (rules, version) in [("6.12", "KFD 1.16"), ("6.6", "KFD 1.14")] {
        let env = [
            ("HCQ_EMU_GPUS", "2"),
            ("HCQ_EMU_CUS", "84"),
            ("HCQ_EMU_KERNEL", rules),
        ];
        let o = hcq(&["devices", "--json"], &env);
        assert!(o.status.success(), "{o:?}");
        let k = EmuKernel::new(EmuConfig {
            gpus: 2,
            cus: 84,
            kernel: KfdRules::from_name(rules).unwrap(),
            ..EmuConfig::default()
        });
        let lines: Vec<serde_json::Value> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2);
        for (i, d) in lines.iter().enumerate() {
            let props = k
                .read_to_string(&format!("{NODES}/{}/properties", i + 1))
                .unwrap();
            let prop = |name: &str| -> u64 {
                props
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            assert_eq!(d["name"], format!("amd-emu:{i}"));
            assert_eq!(d["emulated"], true);
            let c = &d["compute"];
            assert_eq!(c["compute_units"], 84);
            assert_eq!(c["shader_engines"], 6);
            assert_eq!(c["simds_per_cu"], prop("simd_per_cu"));
            assert_eq!(c["wave_size"], 32);
            assert_eq!(
                c["max_waves_per_cu"],
                prop("max_waves_per_simd") * prop("simd_per_cu")
            );
            assert_eq!(c["lds_per_workgroup"], 65536);
            assert_eq!(c["max_clock_mhz"], prop("max_engine_clk_fcompute"));
            assert_eq!(c["render_minor"], prop("drm_render_minor"));
            assert_eq!(c["driver_version"], version);
            assert!(c["copy_engine_missing"].is_null(), "{d}");
            // KFD's caches of an 84-CU gfx1100 (12 shader arrays of 7 CUs), by kind: level,
            // data, instruction, KiB, CUs sharing one, instances.
            let caches: Vec<(u64, bool, bool, u64, u64, u64)> = c["caches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| {
                    (
                        k["level"].as_u64().unwrap(),
                        k["data"].as_bool().unwrap(),
                        k["instruction"].as_bool().unwrap(),
                        k["bytes"].as_u64().unwrap() / 1024,
                        k["shared_by_cus"].as_u64().unwrap(),
                        k["instances"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(
                caches,
                [
                    (1, true, false, 16, 2, 42),
                    (1, true, false, 32, 1, 84),
                    (1, false, true, 32, 2, 42),
                    (1, true, false, 256, 7, 12),
                    (2, true, false, 6 << 10, 84, 1),
                    (3, true, false, 96 << 10, 84, 1),
                ],
                "{d}"
            );
            assert_eq!(
                caches.iter().map(|k| k.5).sum::<u64>(),
                prop("caches_count"),
                "the node's caches_count"
            );
            let free = c["free_memory"].as_u64().unwrap();
            assert!(free > 0 && free <= d["memory"].as_u64().unwrap(), "{d}");
            // GTT is the host's memory: the CPU node's memory bank.
            let host = k
                .read_to_string(&format!("{NODES}/0/mem_banks/0/properties"))
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("size_in_bytes "))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap();
            assert_eq!(c["gtt_memory"].as_u64(), Some(host), "{d}");
            assert!(c["gtt_free"].as_u64().unwrap() <= host, "{d}");
            // The PCI device at that location holds the render node.
            let pci = c["pci_location"].as_str().unwrap();
            let minor = prop("drm_render_minor");
            assert_eq!(
                k.read_to_string(&format!(
                    "/sys/devices/pci0000:00/{pci}/drm/renderD{minor}/dev"
                ))
                .unwrap()
                .trim(),
                format!("226:{minor}")
            );
        }
        let o = hcq(&["devices", "-v"], &env);
        let text = stdout(&o);
        assert!(o.status.success(), "{o:?}");
        assert!(
            text.contains("84 compute units in 6 shader engines") && text.contains(version),
            "{text}"
        );
        assert!(!text.contains("no copy engine"), "{text}");
        assert!(
            text.contains("L2 data cache: 6.0 MiB shared by 84 CUs, 1 of them"),
            "{text}"
        );
    }
    // A GPU whose kernel driver has no SDMA queue left says why, in both forms.
    let env = [("HCQ_EMU_SDMA_QUEUES", "0")];
    let o = hcq(&["devices", "--json"], &env);
    assert!(o.status.success(), "{o:?}");
    let d: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let why = d["compute"]["copy_engine_missing"].as_str().unwrap();
    assert!(why.contains("SDMA") && why.contains("os error 12"), "{why}");
    let o = hcq(&["devices", "-v"], &env);
    let text = stdout(&o);
    assert!(
        o.status.success() && text.contains("no copy engine (copies run on the compute queue)"),
        "{text}"
    );
}

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
        "devices", "demo", "run", "disasm", "compile", "exec", "soak", "bench",
    ] {
        let o = hcq(&[command, "--help"], &[]);
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
fn a_wrong_argument_kind_lists_every_kind() {
    for bad in ["f128:1", "f128", "ptr:3"] {
        let o = hcq(
            &[
                "run", "x.hip", "--kernel", "k", "--grid", "1", "--block", "1", "--arg", bad,
            ],
            &[],
        );
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!o.status.success(), "{bad}");
        for kind in ["i8", "u16", "f64", "bool", "bytes", "inout"] {
            assert!(err.contains(kind), "{bad}: {err}");
        }
    }
}

#[test]
fn run_compile_and_disasm_take_compile_options() {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("inc");
    std::fs::create_dir(&inc).unwrap();
    std::fs::write(inc.join("step.h"), "#define STEP 7\n").unwrap();
    let k = dir.path().join("k.hip");
    std::fs::write(
        &k,
        "#include \"step.h\"\n__global__ void fill(int* o) { o[threadIdx.x] = threadIdx.x * STEP + BASE; }\n",
    )
    .unwrap();
    let (k, out) = (k.to_str().unwrap(), dir.path().join("o.bin"));
    let inc = inc.to_str().unwrap();
    let out_arg = format!("out:{}:256", out.display());
    let ints = |path: &std::path::Path| -> Vec<i32> {
        std::fs::read(path)
            .unwrap()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let want = |base: i32| (0..64).map(|t| t * 7 + base).collect::<Vec<i32>>();
    let o = hcq(
        &[
            "run",
            k,
            "--kernel",
            "fill",
            "--grid",
            "1",
            "--block",
            "64",
            "--arg",
            &out_arg,
            "-I",
            inc,
            "-D",
            "BASE=-5",
            "-O",
            "1",
            "--flag=-ffast-math",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(ints(&out), want(-5));
    // Attached forms, and `hcq compile` then `hcq run` of the object.
    let object = dir.path().join("k.hsaco");
    let object = object.to_str().unwrap();
    let inc_attached = format!("-I{inc}");
    let o = hcq(
        &["compile", k, "-o", object, &inc_attached, "-DBASE=40"],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = hcq(
        &[
            "run", object, "--kernel", "fill", "--grid", "1", "--block", "64", "--arg", &out_arg,
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(ints(&out), want(40));
    let o = hcq(&["disasm", k, "-I", inc, "-D", "BASE=1"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("s_endpgm"), "{}", stdout(&o));
    // Mistakes: a missing include directory, a bad macro, a level past 3, a reserved flag.
    for (args, needle) in [
        (vec!["-I", "/no/such/dir", "-D", "BASE=1"], "/no/such/dir"),
        (vec!["-D", "9BASE=1"], "9BASE"),
        (vec!["-O", "7"], "0..=3"),
        (vec!["-D", "BASE=1", "--flag=-E"], "-E"),
    ] {
        let mut cmd = vec!["compile", k, "-o", object];
        cmd.extend(args.iter().copied());
        let o = hcq(&cmd, &[]);
        assert!(!o.status.success(), "{cmd:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{cmd:?}: {err}");
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
}
