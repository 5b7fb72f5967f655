//! `hcq demo`: the prebuilt kernels, verified.

use crate::common::{hcq, stdout};

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
