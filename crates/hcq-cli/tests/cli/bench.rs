//! `hcq bench`: JSON figures with their spread and baseline.

use crate::common::{hcq, stdout};

/// A benchmark figure's spread: its value is the median of at least `repetitions`
/// repetitions, between their min and max.
fn check_spread(v: &serde_json::Value, repetitions: u64) {
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert_eq!(f("median"), f("value"), "{v}");
    assert!(f("min") <= f("median") && f("median") <= f("max"), "{v}");
    assert!(v["repetitions"].as_u64().unwrap() >= repetitions, "{v}");
    let wide = f("max") - f("min") > f("median").abs();
    assert_eq!(v["noisy"].as_bool(), Some(wide), "{v}");
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
fn bench_copy_prints_warm_first_touch_and_device_throughputs_against_memcpy() {
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
        [
            "copy_in_9mib",
            "copy_out_9mib",
            "copy_in_first_touch_9mib",
            "copy_out_first_touch_9mib",
            "d2d_same_gpu_9mib"
        ],
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
