//! Graphs and the JIT on the emulated GPU: replays with swapped inputs, changed variables and
//! re-patched launch dimensions checked element by element against the host, error cases that
//! leave the graph usable, ordering with eager work, chained indirect buffers.

use hcq::{Arg, Buffer, Device, DimExpr, GraphArg, GraphBuilder, Jit, JitArg, Program};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
static __attribute__((device)) inline int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}
// out[i] = x[i] * a + i, for i < n.
KERNEL void affine(int* out, const int* x, int a, int n) {
  int i = gid();
  if (i < n) out[i] = x[i] * a + i;
}
// out[i] += y[i] ^ b, for i < n.
KERNEL void accumulate(int* out, const int* y, int b, int n) {
  int i = gid();
  if (i < n) out[i] += y[i] ^ b;
}
// Every work-item of the grid writes its grid size and workgroup size (hidden arguments).
KERNEL void shape(int* out) {
  int i = gid();
  out[2 * i] = __builtin_amdgcn_workgroup_size_x();
  out[2 * i + 1] = i;
}
"#;

const MAX_N: usize = 200;

struct Kit {
    dev: Device,
    affine: Program,
    accumulate: Program,
    shape: Program,
}

fn kit() -> Kit {
    // Two emulated GPUs, so that an input on another device can be tried.
    std::env::set_var("HCQ_EMU_GPUS", "2");
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let lib = dev.compile(SRC).expect("compiles with clang-19");
    Kit {
        affine: dev.program(&lib, "affine").unwrap(),
        accumulate: dev.program(&lib, "accumulate").unwrap(),
        shape: dev.program(&lib, "shape").unwrap(),
        dev,
    }
}

fn filled(dev: &Device, values: &[i32]) -> Buffer {
    let b = dev.alloc(values.len() * 4).unwrap();
    b.write(values).unwrap();
    b
}

/// Host model of the two-kernel graph: out = (x * a + i) + (y ^ b) over n, untouched past n.
fn model(x: &[i32], y: &[i32], a: i32, b: i32, n: usize, before: &[i32]) -> Vec<i32> {
    let mut out = before.to_vec();
    for i in 0..n {
        out[i] = x[i]
            .wrapping_mul(a)
            .wrapping_add(i as i32)
            .wrapping_add(y[i] ^ b);
    }
    out
}

struct TwoKernelGraph {
    graph: hcq::Graph,
}

fn two_kernel_graph(k: &Kit, x0: &Buffer, out0: &Buffer, y: &Buffer) -> TwoKernelGraph {
    let mut g = GraphBuilder::new();
    let n = g.var("n", 1, MAX_N as i32).unwrap();
    let a = g.var("a", -1000, 1000).unwrap();
    let b = g.var("b", 0, 1 << 20).unwrap();
    let x = g.input(x0);
    let out = g.input(out0);
    let grid = || [DimExpr::from(n).ceil_div(32), 1.into(), 1.into()];
    let block = || [32.into(), 1.into(), 1.into()];
    g.launch(
        &k.affine,
        &[
            GraphArg::Input(out),
            GraphArg::Input(x),
            GraphArg::Var(a),
            GraphArg::Var(n),
        ],
        grid(),
        block(),
    )
    .unwrap();
    g.launch(
        &k.accumulate,
        &[
            GraphArg::Input(out),
            GraphArg::Buffer(y),
            GraphArg::Var(b),
            GraphArg::Var(n),
        ],
        grid(),
        block(),
    )
    .unwrap();
    TwoKernelGraph {
        graph: g.build().unwrap(),
    }
}

