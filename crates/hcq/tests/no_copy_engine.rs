//! GPUs whose kernel driver has no SDMA queue left to give (tinygrad met it on real GPUs and
//! made its copy queue optional, PRs #13920 and #14036): the device opens anyway, says why it
//! has no copy engine, and every kind of copy runs on the compute queue as CP DMA, checked
//! element by element against the host: in and out (staged and in place), fills, on one GPU and
//! between two, ordered with kernels, and inside graphs on one GPU and across two. Its own
//! process: the emulator's settings are read when it first starts.

use hcq::{Buffer, Device, DimExpr, GraphArg, GraphBuilder};

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

fn launch(dev: &Device, prg: &hcq::Program, out: &Buffer, input: &Buffer, k: i32) {
    prg.launch(
        &[
            hcq::Arg::Buffer(out),
            hcq::Arg::Buffer(input),
            hcq::Arg::I32(k),
            hcq::Arg::I32(N as i32),
        ],
        [(N as u32).div_ceil(64), 1, 1],
        [64, 1, 1],
    )
    .unwrap_or_else(|e| panic!("launch on {}: {e}", dev.name()));
}

#[test]
fn every_copy_runs_on_the_compute_queue_when_kfd_has_no_sdma_queue() {
    std::env::set_var("HCQ_EMU_GPUS", "2");
    std::env::set_var("HCQ_EMU_SDMA_QUEUES", "0");
    let d0 = Device::open("amd-emu:0").expect("opens without a copy engine");
    let d1 = Device::open("amd-emu:1").expect("opens without a copy engine");
    for d in [&d0, &d1] {
        let info = d.info().compute.expect("AMD devices report their shape");
        let why = info.copy_engine_missing.expect("no copy engine");
        assert!(why.contains("SDMA"), "{why}");
    }
    let lib = d0.compile(SRC).expect("compiles with clang-19");
    let (k0, k1) = (
        d0.program(&lib, "scale_add").unwrap(),
        d1.program(&lib, "scale_add").unwrap(),
    );

    // In and out, staged (small) and in place (16 MiB and more), at an offset.
    let xs: Vec<i32> = (0..N as i32).map(|i| i * 13 - 4000).collect();
    let x = filled(&d0, &xs);
    check("copy in, copy out", &x.read::<i32>().unwrap(), &xs);
    let big: Vec<u8> = (0..(20usize << 20) + 12)
        .map(|i| (i * 31 + i / 4099) as u8)
        .collect();
    let b = d0.alloc(big.len() + 4).unwrap();
    b.copy_in(4, &big).unwrap();
    let mut back = vec![0u8; big.len()];
    b.copy_out(4, &mut back).unwrap();
    assert!(back == big, "a 20 MiB copy in and out");
    // A fill (CP DMA from the packet's data) of an unaligned view, several packets long.
    b.view(3, 5 << 20).unwrap().fill(0xa5u8).unwrap();
    b.copy_out(4, &mut back).unwrap();
    let mut want = big.clone();
    want[..(5 << 20) - 1].fill(0xa5);
    assert!(back == want, "a 5 MiB fill from byte 3");

    // Ordered with kernels on one GPU: kernel, copy of its output, kernel on the copy.
    let y = d0.alloc(N * 4).unwrap();
    let z = d0.alloc(N * 4).unwrap();
    launch(&d0, &k0, &y, &x, 5);
    y.copy_to(0, &z, 0, N * 4).unwrap();
    launch(&d0, &k0, &y, &z, -2);
    check(
        "kernel, copy, kernel",
        &y.read::<i32>().unwrap(),
        &scale_add(&scale_add(&xs, 5), -2),
    );

    // Between the GPUs, both ways, behind and ahead of kernels on both.
    let a1 = d1.alloc(N * 4).unwrap();
    let c1 = d1.alloc(N * 4).unwrap();
    z.copy_to(0, &a1, 0, N * 4).unwrap();
    launch(&d1, &k1, &c1, &a1, 7);
    c1.copy_to(0, &z, 0, N * 4).unwrap();
    let want = scale_add(&scale_add(&xs, 5), 7);
    check("GPU 0 -> GPU 1 -> GPU 0", &z.read::<i32>().unwrap(), &want);

    // A graph on one GPU: copy a swappable input in, a kernel, copy out to a swappable output.
    let inputs: Vec<Vec<i32>> = (0..3)
        .map(|s| (0..N as i32).map(|i| i * (s + 2) - 11 * s).collect())
        .collect();
    let in_bufs: Vec<Buffer> = inputs.iter().map(|v| filled(&d0, v)).collect();
    let outs: Vec<Buffer> = (0..2).map(|_| filled(&d0, &[0; N])).collect();
    let (s0, t0) = (d0.alloc(N * 4).unwrap(), d0.alloc(N * 4).unwrap());
    let mut g = GraphBuilder::new();
    let k = g.var("k", -1000, 1000).unwrap();
    let input = g.input(&in_bufs[0]);
    let out = g.input(&outs[0]);
    let blocks = [DimExpr::from((N as u32).div_ceil(64)), 1.into(), 1.into()];
    let group = [DimExpr::from(64), 1.into(), 1.into()];
    g.copy(input, &s0, N * 4).unwrap();
    g.launch(
        &k0,
        &[
            GraphArg::Buffer(&t0),
            GraphArg::Buffer(&s0),
            GraphArg::Var(k),
            GraphArg::Value(hcq::Arg::I32(N as i32)),
        ],
        blocks.clone(),
        group.clone(),
    )
    .unwrap();
    g.copy(&t0, out, N * 4).unwrap();
    let graph = g
        .build()
        .expect("a graph with copies builds without a copy engine");
    assert_eq!(
        graph.input_patch_count(input),
        1,
        "one DMA_DATA source word"
    );
    for r in 0..60usize {
        let (i, o, kv) = (r % 3, r % 2, (r as i32 * 37) % 1000 - 500);
        graph.replay(&[&in_bufs[i], &outs[o]], &[kv]).unwrap();
        check(
            &format!("one-GPU graph, replay {r}"),
            &outs[o].read::<i32>().unwrap(),
            &scale_add(&inputs[i], kv),
        );
    }

    // A graph across both GPUs: a kernel on GPU 0, its result copied to GPU 1 by GPU 0's
    // compute queue, a kernel there, and the result copied back into a swappable output.
    let (b1, e1) = (d1.alloc(N * 4).unwrap(), d1.alloc(N * 4).unwrap());
    let mut g = GraphBuilder::new();
    let k = g.var("k", -1000, 1000).unwrap();
    let input = g.input(&in_bufs[0]);
    let out = g.input(&outs[0]);
    let n = GraphArg::Value(hcq::Arg::I32(N as i32));
    g.launch(
        &k0,
        &[
            GraphArg::Buffer(&t0),
            GraphArg::Input(input),
            GraphArg::Var(k),
            n,
        ],
        blocks.clone(),
        group.clone(),
    )
    .unwrap();
    g.copy(&t0, &b1, N * 4).unwrap();
    g.launch(
        &k1,
        &[
            GraphArg::Buffer(&e1),
            GraphArg::Buffer(&b1),
            GraphArg::Value(hcq::Arg::I32(1)),
            n,
        ],
        blocks,
        group,
    )
    .unwrap();
    g.copy(&e1, out, N * 4).unwrap();
    let graph = g
        .build()
        .expect("a two-GPU graph builds without copy engines");
    for r in 0..40usize {
        let (i, o, kv) = (r % 3, (r + 1) % 2, (r as i32 * 53) % 1000 - 500);
        graph.replay(&[&in_bufs[i], &outs[o]], &[kv]).unwrap();
        check(
            &format!("two-GPU graph, replay {r}"),
            &outs[o].read::<i32>().unwrap(),
            &scale_add(&scale_add(&inputs[i], kv), 1),
        );
    }
}
