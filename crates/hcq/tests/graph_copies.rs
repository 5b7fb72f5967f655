//! Graphs with copies on one emulated GPU: an input copied into a scratch buffer, a kernel on
//! it, the result copied into the output input, replayed with swapped inputs and checked
//! element by element against the host.

use hcq::{Buffer, Device, DimExpr, GraphArg, GraphBuilder};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
// out[i] += y[i] ^ b, for i < n.
KERNEL void accumulate(int* out, const int* y, int b, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] += y[i] ^ b;
}
"#;

const N: usize = 256;

fn filled(dev: &Device, values: &[i32]) -> Buffer {
    let b = dev.alloc(values.len() * 4).unwrap();
    b.write(values).unwrap();
    b
}

#[test]
fn copy_kernel_copy_graph_matches_the_host_over_a_thousand_replays() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let lib = dev.compile(SRC).expect("compiles with clang-19");
    let accumulate = dev.program(&lib, "accumulate").unwrap();
    let ys: Vec<i32> = (0..N as i32).map(|i| i * 7 - 300).collect();
    let y = filled(&dev, &ys);
    let scratch = dev.alloc(N * 4).unwrap();
    let xs: Vec<Vec<i32>> = (0..3)
        .map(|k| (0..N as i32).map(|i| i * (k + 2) + k * 1000).collect())
        .collect();
    let x_bufs: Vec<Buffer> = xs.iter().map(|x| filled(&dev, x)).collect();
    let outs: Vec<Buffer> = (0..2).map(|_| filled(&dev, &[0; N])).collect();

    let mut g = GraphBuilder::new();
    let b = g.var("b", 0, 1 << 20).unwrap();
    let x = g.input(&x_bufs[0]);
    let out = g.input(&outs[0]);
    g.copy(x, &scratch, N * 4).unwrap();
    g.launch(
        &accumulate,
        &[
            GraphArg::Buffer(&scratch),
            GraphArg::Buffer(&y),
            GraphArg::Var(b),
            GraphArg::Value(hcq::Arg::I32(N as i32)),
        ],
        [DimExpr::from(N as u32 / 64), 1.into(), 1.into()],
        [64.into(), 1.into(), 1.into()],
    )
    .unwrap();
    g.copy(&scratch, out, N * 4).unwrap();
    let graph = g.build().expect("graphs with copies build");
    // x is only a copy's source: one address word in the copy stream.
    assert_eq!(graph.input_patch_count(x), 1);

    for r in 0..1000usize {
        let (xi, oi, bv) = (r % 3, r % 2, (r * 31 % 4096) as i32);
        graph.replay(&[&x_bufs[xi], &outs[oi]], &[bv]).unwrap();
        let got = outs[oi].read::<i32>().unwrap();
        let want: Vec<i32> = (0..N).map(|i| xs[xi][i].wrapping_add(ys[i] ^ bv)).collect();
        assert_eq!(got, want, "replay {r}");
    }
    // An input aliasing a buffer of the graph is refused, and the graph stays usable.
    assert!(graph.replay(&[&scratch, &outs[0]], &[1]).is_err());
    assert!(graph.replay(&[&outs[0], &outs[0]], &[1]).is_err());
    graph.replay(&[&x_bufs[2], &outs[1]], &[5]).unwrap();
    let want: Vec<i32> = (0..N).map(|i| xs[2][i].wrapping_add(ys[i] ^ 5)).collect();
    assert_eq!(outs[1].read::<i32>().unwrap(), want);
}

#[test]
fn copy_only_graph_and_independent_items() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let src: Vec<i32> = (0..N as i32).collect();
    let a = filled(&dev, &src);
    let c = dev.alloc(N * 4).unwrap();
    let d = dev.alloc(N * 4).unwrap();
    let mut g = GraphBuilder::new();
    let x = g.input(&a);
    g.copy(x, &c, N * 4).unwrap();
    g.copy(&c, &d, N * 2).unwrap();
    let graph = g.build().unwrap();
    for k in 0..20 {
        let v: Vec<i32> = src.iter().map(|s| s * k).collect();
        let input = filled(&dev, &v);
        graph.replay(&[&input], &[]).unwrap();
        assert_eq!(c.read::<i32>().unwrap(), v);
        assert_eq!(d.read::<i32>().unwrap()[..N / 2], v[..N / 2]);
    }
}