#[test]
fn ten_thousand_replays_with_swapped_inputs_variables_and_dims_match_the_host() {
    let k = kit();
    let xs: Vec<Vec<i32>> = (0..3)
        .map(|s| (0..MAX_N as i32).map(|i| i * 7 - 300 + s * 1000).collect())
        .collect();
    let y: Vec<i32> = (0..MAX_N as i32).map(|i| i * 31 + 5).collect();
    let x_bufs: Vec<Buffer> = xs.iter().map(|x| filled(&k.dev, x)).collect();
    let y_buf = filled(&k.dev, &y);
    const OUTS: usize = 8;
    let sentinel = vec![-7i32; MAX_N];
    let out_bufs: Vec<Buffer> = (0..OUTS).map(|_| filled(&k.dev, &sentinel)).collect();
    let g = two_kernel_graph(&k, &x_bufs[0], &out_bufs[0], &y_buf);
    let mut rng = 0x1234_5678u32;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        rng
    };
    let mut expected: Vec<Vec<i32>> = vec![sentinel.clone(); OUTS];
    let mut pending = Vec::new();
    for replay in 0..10_000usize {
        let slot = replay % OUTS;
        // Keep some replays identical to the one before (nothing to patch).
        let (xi, n, a, b) = if replay % 5 == 4 {
            pending
                .last()
                .map(|&(_, xi, n, a, b)| (xi, n, a, b))
                .unwrap_or((0, 1, 0, 0))
        } else {
            (
                next() as usize % 3,
                1 + next() as usize % MAX_N,
                (next() % 2001) as i32 - 1000,
                (next() % (1 << 20)) as i32,
            )
        };
        g.graph
            .replay(&[&x_bufs[xi], &out_bufs[slot]], &[n as i32, a, b])
            .unwrap();
        expected[slot] = model(&xs[xi], &y, a, b, n, &expected[slot]);
        pending.push((slot, xi, n, a, b));
        if pending.len() == OUTS {
            for &(slot, ..) in &pending {
                let got: Vec<i32> = out_bufs[slot].read().unwrap();
                assert_eq!(got, expected[slot], "replay {replay}, output {slot}");
            }
            pending.clear();
        }
    }
}

#[test]
fn errors_leave_the_graph_usable() {
    let k = kit();
    let x: Vec<i32> = (0..MAX_N as i32).collect();
    let y = vec![1i32; MAX_N];
    let (xb, yb) = (filled(&k.dev, &x), filled(&k.dev, &y));
    let out = filled(&k.dev, &vec![0; MAX_N]);
    let g = two_kernel_graph(&k, &xb, &out, &yb);
    g.graph.replay(&[&xb, &out], &[10, 2, 0]).unwrap();
    let err = |r: hcq::Result<()>| r.unwrap_err().to_string();
    // A variable out of bounds.
    let e = err(g.graph.replay(&[&xb, &out], &[MAX_N as i32 + 1, 2, 0]));
    assert!(e.contains("variable n") && e.contains("bounds"), "{e}");
    let e = err(g.graph.replay(&[&xb, &out], &[5, -1001, 0]));
    assert!(e.contains("variable a"), "{e}");
    // A wrong-sized input.
    let small = k.dev.alloc(16).unwrap();
    let e = err(g.graph.replay(&[&small, &out], &[5, 1, 0]));
    assert!(e.contains("input 0 is 16 bytes"), "{e}");
    // An input on another device.
    if let Ok(other) = Device::open("amd-emu:1") {
        let far = other.alloc(MAX_N * 4).unwrap();
        let e = err(g.graph.replay(&[&xb, &far], &[5, 1, 0]));
        assert!(e.contains("input 1 is on amd-emu:1"), "{e}");
    }
    // Wrong counts.
    assert!(g.graph.replay(&[&xb], &[5, 1, 0]).is_err());
    assert!(g.graph.replay(&[&xb, &out], &[5, 1]).is_err());
    // Still usable, with the values of this replay.
    let before: Vec<i32> = out.read().unwrap();
    g.graph.replay(&[&xb, &out], &[50, 3, 9]).unwrap();
    assert_eq!(out.read::<i32>().unwrap(), model(&x, &y, 3, 9, 50, &before));
}

#[test]
fn replays_interleave_in_order_with_eager_launches_and_copies() {
    let k = kit();
    let n = 64usize;
    let x: Vec<i32> = (0..n as i32).collect();
    let zeros = vec![0i32; n];
    let xb = filled(&k.dev, &x);
    let acc = filled(&k.dev, &zeros);
    // The graph: acc += x ^ 0 (accumulate), three times.
    let mut g = GraphBuilder::new();
    for _ in 0..3 {
        g.launch(
            &k.accumulate,
            &[
                GraphArg::Buffer(&acc),
                GraphArg::Buffer(&xb),
                GraphArg::Value(hcq::Arg::I32(0)),
                GraphArg::Value(hcq::Arg::I32(n as i32)),
            ],
            [2.into(), 1.into(), 1.into()],
            [32.into(), 1.into(), 1.into()],
        )
        .unwrap();
    }
    let graph = g.build().unwrap();
    let mut model = zeros.clone();
    let snapshot = k.dev.alloc(n * 4).unwrap();
    for round in 0..20 {
        graph.replay(&[], &[]).unwrap();
        for (m, v) in model.iter_mut().zip(&x) {
            *m += 3 * v;
        }
        // Eager launch: acc = acc * 1 + i (affine with a = 1 over acc itself) — in place.
        k.affine
            .launch(
                &[
                    Arg::Buffer(&acc),
                    Arg::Buffer(&acc),
                    Arg::I32(1),
                    Arg::I32(n as i32),
                ],
                [2, 1, 1],
                [32, 1, 1],
            )
            .unwrap();
        for (i, m) in model.iter_mut().enumerate() {
            *m += i as i32;
        }
        // A device copy sees everything before it.
        acc.copy_to(0, &snapshot, 0, n * 4).unwrap();
        graph.replay(&[], &[]).unwrap();
        for (m, v) in model.iter_mut().zip(&x) {
            *m += 3 * v;
        }
        if round % 5 == 4 {
            assert_eq!(acc.read::<i32>().unwrap(), model, "round {round}");
        }
    }
    let snap: Vec<i32> = snapshot.read().unwrap();
    let mut before_last: Vec<i32> = model.clone();
    for (m, v) in before_last.iter_mut().zip(&x) {
        *m -= 3 * v;
    }
    assert_eq!(snap, before_last);
}

