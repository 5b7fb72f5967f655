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

#[test]
fn bench_launch_prints_json_with_a_baseline() {
    let o = hcq(&["bench", "launch", "--json", "--launches", "3000"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 1, "{s}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("one JSON object per line");
    assert_eq!(v["name"], "launch_enqueue");
    assert_eq!(v["unit"], "ns");
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
            "f32:1",
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
