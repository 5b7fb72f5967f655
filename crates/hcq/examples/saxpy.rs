//! y = a * x + y over a million floats on the default device (HCQ_DEVICE, else a real AMD GPU,
//! else amd-emu:0), checked element by element against the host.
//!
//! cargo run --profile test -p hcq --example saxpy

const SRC: &str = r#"
__global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"#;

fn main() -> hcq::Result<()> {
    let dev = hcq::Device::default_device()?;
    let saxpy = dev.program(&dev.compile(SRC)?, "saxpy")?;
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    let (bx, by) = (dev.alloc(n * 4)?, dev.alloc(n * 4)?);
    bx.write(&x)?;
    by.write(&y)?;
    let a = 2.5f32;
    let gpu_time = saxpy.launch_timed(
        &[
            hcq::Arg::Buffer(&by),
            hcq::Arg::Buffer(&bx),
            hcq::Arg::F32(a),
            hcq::Arg::I32(n as i32),
        ],
        [(n as u32).div_ceil(256), 1, 1],
        [256, 1, 1],
    )?;
    let out: Vec<f32> = by.read()?;
    let wrong = (0..n).filter(|&i| out[i] != a.mul_add(x[i], y[i])).count();
    println!(
        "saxpy on {}: {n} elements in {gpu_time:?} of GPU time, {wrong} mismatches",
        dev.name()
    );
    assert_eq!(wrong, 0);
    Ok(())
}