#[test]
fn symbolic_workgroup_sizes_reach_hidden_arguments() {
    let k = kit();
    let out = filled(&k.dev, &[0i32; 2 * 256]);
    let mut g = GraphBuilder::new();
    let blocks = g.var("blocks", 1, 4).unwrap();
    let size = g.var("size", 1, 64).unwrap();
    g.launch(
        &k.shape,
        &[GraphArg::Buffer(&out)],
        [blocks.into(), 1.into(), 1.into()],
        [size.into(), 1.into(), 1.into()],
    )
    .unwrap();
    let graph = g.build().unwrap();
    for (bl, sz) in [(1, 1), (4, 64), (2, 33), (3, 7), (3, 7), (1, 64)] {
        out.write(&[-1i32; 512]).unwrap();
        graph.replay(&[], &[bl, sz]).unwrap();
        let got: Vec<i32> = out.read().unwrap();
        for i in 0..256usize {
            let want = if i < (bl * sz) as usize {
                [sz, i as i32]
            } else {
                [-1, -1]
            };
            assert_eq!(
                [got[2 * i], got[2 * i + 1]],
                want,
                "blocks {bl} size {sz} item {i}"
            );
        }
    }
    // A dimension outside the hardware's limits is an error, the graph stays usable.
    let mut g = GraphBuilder::new();
    let v = g.var("v", 1, 4096).unwrap();
    g.launch(
        &k.shape,
        &[GraphArg::Buffer(&out)],
        [1.into(), 1.into(), 1.into()],
        [v.into(), 1.into(), 1.into()],
    )
    .unwrap();
    let graph = g.build().unwrap();
    assert!(graph.replay(&[], &[2000]).is_err());
    graph.replay(&[], &[4]).unwrap();
    assert_eq!(out.read::<i32>().unwrap()[..8], [4, 0, 4, 1, 4, 2, 4, 3]);
}

#[test]
fn long_graphs_chain_indirect_buffers() {
    let k = kit();
    let n = 32usize;
    let x: Vec<i32> = (0..n as i32).map(|i| i * 3).collect();
    let xb = filled(&k.dev, &x);
    let acc = filled(&k.dev, &vec![0; n]);
    let mut g = GraphBuilder::new();
    g.segment_dwords(300);
    let b = g.var("b", 0, 1000).unwrap();
    let launches = 40;
    for _ in 0..launches {
        g.launch(
            &k.accumulate,
            &[
                GraphArg::Buffer(&acc),
                GraphArg::Buffer(&xb),
                GraphArg::Var(b),
                GraphArg::Value(hcq::Arg::I32(n as i32)),
            ],
            [1.into(), 1.into(), 1.into()],
            [32.into(), 1.into(), 1.into()],
        )
        .unwrap();
    }
    let graph = g.build().unwrap();
    assert!(
        graph.segment_count() > 5,
        "{} segments",
        graph.segment_count()
    );
    let mut model = vec![0i32; n];
    for bv in [0, 5, 5, 999] {
        graph.replay(&[], &[bv]).unwrap();
        for (m, v) in model.iter_mut().zip(&x) {
            *m += launches * (v ^ bv);
        }
    }
    assert_eq!(acc.read::<i32>().unwrap(), model);
}

