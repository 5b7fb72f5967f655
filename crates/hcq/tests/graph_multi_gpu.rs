//! Graphs spanning two emulated GPUs: kernels on both, transfers between them in both
//! directions, inputs swapped on each side (one of them the destination of a transfer from the
//! other GPU), variables changing, checked element by element against the host. Its own
//! process, because the GPU count is read when the emulator starts.

use hcq::{Arg, Buffer, Device, DimExpr, GraphArg, GraphBuilder, Jit, JitArg};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
// out[i] = in[i] * 3 + k, for i < n.
KERNEL void scale_add(int* out, const int* in, int k, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = in[i] * 3 + k;
}
"#;

const N: usize = 1000;

fn scale_add(v: &[i32], k: i32) -> Vec<i32> {
    v.iter()
        .map(|x| x.wrapping_mul(3).wrapping_add(k))
        .collect()
}

fn filled(dev: &Device, values: &[i32]) -> Buffer {
    let b = dev.alloc(values.len() * 4).unwrap();
    b.write(values).unwrap();
    b
}

fn check(what: &str, got: &[i32], want: &[i32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: element {i}");
    }
}

fn devices() -> (Device, Device) {
    // Set before the emulator first starts; every test of this process sets the same value.
    std::env::set_var("HCQ_EMU_GPUS", "2");
    (
        Device::open("amd-emu:0").expect("first emulated GPU"),
        Device::open("amd-emu:1").expect("second emulated GPU"),
    )
}

