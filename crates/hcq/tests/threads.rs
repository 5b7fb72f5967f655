//! One device, one program and one graph shared by several threads: eager launches and graph
//! replays with each thread's own input interleave, and every thread's buffer ends up with
//! exactly its own increments.

use hcq::{Arg, Device, GraphArg, GraphBuilder};
use std::sync::Arc;

const SRC: &str = r#"
extern "C" __attribute__((global)) void inc(int* x) { x[__builtin_amdgcn_workitem_id_x()] += 1; }
"#;

#[test]
fn threads_share_a_device_a_program_and_a_graph() {
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev.program(&dev.compile(SRC).unwrap(), "inc").unwrap();
    let example = dev.alloc(256).unwrap();
    let mut g = GraphBuilder::new();
    let input = g.input(&example);
    g.launch(
        &prg,
        &[GraphArg::Input(input)],
        [1.into(), 1.into(), 1.into()],
        [64.into(), 1.into(), 1.into()],
    )
    .unwrap();
    let graph = Arc::new(g.build().unwrap());
    let rounds: usize = 150;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (dev, prg, graph) = (dev.clone(), prg.clone(), graph.clone());
            std::thread::spawn(move || {
                let mine = dev.alloc(256).unwrap();
                mine.write(&[0i32; 64]).unwrap();
                for i in 0..rounds {
                    if (i + t) % 3 == 0 {
                        prg.launch(&[Arg::Buffer(&mine)], [1, 1, 1], [64, 1, 1])
                            .unwrap();
                    } else {
                        graph.replay(&[&mine], &[]).unwrap();
                    }
                }
                mine.read::<i32>().unwrap()
            })
        })
        .collect();
    for (t, h) in threads.into_iter().enumerate() {
        let got = h.join().expect("no thread panics");
        assert_eq!(got, vec![rounds as i32; 64], "thread {t}");
    }
}
