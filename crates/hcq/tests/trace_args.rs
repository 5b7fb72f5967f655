//! The trace read back with a JSON parser, as a trace viewer reads it: the kernel's span
//! carries its grid, block, LDS and code object, each copy its bytes and direction, every
//! span sits on its device's queue track, and an arrow (flow `s` to `f`) leads from each host
//! submission to the span of the work it started. Its own process: the trace is global.

use hcq::{Arg, Device};
use serde_json::Value;

const SRC: &str = "__global__ void k(int* o) { o[blockIdx.x * 64 + threadIdx.x] += 1; }";

#[test]
fn spans_carry_their_arguments_and_arrows_lead_from_submissions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    hcq::trace_to(&path).unwrap();
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev.program(&dev.compile(SRC).unwrap(), "k").unwrap();
    let n = 3 * 64;
    let buf = dev.alloc(n * 4).unwrap();
    buf.write(&vec![41i32; n]).unwrap();
    prg.launch(&[Arg::Buffer(&buf)], [3, 1, 1], [64, 1, 1])
        .unwrap();
    assert_eq!(buf.read::<i32>().unwrap(), vec![42; n]);
    hcq::trace_finish().unwrap();

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let of = |ph: &str| -> Vec<&Value> { events.iter().filter(|e| e["ph"] == ph).collect() };
    // Tracks: the device is a process, its queues and the host are threads.
    let names = of("M");
    let named = |what: &str, name: &str| {
        names
            .iter()
            .find(|e| e["name"] == what && e["args"]["name"] == name)
            .unwrap_or_else(|| panic!("no {what} {name}"))
    };
    let pid = named("process_name", "amd-emu:0")["pid"].clone();
    let tid = |thread: &str| {
        names
            .iter()
            .find(|e| e["name"] == "thread_name" && e["args"]["name"] == thread && e["pid"] == pid)
            .unwrap_or_else(|| panic!("no {thread} track"))["tid"]
            .clone()
    };
    let (compute, copy, host) = (tid("compute"), tid("copy"), tid("host"));

    let spans = of("X");
    let span = |name: &str| {
        spans
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    };
    let kernel = span("k");
    assert_eq!((&kernel["pid"], &kernel["tid"]), (&pid, &compute));
    let args = &kernel["args"];
    assert_eq!(args["grid"], "3x1x1");
    assert_eq!(args["block"], "64x1x1");
    assert_eq!(args["lds"], 0);
    assert!(
        args["code object"].as_str().unwrap().starts_with("0x"),
        "{args}"
    );
    assert_eq!(args["finished"], true);
    for (name, direction) in [
        ("copy in", "host to device"),
        ("copy out", "device to host"),
    ] {
        let c = span(name);
        assert_eq!((&c["pid"], &c["tid"]), (&pid, &copy), "{name}");
        assert_eq!(c["args"]["bytes"], n as u64 * 4, "{name}");
        assert_eq!(c["args"]["direction"], direction, "{name}");
    }

    // One arrow per span: from a submission instant on the host track to the span's start.
    let (starts, ends) = (of("s"), of("f"));
    assert_eq!(ends.len(), spans.len());
    assert_eq!(starts.len(), spans.len());
    for s in &spans {
        let f = ends
            .iter()
            .find(|f| f["ts"] == s["ts"] && f["tid"] == s["tid"] && f["pid"] == s["pid"])
            .unwrap_or_else(|| panic!("no arrow ends at {}", s["name"]));
        assert_eq!(f["bp"], "e");
        let start = starts
            .iter()
            .find(|b| b["id"] == f["id"])
            .unwrap_or_else(|| panic!("the arrow to {} has no start", s["name"]));
        assert_eq!((&start["pid"], &start["tid"]), (&pid, &host));
        // The GPU's times are converted to the host's clock: allow them a little skew.
        let (submitted, ran) = (start["ts"].as_f64().unwrap(), s["ts"].as_f64().unwrap());
        assert!(
            submitted <= ran + 100.0,
            "submitted at {submitted}, ran at {ran}"
        );
        // The submission instant it starts from, named as the work.
        assert!(of("i")
            .iter()
            .any(|i| i["ts"] == start["ts"] && i["name"] == s["name"]));
    }
}