#[test]
fn a_graph_across_two_gpus_matches_the_host_with_swapped_inputs_and_variables() {
    let (d0, d1) = devices();
    let lib = d0.compile(SRC).expect("compiles with clang-19");
    let (k0, k1) = (
        d0.program(&lib, "scale_add").unwrap(),
        d1.program(&lib, "scale_add").unwrap(),
    );
    let xs: Vec<Vec<i32>> = (0..3)
        .map(|s| (0..N as i32).map(|i| i * (s + 1) - 7 * s).collect())
        .collect();
    let x_bufs: Vec<Buffer> = xs.iter().map(|x| filled(&d0, x)).collect();
    let outs: Vec<Buffer> = (0..2).map(|_| filled(&d0, &[0; N])).collect();
    let t0 = d0.alloc(N * 4).unwrap();
    let b1 = d1.alloc(N * 4).unwrap();
    let c1 = d1.alloc(N * 4).unwrap();
    let final0 = d0.alloc(N * 4).unwrap();

    let mut g = GraphBuilder::new();
    let k = g.var("k", -1000, 1000).unwrap();
    let k2 = g.var("k2", 0, 1 << 20).unwrap();
    // How much of c1 the kernel on d1 writes: its grid is re-patched on every change.
    let len = g.var("len", 1, N as i32).unwrap();
    let x = g.input(&x_bufs[0]);
    let out = g.input(&outs[0]);
    let blocks = [DimExpr::from((N as u32).div_ceil(64)), 1.into(), 1.into()];
    let group = [DimExpr::from(64), 1.into(), 1.into()];
    let n = GraphArg::Value(hcq::Arg::I32(N as i32));
    // d0: t0 = x*3 + k
    g.launch(
        &k0,
        &[
            GraphArg::Buffer(&t0),
            GraphArg::Input(x),
            GraphArg::Var(k),
            n,
        ],
        blocks.clone(),
        group.clone(),
    )
    .unwrap();
    // d0 -> d1
    g.copy(&t0, &b1, N * 4).unwrap();
    // d1: c1[..len] = b1*3 + k2, over ceil(len / 32) workgroups of 32
    g.launch(
        &k1,
        &[
            GraphArg::Buffer(&c1),
            GraphArg::Buffer(&b1),
            GraphArg::Var(k2),
            GraphArg::Var(len),
        ],
        [DimExpr::from(len).ceil_div(32), 1.into(), 1.into()],
        [32.into(), 1.into(), 1.into()],
    )
    .unwrap();
    // d1 -> d0, into a swappable input
    g.copy(&c1, out, N * 4).unwrap();
    // d0: final0 = out*3 + k
    g.launch(
        &k0,
        &[
            GraphArg::Buffer(&final0),
            GraphArg::Input(out),
            GraphArg::Var(k),
            n,
        ],
        blocks,
        group,
    )
    .unwrap();
    let graph = g.build().expect("a graph across two GPUs builds");
    assert_eq!(graph.devices().len(), 2);

    let mut c1_host = vec![0i32; N];
    c1.write(&c1_host).unwrap();
    let mut outs_host = vec![vec![0i32; N]; 2];
    for r in 0..300usize {
        let (xi, oi) = (r % 3, r % 2);
        let (kv, k2v) = ((r as i32 * 37) % 2001 - 1000, (r as i32 * 7919) % (1 << 20));
        let lv = 1 + (r * 389 % N) as i32;
        graph
            .replay(&[&x_bufs[xi], &outs[oi]], &[kv, k2v, lv])
            .unwrap();
        let t = scale_add(&xs[xi], kv);
        for i in 0..lv as usize {
            c1_host[i] = t[i].wrapping_mul(3).wrapping_add(k2v);
        }
        outs_host[oi] = c1_host.clone();
        // Several replays queued at once every few rounds: they pipeline.
        if r % 5 != 4 {
            continue;
        }
        let want_out = &outs_host[oi];
        check(
            &format!("replay {r}: out"),
            &outs[oi].read::<i32>().unwrap(),
            want_out,
        );
        check(
            &format!("replay {r}: final"),
            &final0.read::<i32>().unwrap(),
            &scale_add(want_out, kv),
        );
        // Reading d1's buffer synchronises d1 only: the graph's end is on its timeline too.
        check(
            &format!("replay {r}: c1"),
            &c1.read::<i32>().unwrap(),
            want_out,
        );
    }

    // An input on the wrong GPU is an error, and the graph stays usable.
    let elsewhere = filled(&d1, &[0; N]);
    let e = graph
        .replay(&[&elsewhere, &outs[0]], &[1, 2, N as i32])
        .unwrap_err();
    assert!(matches!(e, hcq::Error::InvalidArgument(_)), "{e}");
    // So is a length out of its bounds.
    let e = graph
        .replay(&[&x_bufs[2], &outs[1]], &[1, 2, N as i32 + 1])
        .unwrap_err();
    assert!(matches!(e, hcq::Error::InvalidArgument(_)), "{e}");
    graph
        .replay(&[&x_bufs[2], &outs[1]], &[1, 2, N as i32])
        .unwrap();
    check(
        "after the errors",
        &outs[1].read::<i32>().unwrap(),
        &scale_add(&scale_add(&xs[2], 1), 2),
    );
}

#[test]
fn replays_stay_ordered_with_eager_work_on_both_gpus() {
    let (d0, d1) = devices();
    let lib = d0.compile(SRC).expect("compiles with clang-19");
    let (k0, k1) = (
        d0.program(&lib, "scale_add").unwrap(),
        d1.program(&lib, "scale_add").unwrap(),
    );
    let a0 = filled(&d0, &[0; N]);
    let b1 = d1.alloc(N * 4).unwrap();
    let c1 = d1.alloc(N * 4).unwrap();
    // A graph whose only work is a transfer from d0 to d1: d1 runs nothing of it, yet its
    // timeline must order the graph with d1's eager work on both sides.
    let mut g = GraphBuilder::new();
    g.copy(&a0, &b1, N * 4).unwrap();
    let graph = g.build().unwrap();
    let blocks = [(N as u32).div_ceil(64), 1, 1];
    let mut expect_a: Vec<i32> = vec![0; N];
    for r in 0..40i32 {
        // Eager on d0: a0 = a0*3 + r (before the graph reads a0).
        k0.launch(
            &[
                Arg::Buffer(&a0),
                Arg::Buffer(&a0),
                Arg::I32(r),
                Arg::I32(N as i32),
            ],
            blocks,
            [64, 1, 1],
        )
        .unwrap();
        expect_a = scale_add(&expect_a, r);
        // Eager on d1 writing b1 before the graph overwrites it (write after write).
        k1.launch(
            &[
                Arg::Buffer(&b1),
                Arg::Buffer(&c1),
                Arg::I32(-1),
                Arg::I32(N as i32),
            ],
            blocks,
            [64, 1, 1],
        )
        .unwrap();
        graph.replay(&[], &[]).unwrap();
        // Eager on d1 after the graph, reading what it transferred; no host wait between.
        k1.launch(
            &[
                Arg::Buffer(&c1),
                Arg::Buffer(&b1),
                Arg::I32(r),
                Arg::I32(N as i32),
            ],
            blocks,
            [64, 1, 1],
        )
        .unwrap();
        check(
            &format!("round {r}"),
            &c1.read::<i32>().unwrap(),
            &scale_add(&expect_a, r),
        );
    }
}

