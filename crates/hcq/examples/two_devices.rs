//! A kernel on one GPU, its result copied to a second GPU without the host, a kernel there,
//! and the result copied back; checked against the host. Runs on two emulated GPUs unless
//! HCQ_DEVICE names the first of two real ones.
//!
//! HCQ_EMU_GPUS=2 cargo run --profile test -p hcq --example two_devices

const SRC: &str = r#"
__global__ void square_plus(int* out, const int* in, int c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i] + c;
}
"#;

fn main() -> hcq::Result<()> {
    if std::env::var_os("HCQ_EMU_GPUS").is_none() {
        // Before the emulator starts: it reads the count once.
        std::env::set_var("HCQ_EMU_GPUS", "2");
    }
    let first = hcq::Device::default_device()?;
    let kind = first
        .name()
        .split(':')
        .next()
        .unwrap_or("amd-emu")
        .to_string();
    let second = hcq::Device::open(&format!("{kind}:1"))?;
    let lib = first.compile(SRC)?;
    let (k0, k1) = (
        first.program(&lib, "square_plus")?,
        second.program(&lib, "square_plus")?,
    );
    let n = 5_000usize;
    let x: Vec<i32> = (0..n as i32).map(|i| i % 100 - 50).collect();
    let a = first.alloc(n * 4)?;
    a.write(&x)?;
    let (b, c, d) = (
        first.alloc(n * 4)?,
        second.alloc(n * 4)?,
        second.alloc(n * 4)?,
    );
    let launch = |k: &hcq::Program, out: &hcq::Buffer, input: &hcq::Buffer, add: i32| {
        k.launch(
            &[
                hcq::Arg::Buffer(out),
                hcq::Arg::Buffer(input),
                hcq::Arg::I32(add),
                hcq::Arg::I32(n as i32),
            ],
            [(n as u32).div_ceil(64), 1, 1],
            [64, 1, 1],
        )
    };
    launch(&k0, &b, &a, 1)?;
    b.copy_to(0, &c, 0, n * 4)?; // GPU to GPU
    launch(&k1, &d, &c, -7)?;
    d.copy_to(0, &a, 0, n * 4)?; // and back
    let got: Vec<i32> = a.read()?;
    let want: Vec<i32> = x.iter().map(|&v| (v * v + 1) * (v * v + 1) - 7).collect();
    assert_eq!(got, want);
    println!(
        "{} -> {} -> {}: all {n} values right",
        first.name(),
        second.name(),
        first.name()
    );
    Ok(())
}
