//! A sum in two passes of 256-wide workgroup trees in LDS (a `__shared__` array), checked
//! against the host's sum of the same integers. The kernels are HIP as hipcc takes it, through
//! hcq's bundled HIP header.
//!
//! cargo run --profile test -p hcq --example reduction

const SRC: &str = r#"
__global__ void block_sums(int* out, const int* in, int n) {
  __shared__ int part[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  part[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) part[t] += part[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = part[0];
}
"#;

fn main() -> hcq::Result<()> {
    let dev = hcq::Device::default_device()?;
    let sums = dev.program(&dev.compile(SRC)?, "block_sums")?;
    let values: Vec<i32> = (0..200_000)
        .map(|i: i32| (i * 7919) % 2001 - 1000)
        .collect();
    let input = dev.alloc(values.len() * 4)?;
    input.write(&values)?;
    // Pass after pass until one value is left.
    let (mut current, mut len) = (input, values.len());
    while len > 1 {
        let groups = len.div_ceil(256);
        let next = dev.alloc_zeros::<i32>(groups)?;
        sums.launch(
            &[
                hcq::Arg::Buffer(&next),
                hcq::Arg::Buffer(&current),
                hcq::Arg::I32(len as i32),
            ],
            [groups as u32, 1, 1],
            [256, 1, 1],
        )?;
        (current, len) = (next, groups);
    }
    let got = current.read::<i32>()?[0];
    let want: i32 = values.iter().sum();
    println!(
        "sum on {} of {} ints: {got} (host: {want})",
        dev.name(),
        values.len()
    );
    assert_eq!(got, want);
    Ok(())
}