#[test]
fn bad_graphs_are_rejected_at_build() {
    let k = kit();
    let out = filled(&k.dev, &[0; 8]);
    let mut g = GraphBuilder::new();
    // affine takes four arguments.
    g.launch(
        &k.affine,
        &[GraphArg::Buffer(&out)],
        [1.into(), 1.into(), 1.into()],
        [1.into(), 1.into(), 1.into()],
    )
    .unwrap();
    assert!(g
        .build()
        .unwrap_err()
        .to_string()
        .contains("takes 4 arguments"));
    let mut g = GraphBuilder::new();
    // A variable in a buffer slot.
    let v = g.var("v", 0, 1).unwrap();
    g.launch(
        &k.affine,
        &[
            GraphArg::Var(v),
            GraphArg::Buffer(&out),
            GraphArg::Value(hcq::Arg::I32(1)),
            GraphArg::Value(hcq::Arg::I32(1)),
        ],
        [1.into(), 1.into(), 1.into()],
        [1.into(), 1.into(), 1.into()],
    )
    .unwrap();
    assert!(g.build().is_err());
    assert!(GraphBuilder::new().var("e", 2, 1).is_err());
    assert!(GraphBuilder::new().build().is_err());
    // Copies are checked against the buffers when recorded.
    let mut g = GraphBuilder::new();
    assert!(g.copy(&out, &out, out.size() + 1).is_err());
    assert!(g.copy(&out, &out, 0).is_err());
}

#[test]
fn jit_replays_with_explicit_outputs_and_fresh_variable_values() {
    let k = kit();
    let n_max = 128usize;
    let scratch = k.dev.alloc(n_max * 4).unwrap();
    let (affine, accumulate) = (k.affine.clone(), k.accumulate.clone());
    let mut jit = Jit::new(&[("n", 1, n_max as i32), ("a", -50, 50)], move |r| {
        let grid = [r.var(0).ceil_div(32), 1.into(), 1.into()];
        let block = || [32.into(), 1.into(), 1.into()];
        // scratch = x * a + i; out = y ^ 0 ... then out += scratch via accumulate(out, scratch, 0)
        r.launch(
            &affine,
            &[
                JitArg::Buffer(&scratch),
                JitArg::Input(0),
                JitArg::Var(1),
                JitArg::Var(0),
            ],
            grid.clone(),
            block(),
        )?;
        r.launch(
            &accumulate,
            &[
                JitArg::Output(0),
                JitArg::Buffer(&scratch),
                JitArg::Value(hcq::Arg::I32(0)),
                JitArg::Var(0),
            ],
            grid,
            block(),
        )
    })
    .unwrap();
    let x: Vec<i32> = (0..n_max as i32).map(|i| i - 60).collect();
    let xb = filled(&k.dev, &x);
    let mut results = Vec::new();
    for call in 0..12usize {
        let n = 1 + (call * 37) % n_max;
        let a = (call as i32 * 7) % 50 - 25;
        let out = filled(&k.dev, &vec![0; n_max]);
        jit.call(&[&xb], &[&out], &[n as i32, a]).unwrap();
        results.push((out, n, a));
        assert_eq!(jit.is_captured(), call >= 1, "call {call}");
    }
    // Every call's output is its own: none was overwritten by a later call.
    for (i, (out, n, a)) in results.iter().enumerate() {
        let mut want = vec![0i32; n_max];
        for j in 0..*n {
            want[j] = x[j] * a + j as i32;
        }
        assert_eq!(out.read::<i32>().unwrap(), want, "call {i}");
    }
    // Wrong shapes and values are errors; the JIT goes on.
    let small = k.dev.alloc(8).unwrap();
    assert!(jit.call(&[&xb], &[&small], &[4, 1]).is_err());
    assert!(jit.call(&[&xb], &[&xb], &[4, 51]).is_err());
    let out = filled(&k.dev, &vec![0; n_max]);
    jit.call(&[&xb], &[&out], &[3, 2]).unwrap();
    assert_eq!(
        out.read::<i32>().unwrap()[..4],
        [x[0] * 2, x[1] * 2 + 1, x[2] * 2 + 2, 0]
    );
}

#[test]
fn jit_falls_back_to_eager_when_the_backend_cannot_graph() {
    let k = kit();
    let src = filled(&k.dev, &[1, 2, 3, 4]);
    let mut jit = Jit::new(&[], |r| {
        // Launches nothing: there is no graph to build.
        let _ = r;
        Ok(())
    })
    .unwrap();
    for _ in 0..3 {
        jit.call(&[&src], &[], &[]).unwrap();
    }
    assert!(!jit.is_captured());
    assert!(jit.fallback_reason().is_some());
}
