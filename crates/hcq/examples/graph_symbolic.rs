//! A graph of two kernels whose grid follows a symbolic size, replayed with different sizes
//! and inputs; each replay checked against the host.
//!
//! cargo run --profile test -p hcq --example graph_symbolic

use hcq::{DimExpr, GraphArg, GraphBuilder};

const SRC: &str = r#"
// out[i] = in[i] * k + 1, for i < n.
__global__ void affine(int* out, const int* in, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * k + 1;
}
"#;

fn main() -> hcq::Result<()> {
    let dev = hcq::Device::default_device()?;
    let affine = dev.program(&dev.compile(SRC)?, "affine")?;
    let max = 10_000usize;
    let inputs: Vec<Vec<i32>> = (0..2)
        .map(|s| (0..max as i32).map(|i| i * (s + 3) - 500).collect())
        .collect();
    let in_bufs = inputs
        .iter()
        .map(|v| {
            let b = dev.alloc(max * 4)?;
            b.write(v)?;
            Ok(b)
        })
        .collect::<hcq::Result<Vec<_>>>()?;
    let (mid, out) = (dev.alloc_zeros::<i32>(max)?, dev.alloc_zeros::<i32>(max)?);

    let mut g = GraphBuilder::new();
    let input = g.input(&in_bufs[0]);
    let n = g.var("n", 1, max as i32)?;
    let k = g.var("k", -100, 100)?;
    let grid = [DimExpr::from(n).ceil_div(64), 1.into(), 1.into()];
    let block = [DimExpr::from(64), 1.into(), 1.into()];
    g.launch(
        &affine,
        &[
            GraphArg::Buffer(&mid),
            GraphArg::Input(input),
            GraphArg::Var(k),
            GraphArg::Var(n),
        ],
        grid.clone(),
        block.clone(),
    )?;
    g.launch(
        &affine,
        &[
            GraphArg::Buffer(&out),
            GraphArg::Buffer(&mid),
            GraphArg::Var(k),
            GraphArg::Var(n),
        ],
        grid,
        block,
    )?;
    let graph = g.build()?;

    for (replay, (size, kv)) in [(10_000, 3), (17, -2), (4_096, 7), (1, 100)]
        .iter()
        .enumerate()
    {
        let which = replay % 2;
        out.fill(0i32)?;
        graph.replay(&[&in_bufs[which]], &[*size, *kv])?;
        let got: Vec<i32> = out.read_range(0, *size as usize)?;
        let want: Vec<i32> = inputs[which][..*size as usize]
            .iter()
            .map(|&x| (x * kv + 1) * kv + 1)
            .collect();
        assert_eq!(got, want, "replay {replay}");
        println!(
            "replay {replay} on {}: n = {size}, k = {kv}, all {size} values right",
            dev.name()
        );
    }
    Ok(())
}
