//! `hcq demo --trace FILE` writes a Chrome trace that Perfetto loads: valid JSON in the trace
//! event format, every kernel and copy of the demo on its engine's track with end >= start, and
//! read the same way by an independent reader of the format, Chrome DevTools' trace engine.

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
        .filter(|e| e["ph"] == "i" && e["cat"] == "hcq")
        .count();
    assert_eq!(
        submits,
        spans.len(),
        "one host submit marker per traced command"
    );
}

/// DevTools' own trace engine (`tests/devtools_trace.mjs`, run with Node on the package whose
/// directory `HCQ_TEST_TRACE_ENGINE` names; `scripts/test.sh` installs it) reads the demo's
/// trace as hcq wrote it: the device as a process with its compute and copy queues as threads,
/// every span on its thread with its time and length, and an arrow from each host submission
/// to the span it started.
#[test]
fn devtools_reads_the_tracks_spans_and_arrows() {
    let Some(engine) = std::env::var_os("HCQ_TEST_TRACE_ENGINE") else {
        eprintln!("HCQ_TEST_TRACE_ENGINE is not set (scripts/test.sh sets it): not run");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["demo", "--n", "500", "--trace", path.to_str().unwrap()])
        .env_remove("HCQ_DEVICE")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/devtools_trace.mjs");
    let o = Command::new("node")
        .arg(script)
        .arg(&engine)
        .arg(&path)
        .output()
        .expect("node runs (scripts/test.sh installs it with the engine)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seen: Value = serde_json::from_slice(&o.stdout).expect("the script prints JSON");

    // What hcq wrote, read directly.
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = written["traceEvents"].as_array().unwrap();
    let thread_name = |pid: u64, tid: u64| {
        events
            .iter()
            .find(|e| {
                e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid && e["tid"] == tid
            })
            .and_then(|e| e["args"]["name"].as_str())
            .unwrap_or("")
            .to_string()
    };
    // Every span hcq wrote is a span of DevTools' thread of the same name, at the same time
    // (DevTools keeps microseconds), and DevTools has no span hcq did not write.
    let threads = seen["threads"].as_array().unwrap();
    let mut spans_seen = 0;
    for span in events.iter().filter(|e| e["ph"] == "X") {
        let (pid, tid) = (span["pid"].as_u64().unwrap(), span["tid"].as_u64().unwrap());
        let thread = threads
            .iter()
            .find(|t| t["pid"] == pid && t["tid"] == tid)
            .unwrap_or_else(|| panic!("DevTools has no thread {pid}:{tid} for {span}"));
        assert_eq!(
            thread["name"].as_str(),
            Some(thread_name(pid, tid).as_str())
        );
        let found = thread["spans"].as_array().unwrap().iter().any(|s| {
            s["name"] == span["name"]
                && (s["ts"].as_f64().unwrap() - span["ts"].as_f64().unwrap()).abs() < 0.01
                && (s["dur"].as_f64().unwrap() - span["dur"].as_f64().unwrap()).abs() < 0.01
        });
        assert!(found, "DevTools does not show {span}");
        spans_seen += 1;
    }
    let devtools_spans: usize = threads
        .iter()
        .map(|t| t["spans"].as_array().unwrap().len())
        .sum();
    assert_eq!(devtools_spans, spans_seen, "{seen}");
    let names: Vec<&str> = threads.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"compute") && names.contains(&"copy"),
        "{names:?}"
    );
    assert!(spans_seen >= 20, "{spans_seen} spans");

    // One arrow per submission, from the host's marker to the GPU span of the same command.
    let flows = seen["flows"].as_array().unwrap();
    let starts = events.iter().filter(|e| e["ph"] == "s").count();
    assert_eq!(flows.len(), starts, "every arrow hcq wrote is bound");
    for flow in flows {
        let [from, to] = flow.as_array().unwrap().as_slice() else {
            panic!("an arrow of two events: {flow}");
        };
        assert_eq!(from["ph"], "i", "{flow}");
        assert_eq!(to["ph"], "X", "{flow}");
        assert_eq!(from["name"], to["name"], "{flow}");
        assert_eq!(from["pid"], to["pid"], "{flow}");
        let (from_tid, to_tid) = (from["tid"].as_u64().unwrap(), to["tid"].as_u64().unwrap());
        assert_eq!(thread_name(from["pid"].as_u64().unwrap(), from_tid), "host");
        assert_ne!(to_tid, from_tid, "{flow}");
        assert!(
            to["ts"].as_f64().unwrap() >= from["ts"].as_f64().unwrap(),
            "the GPU started the work before the host submitted it: {flow}"
        );
    }
}
