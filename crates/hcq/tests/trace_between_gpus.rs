//! A copy between two emulated GPUs shows in the Chrome trace as a span on the source GPU's
//! copy track, like copies within one GPU. Its own process, because the GPU count is read when
//! the emulator starts.

use hcq::Device;
use serde_json::Value;

/// The complete ("X") spans of the trace at `path`, each with the names of its process (the
/// device) and thread (the engine queue).
fn spans(path: &std::path::Path) -> Vec<(String, String, Value)> {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("the trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let name_of = |kind: &str, pid: &Value, tid: Option<&Value>| {
        events
            .iter()
            .find(|e| {
                e["ph"] == "M"
                    && e["name"] == kind
                    && e["pid"] == *pid
                    && tid.is_none_or(|t| e["tid"] == *t)
            })
            .and_then(|e| e["args"]["name"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                name_of("process_name", &e["pid"], None),
                name_of("thread_name", &e["pid"], Some(&e["tid"])),
                e.clone(),
            )
        })
        .collect()
}

#[test]
fn a_copy_between_gpus_is_a_span_on_the_source_copy_track() {
    // Set before the emulator first starts; this process has only this test.
    std::env::set_var("HCQ_EMU_GPUS", "2");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    hcq::trace_to(&path).unwrap();
    let (d0, d1) = (
        Device::open("amd-emu:0").unwrap(),
        Device::open("amd-emu:1").unwrap(),
    );
    let n = 3 << 20;
    let data: Vec<u8> = (0..n).map(|i| (i * 29 % 251) as u8).collect();
    let (a, b) = (d0.alloc(n).unwrap(), d1.alloc(n).unwrap());
    a.copy_in(0, &data).unwrap();
    a.copy_to(0, &b, 0, n).unwrap();
    b.copy_to(0, &a, 0, n).unwrap();
    let mut out = vec![0u8; n];
    b.copy_out(0, &mut out).unwrap();
    assert!(out == data, "the data arrived");
    // The spans are resolved and written at each device's next synchronisation.
    d0.synchronize().unwrap();
    d1.synchronize().unwrap();

    let spans = spans(&path);
    for (from, to) in [("amd-emu:0", "amd-emu:1"), ("amd-emu:1", "amd-emu:0")] {
        let name = format!("copy to {to}");
        let found: Vec<_> = spans
            .iter()
            .filter(|(_, _, e)| e["name"] == *name)
            .collect();
        assert_eq!(found.len(), 1, "one span named {name:?}: {found:?}");
        let (device, track, e) = found[0];
        assert_eq!((device.as_str(), track.as_str()), (from, "copy"), "{e}");
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(ts > 0.0 && dur >= 0.0, "{e}");
    }
}
