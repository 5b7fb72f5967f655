//! Two streams on one device: each uploads its half of the data, runs a kernel on it and
//! reads it back, independently of the other; an event then orders a third step on one stream
//! after the other's kernel, and events time each stream's kernel on the GPU. Results are
//! checked against the host.
//!
//! cargo run --profile test -p hcq --example two_streams

const SRC: &str = r#"
__global__ void poly(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float x = in[i]; out[i] = (x * 0.5f + 2.0f) * x - 1.0f; }
}
__global__ void add(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"#;

fn poly(x: f32) -> f32 {
    (x * 0.5 + 2.0) * x - 1.0
}

fn main() -> hcq::Result<()> {
    let dev = hcq::Device::default_device()?;
    let lib = dev.compile(SRC)?;
    let (kpoly, kadd) = (dev.program(&lib, "poly")?, dev.program(&lib, "add")?);
    let n = 100_000usize;
    let halves: [Vec<f32>; 2] = [
        (0..n).map(|i| i as f32 * 0.001).collect(),
        (0..n).map(|i| 3.0 - i as f32 * 0.0005).collect(),
    ];
    let streams = [dev.stream()?, dev.stream()?];
    let grid = [(n as u32).div_ceil(256), 1, 1];
    let mut outs = Vec::new();
    let mut times = Vec::new();
    for (s, x) in streams.iter().zip(&halves) {
        let (input, out) = (dev.alloc(n * 4)?, dev.alloc(n * 4)?);
        s.copy_in(&input, 0, bytemuck::cast_slice(x))?;
        let start = s.record_event()?;
        let args = [
            hcq::Arg::Buffer(&out),
            hcq::Arg::Buffer(&input),
            hcq::Arg::I32(n as i32),
        ];
        s.launch(&kpoly, &args, grid, [256, 1, 1])?;
        times.push((start, s.record_event()?));
        outs.push(out);
    }
    // Stream 0 adds both results once stream 1's kernel is done: the event orders them.
    let sum = dev.alloc(n * 4)?;
    streams[0].wait_event(&times[1].1)?;
    let args = [
        hcq::Arg::Buffer(&sum),
        hcq::Arg::Buffer(&outs[0]),
        hcq::Arg::Buffer(&outs[1]),
        hcq::Arg::I32(n as i32),
    ];
    streams[0].launch(&kadd, &args, grid, [256, 1, 1])?;
    let mut got = vec![0f32; n];
    streams[0].copy_out(&sum, 0, bytemuck::cast_slice_mut(&mut got))?;
    let mut mismatches = 0;
    for (i, &g) in got.iter().enumerate() {
        let want = poly(halves[0][i]) + poly(halves[1][i]);
        if (g - want).abs() > 1e-4 * want.abs().max(1.0) {
            mismatches += 1;
        }
    }
    assert_eq!(mismatches, 0, "results differ from the host's");
    for (k, (start, end)) in times.iter().enumerate() {
        println!(
            "stream {k}: poly over {n} floats in {:.3} ms of GPU time",
            end.elapsed_since(start)?.as_secs_f64() * 1e3
        );
    }
    println!(
        "two streams on {}: {n} sums, 0 mismatches against the host",
        dev.name()
    );
    Ok(())
}
