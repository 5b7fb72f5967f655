//! With tracing on, each graph replay is one span on its device's compute track, lasting at
//! least as long as the kernels it ran. Its own process: tracing is global.

use hcq::{Arg, Device, GraphArg, GraphBuilder};

const SRC: &str = r#"
extern "C" __attribute__((global)) void bump(int* x, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  for (int k = 0; k < 64; ++k)
    if (i < n) x[i] += 1;
}
"#;

#[test]
fn each_replay_is_a_span() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    hcq::trace_to(&path).unwrap();
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev.program(&dev.compile(SRC).unwrap(), "bump").unwrap();
    let n = 4096;
    let x = dev.alloc(n * 4).unwrap();
    x.write(&vec![0i32; n]).unwrap();
    let mut g = GraphBuilder::new();
    for _ in 0..3 {
        g.launch(
            &prg,
            &[
                GraphArg::Buffer(&x),
                GraphArg::Value(hcq::Arg::I32(n as i32)),
            ],
            [(n as u32 / 64).into(), 1.into(), 1.into()],
            [64.into(), 1.into(), 1.into()],
        )
        .unwrap();
    }
    let graph = g.build().unwrap();
    for _ in 0..4 {
        graph.replay(&[], &[]).unwrap();
    }
    // A graph with a copy runs two streams; its span covers both.
    let y = dev.alloc(n * 4).unwrap();
    let mut g = GraphBuilder::new();
    g.launch(
        &prg,
        &[
            GraphArg::Buffer(&x),
            GraphArg::Value(hcq::Arg::I32(n as i32)),
        ],
        [(n as u32 / 64).into(), 1.into(), 1.into()],
        [64.into(), 1.into(), 1.into()],
    )
    .unwrap();
    g.copy(&x, &y, n * 4).unwrap();
    let with_copy = g.build().unwrap();
    with_copy.replay(&[], &[]).unwrap();
    // One eager launch of the same kernel, for comparison.
    prg.launch(
        &[Arg::Buffer(&x), Arg::I32(n as i32)],
        [n as u32 / 64, 1, 1],
        [64, 1, 1],
    )
    .unwrap();
    dev.synchronize().unwrap();
    assert_eq!(x.read::<i32>().unwrap(), vec![14 * 64; n]);
    assert_eq!(y.read::<i32>().unwrap(), vec![13 * 64; n]);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("JSON");
    let events = trace["traceEvents"].as_array().unwrap();
    let spans = |name: &str| -> Vec<(f64, f64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
            .collect()
    };
    let replays = spans("graph replay");
    assert_eq!(replays.len(), 5, "{replays:?}");
    let eager = spans("bump");
    assert_eq!(eager.len(), 1, "{eager:?}");
    // Replays are in order, do not overlap, and take time.
    for w in replays.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0 + 1e-3, "{replays:?}");
    }
    for r in &replays {
        assert!(r.1 > 0.0, "{replays:?}");
    }
    // Each replay's span says what it ran: four of the three-kernel graph, then one of the
    // graph of a kernel and a copy.
    let args: Vec<(u64, u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "graph replay")
        .map(|e| {
            let a = &e["args"];
            assert_eq!(a["gpus"], 1, "{e}");
            assert_eq!(
                (a["inputs"].as_u64(), a["variables"].as_u64()),
                (Some(0), Some(0))
            );
            assert!(a["command dwords"].as_u64().unwrap() > 0, "{e}");
            (
                a["kernels"].as_u64().unwrap(),
                a["copies"].as_u64().unwrap(),
                a["gpus"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        args,
        [(3, 0, 1), (3, 0, 1), (3, 0, 1), (3, 0, 1), (1, 1, 1)]
    );
}
