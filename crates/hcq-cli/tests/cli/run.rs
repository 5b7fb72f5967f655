//! `hcq run` (and `compile` and `disasm` where they share its options): arguments, options and
//! the errors a user sees.

use crate::common::{floats, hcq, stdout, RUN_SRC};

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
