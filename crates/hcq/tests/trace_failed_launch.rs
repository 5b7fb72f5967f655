//! A launch that fails before it reaches the GPU (here: too few arguments) leaves no span in
//! the Chrome trace; the launches around it keep theirs. Its own process: tracing is global.

use hcq::{Arg, Device, Error};

const SRC: &str = r#"
extern "C" __attribute__((global)) void traced_fill(int* out, int v) {
  out[__builtin_amdgcn_workitem_id_x()] = v;
}
"#;

#[test]
fn a_failed_launch_leaves_no_span() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    hcq::trace_to(&path).unwrap();
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev
        .program(&dev.compile(SRC).unwrap(), "traced_fill")
        .unwrap();
    let out = dev.alloc(256).unwrap();
    prg.launch(&[Arg::Buffer(&out), Arg::I32(1)], [1, 1, 1], [64, 1, 1])
        .unwrap();
    let e = prg
        .launch(&[Arg::Buffer(&out)], [1, 1, 1], [64, 1, 1])
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    prg.launch(&[Arg::Buffer(&out), Arg::I32(2)], [1, 1, 1], [64, 1, 1])
        .unwrap();
    dev.synchronize().unwrap();
    assert_eq!(out.read::<i32>().unwrap()[..64], [2; 64]);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("JSON");
    let spans: Vec<&serde_json::Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "traced_fill")
        .collect();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for s in &spans {
        assert!(s["dur"].as_f64().unwrap() >= 0.0, "{s}");
    }
}
