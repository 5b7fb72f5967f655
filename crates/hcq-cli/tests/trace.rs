//! `hcq demo --trace FILE` writes a Chrome trace that Perfetto loads: valid JSON in the trace
//! event format, every kernel and copy of the demo on its engine's track with end >= start.

use serde_json::Value;
use std::process::Command;

#[test]
fn demo_trace_has_every_kernel_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["demo", "--n", "2000", "--trace", path.to_str().unwrap()])
        .env_remove("HCQ_DEVICE")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("the trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let mut thread_names = std::collections::HashMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("every event has a phase");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["name"].is_string(), "{e}");
        match ph {
            "M" => {
                if e["name"] == "thread_name" {
                    thread_names.insert(
                        (e["pid"].as_u64(), e["tid"].as_u64()),
                        e["args"]["name"].as_str().unwrap().to_string(),
                    );
                }
            }
            "X" => {
                let (ts, dur) = (
                    e["ts"].as_f64().expect("ts"),
                    e["dur"].as_f64().expect("dur"),
                );
                assert!(ts > 0.0 && dur >= 0.0, "{e}");
            }
            "i" => assert!(e["ts"].as_f64().is_some(), "{e}"),
            // The two ends of an arrow from a submission to its work.
            "s" | "f" => assert!(e["id"].is_u64() && e["ts"].as_f64().is_some(), "{e}"),
            other => panic!("unexpected phase {other}"),
        }
    }
    let spans: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let track = |e: &Value| {
        thread_names
            .get(&(e["pid"].as_u64(), e["tid"].as_u64()))
            .cloned()
            .unwrap_or_default()
    };
    for k in [
        "add_f32",
        "mul_f32",
        "saxpy_f32",
        "add_i32",
        "mul_i32",
        "mix_i32",
        "empty",
    ] {
        let n = spans.iter().filter(|e| e["name"] == k).count();
        assert!(n >= 1, "kernel {k} missing from the trace");
        assert!(spans
            .iter()
            .filter(|e| e["name"] == k)
            .all(|e| track(e) == "compute"));
    }
    // Each of the 6 verified kernels copies two inputs in and one result out.
    let copies_in = spans
        .iter()
        .filter(|e| e["name"] == "copy in" && track(e) == "copy")
        .count();
    let copies_out = spans
        .iter()
        .filter(|e| e["name"] == "copy out" && track(e) == "copy")
        .count();
    assert!(
        copies_in >= 12 && copies_out >= 6,
        "{copies_in} copies in, {copies_out} out"
    );
    let submits = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["cat"] == "submit")
        .count();
    assert_eq!(
        submits,
        spans.len(),
        "one host submit marker per traced command"
    );
}
