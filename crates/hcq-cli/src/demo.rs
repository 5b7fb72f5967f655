//! `hcq demo`: the bundled kernels on one device, every element checked against the host.

use crate::prebuilt;
use hcq::{Arg, Buffer, Device, Program};
use std::time::Instant;

const BLOCK: u32 = 256;

/// A deterministic input generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
    fn f32(&mut self) -> f32 {
        (self.next() % 2_000_001) as f32 / 1000.0 - 1000.0
    }
    fn i32(&mut self) -> i32 {
        self.next() as i32
    }
}

enum Kind {
    F32(fn(f32, f32) -> f32),
    I32(fn(i32, i32) -> i32),
    Saxpy(f32),
}

/// Loads the demo's code object: compiled from source when a compiler is available, else the
/// prebuilt object shipped in the binary.
fn code_object(dev: &Device) -> Result<(Vec<u8>, &'static str), String> {
    match dev.compile(prebuilt::DEMO_SOURCE) {
        Ok(lib) => Ok((lib, "compiled from kernels/demo.hip")),
        Err(hcq::Error::Compile { message, log }) if log.is_empty() => {
            let arch = dev.info().arch;
            match prebuilt::object_for("demo.hip", prebuilt::DEMO_SOURCE, &arch) {
                Some(obj) => Ok((obj.to_vec(), "prebuilt (no compiler found)")),
                None => Err(format!("{message}; and no prebuilt demo object for {arch}")),
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

fn check<T: PartialEq + std::fmt::Debug>(name: &str, got: &[T], want: &[T]) -> Result<(), String> {
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        return Err(format!(
            "{name}: element {i} is {:?}, expected {:?}",
            got[i], want[i]
        ));
    }
    Ok(())
}

fn run_kernel(
    dev: &Device,
    prg: &Program,
    kind: &Kind,
    n: usize,
    rng: &mut Rng,
) -> Result<std::time::Duration, String> {
    let e = |e: hcq::Error| e.to_string();
    let grid = [(n as u32).div_ceil(BLOCK), 1, 1];
    let local = [BLOCK, 1, 1];
    let alloc = || dev.alloc(n * 4).map_err(e);
    let (a, b, c): (Buffer, Buffer, Buffer) = (alloc()?, alloc()?, alloc()?);
    let count = Arg::I32(n as i32);
    match *kind {
        Kind::F32(f) => {
            let (x, y): (Vec<f32>, Vec<f32>) = (0..n).map(|_| (rng.f32(), rng.f32())).unzip();
            a.write(&x).map_err(e)?;
            b.write(&y).map_err(e)?;
            let t = prg
                .launch_timed(
                    &[Arg::Buffer(&c), Arg::Buffer(&a), Arg::Buffer(&b), count],
                    grid,
                    local,
                )
                .map_err(e)?;
            let want: Vec<u32> = x.iter().zip(&y).map(|(p, q)| f(*p, *q).to_bits()).collect();
            let got: Vec<u32> = c
                .read::<f32>()
                .map_err(e)?
                .iter()
                .map(|v| v.to_bits())
                .collect();
            check(prg.name(), &got, &want)?;
            Ok(t)
        }
        Kind::I32(f) => {
            let (x, y): (Vec<i32>, Vec<i32>) = (0..n).map(|_| (rng.i32(), rng.i32())).unzip();
            a.write(&x).map_err(e)?;
            b.write(&y).map_err(e)?;
            let t = prg
                .launch_timed(
                    &[Arg::Buffer(&c), Arg::Buffer(&a), Arg::Buffer(&b), count],
                    grid,
                    local,
                )
                .map_err(e)?;
            let want: Vec<i32> = x.iter().zip(&y).map(|(p, q)| f(*p, *q)).collect();
            check(prg.name(), &c.read::<i32>().map_err(e)?, &want)?;
            Ok(t)
        }
        Kind::Saxpy(alpha) => {
            let (x, y): (Vec<f32>, Vec<f32>) = (0..n).map(|_| (rng.f32(), rng.f32())).unzip();
            a.write(&y).map_err(e)?;
            b.write(&x).map_err(e)?;
            let t = prg
                .launch_timed(
                    &[Arg::Buffer(&a), Arg::Buffer(&b), Arg::F32(alpha), count],
                    grid,
                    local,
                )
                .map_err(e)?;
            // The GPU fuses alpha * x + y into one FMA (v_fmac_f32); so does the reference.
            let want: Vec<u32> = x
                .iter()
                .zip(&y)
                .map(|(p, q)| alpha.mul_add(*p, *q).to_bits())
                .collect();
            let got: Vec<u32> = a
                .read::<f32>()
                .map_err(e)?
                .iter()
                .map(|v| v.to_bits())
                .collect();
            check(prg.name(), &got, &want)?;
            Ok(t)
        }
    }
}

pub fn run(device: Option<&str>, n: usize) -> Result<(), String> {
    if n == 0 || n > i32::MAX as usize / 4 {
        return Err(format!("--n {n} is out of range"));
    }
    let dev = crate::open_device(device).map_err(|e| e.to_string())?;
    let info = dev.info();
    println!(
        "device {} ({}, {})",
        info.name,
        info.arch,
        if info.emulated { "emulated" } else { "real" }
    );
    let (lib, origin) = code_object(&dev)?;
    println!("kernels: {origin}");
    let kernels: [(&str, Kind); 6] = [
        ("add_f32", Kind::F32(|a, b| a + b)),
        ("mul_f32", Kind::F32(|a, b| a * b)),
        ("saxpy_f32", Kind::Saxpy(1.5)),
        ("add_i32", Kind::I32(|a, b| a.wrapping_add(b))),
        ("mul_i32", Kind::I32(|a, b| a.wrapping_mul(b))),
        (
            "mix_i32",
            Kind::I32(|a, b| (a ^ (b.wrapping_shl(3))).wrapping_sub(a >> 2)),
        ),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Not a multiple of the workgroup size, so the bounds check matters.
    let n = n + 37;
    for (name, kind) in &kernels {
        let prg = dev.program(&lib, name).map_err(|e| e.to_string())?;
        let t = run_kernel(&dev, &prg, kind, n, &mut rng)?;
        println!(
            "  {name:<10} {n} elements verified   gpu {:>10.3} us",
            t.as_secs_f64() * 1e6
        );
    }
    let empty = dev.program(&lib, "empty").map_err(|e| e.to_string())?;
    let launches = 1000;
    dev.synchronize().map_err(|e| e.to_string())?;
    let start = Instant::now();
    for _ in 0..launches {
        empty
            .launch(&[], [1, 1, 1], [1, 1, 1])
            .map_err(|e| e.to_string())?;
    }
    let host = start.elapsed();
    dev.synchronize().map_err(|e| e.to_string())?;
    println!(
        "host cost per launch: {:.0} ns ({launches} launches of an empty kernel)",
        host.as_nanos() as f64 / launches as f64
    );
    println!("all results verified");
    Ok(())
}
