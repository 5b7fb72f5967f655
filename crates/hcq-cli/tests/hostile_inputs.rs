//! `hcq run` given hostile inputs: malformed environment values, argument lists that do not
//! match the kernel, endless input files. Each must end quickly in a clear error.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const KERNEL_SRC: &str = r#"
extern "C" __attribute__((global)) void axpb(float* y, const float* x, float a, float b, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + b;
}
"#;

/// Runs `hcq` and kills it if it has not finished within `limit`, so that a regression that
/// reads forever fails the test instead of hanging it.
fn hcq_within(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hcq"));
    c.args(args)
        .env_remove("HCQ_DEVICE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("hcq runs");
    let start = Instant::now();
    while child.try_wait().expect("waiting for hcq").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("hcq output");
            panic!(
                "hcq {args:?} did not finish within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("hcq output")
}

/// The test kernel as a code object, compiled once per test (through the compile cache).
fn code_object(dir: &Path) -> String {
    let src = dir.join("k.hip");
    std::fs::write(&src, KERNEL_SRC).unwrap();
    let out = dir.join("k.hsaco");
    let (src, out) = (src.to_str().unwrap(), out.to_str().unwrap());
    let o = hcq_within(&["compile", src, "-o", out], &[], Duration::from_secs(120));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out.to_string()
}

fn run_args<'a>(k: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "run",
        k,
        "--kernel",
        "axpb",
        "--grid",
        "2",
        "--block",
        "64",
        "--device",
        "amd-emu:0",
    ];
    for a in args {
        v.push("--arg");
        v.push(a);
    }
    v
}

fn expect_failure(o: &Output, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "succeeded; stderr: {err}");
    assert_eq!(o.status.code(), Some(1), "not a clean error exit: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} missing from: {err}");
    }
    err
}

#[test]
fn malformed_environment_values_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let k = code_object(dir.path());
    let y = dir.path().join("y.bin");
    let out = format!("out:{}:256", y.display());
    let x = dir.path().join("x.bin");
    std::fs::write(&x, [0u8; 256]).unwrap();
    let input = format!("in:{}", x.display());
    let args = run_args(&k, &[&out, &input, "f32:1", "f32:2", "i32:64"]);
    for (variable, value) in [
        ("HCQ_EMU_VRAM", "1.5G"),
        ("HCQ_EMU_GPUS", "65"),
        ("HCQ_WAIT_TIMEOUT_MS", "abc"),
        ("HCQ_EMU_MAX_STEPS", "-1"),
    ] {
        let o = hcq_within(&args, &[(variable, value)], Duration::from_secs(60));
        let quoted = format!("{value:?}");
        expect_failure(&o, &[variable, &quoted, "expected", "invalid argument"]);
        assert!(!y.exists(), "{variable}: the kernel ran");
    }
    // The same command with valid or empty values runs.
    let o = hcq_within(
        &args,
        &[
            ("HCQ_EMU_VRAM", "1536M"),
            ("HCQ_EMU_GPUS", ""),
            ("HCQ_WAIT_TIMEOUT_MS", "20000"),
            ("HCQ_EMU_MAX_STEPS", "1_000_000"),
        ],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let y = std::fs::read(&y).unwrap();
    assert_eq!(y.len(), 256);
    for (i, c) in y.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes(c.try_into().unwrap());
        assert_eq!(v, 1.0f32.mul_add(0.0, 2.0), "element {i}");
    }
}

#[test]
fn argument_mistakes_are_found_before_any_buffer_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let k = code_object(dir.path());
    // Each `out:` asks for 1 TiB, far beyond the emulated VRAM: allocating any of them would
    // fail with OutOfMemory, so only a check made before allocating gives these messages.
    let huge = |name: &str| format!("out:{}:{}", dir.path().join(name).display(), 1u64 << 40);
    let outs: Vec<String> = (0..200).map(|i| huge(&format!("o{i}.bin"))).collect();
    let many: Vec<&str> = outs.iter().map(String::as_str).collect();
    let start = Instant::now();
    let o = hcq_within(&run_args(&k, &many), &[], Duration::from_secs(60));
    let err = expect_failure(&o, &["takes 5 arguments", "got 200"]);
    assert!(!err.contains("memory"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
    // Right count, wrong kinds: a buffer where a float goes, a float where a buffer goes.
    let (a, b) = (huge("a.bin"), huge("b.bin"));
    let o = hcq_within(
        &run_args(&k, &[&a, &b, &huge("c.bin"), "f32:1", "i32:1"]),
        &[],
        Duration::from_secs(60),
    );
    expect_failure(&o, &["argument 2", "4-byte value, got a buffer"]);
    let o = hcq_within(
        &run_args(&k, &[&a, "f32:1", "f32:1", "f32:1", "i32:1"]),
        &[],
        Duration::from_secs(60),
    );
    expect_failure(&o, &["argument 1", "is a buffer", "got a value of 4 bytes"]);
    let o = hcq_within(
        &run_args(&k, &[&a, &b, "f32:1", "f64:1", "i32:1"]),
        &[],
        Duration::from_secs(60),
    );
    expect_failure(&o, &["argument 3", "is 4 bytes, got a value of 8 bytes"]);
    for i in 0..200 {
        assert!(!dir.path().join(format!("o{i}.bin")).exists());
    }
}

#[test]
fn endless_or_oversized_inputs_need_a_size() {
    let dir = tempfile::tempdir().unwrap();
    let k = code_object(dir.path());
    let y = dir.path().join("y.bin");
    let out = format!("out:{}:400", y.display());
    let limit = Duration::from_secs(60);
    // Without a size, a device file is refused rather than read forever.
    let o = hcq_within(
        &run_args(&k, &[&out, "in:/dev/zero", "f32:1", "f32:1", "i32:100"]),
        &[],
        limit,
    );
    expect_failure(
        &o,
        &["/dev/zero", "not a regular file", "in:/dev/zero:BYTES"],
    );
    // With one, exactly that much is read: x = 0, so y = a * 0 + b.
    let o = hcq_within(
        &run_args(
            &k,
            &[&out, "in:/dev/zero:400", "f32:3", "f32:-1.5", "i32:100"],
        ),
        &[],
        limit,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = std::fs::read(&y).unwrap();
    assert_eq!(got.len(), 400);
    for (i, c) in got.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes(c.try_into().unwrap());
        assert_eq!(v, 3.0f32.mul_add(0.0, -1.5), "element {i}");
    }
    // A size longer than the file is an error, not a short buffer.
    let x = dir.path().join("x.bin");
    std::fs::write(&x, [0u8; 100]).unwrap();
    let short = format!("in:{}:400", x.display());
    let o = hcq_within(
        &run_args(&k, &[&out, &short, "f32:1", "f32:1", "i32:100"]),
        &[],
        limit,
    );
    expect_failure(&o, &["x.bin", "ended after 100 bytes, 400 were to be read"]);
    // A regular file larger than the device's memory is refused before it is read.
    let big = dir.path().join("big.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let whole = format!("in:{}", big.display());
    let o = hcq_within(
        &run_args(&k, &[&out, &whole, "f32:1", "f32:1", "i32:100"]),
        &[("HCQ_EMU_VRAM", "128M")],
        limit,
    );
    expect_failure(&o, &["big.bin", "268435456 bytes", "134217728 bytes"]);
}