#[test]
fn a_jit_captures_launches_and_transfers_on_two_gpus() {
    let (d0, d1) = devices();
    let lib = d0.compile(SRC).expect("compiles with clang-19");
    let (k0, k1) = (
        d0.program(&lib, "scale_add").unwrap(),
        d1.program(&lib, "scale_add").unwrap(),
    );
    let (t0, b1, c1) = (
        d0.alloc(N * 4).unwrap(),
        d1.alloc(N * 4).unwrap(),
        d1.alloc(N * 4).unwrap(),
    );
    let groups = [DimExpr::from((N as u32).div_ceil(64)), 1.into(), 1.into()];
    let group = || [DimExpr::from(64), 1.into(), 1.into()];
    // out (on d0) = ((x * 3 + k) * 3 + 5), the second step on d1.
    let mut jit = Jit::new(&[("k", -100, 100)], |r| {
        r.launch(
            &k0,
            &[
                JitArg::Buffer(&t0),
                JitArg::Input(0),
                JitArg::Var(0),
                JitArg::Value(hcq::Arg::I32(N as i32)),
            ],
            groups.clone(),
            group(),
        )?;
        r.copy(JitArg::Buffer(&t0), JitArg::Buffer(&b1), N * 4)?;
        r.launch(
            &k1,
            &[
                JitArg::Buffer(&c1),
                JitArg::Buffer(&b1),
                JitArg::Value(hcq::Arg::I32(5)),
                JitArg::Value(hcq::Arg::I32(N as i32)),
            ],
            groups.clone(),
            group(),
        )?;
        r.copy(JitArg::Buffer(&c1), JitArg::Output(0), N * 4)
    })
    .unwrap();
    let xs: Vec<Vec<i32>> = (0..2)
        .map(|s| (0..N as i32).map(|i| i ^ (s * 0x55)).collect())
        .collect();
    let x_bufs: Vec<Buffer> = xs.iter().map(|x| filled(&d0, x)).collect();
    let outs: Vec<Buffer> = (0..3).map(|_| filled(&d0, &[0; N])).collect();
    let mut want = vec![vec![0i32; N]; 3];
    for call in 0..12usize {
        let (xi, oi, k) = (call % 2, call % 3, call as i32 * 13 % 201 - 100);
        jit.call(&[&x_bufs[xi]], &[&outs[oi]], &[k]).unwrap();
        want[oi] = scale_add(&scale_add(&xs[xi], k), 5);
        for (o, w) in outs.iter().zip(&want) {
            check(&format!("call {call}"), &o.read::<i32>().unwrap(), w);
        }
    }
    assert!(jit.is_captured(), "{:?}", jit.fallback_reason());
    // A variable is not a buffer.
    let mut bad = Jit::new(&[("k", 0, 1)], |r| {
        r.copy(JitArg::Var(0), JitArg::Output(0), 4)
    })
    .unwrap();
    let e = bad.call(&[], &[&outs[0]], &[0]).unwrap_err();
    assert!(matches!(e, hcq::Error::InvalidArgument(_)), "{e}");
}
