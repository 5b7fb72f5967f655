//! Shared pieces of the ML kernel tests: the device, each source compiled once, buffers,
//! deterministic inputs, and element-by-element checks.

use hcq::{Arg, Buffer, Device, LaunchOptions, Program};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Mutex, OnceLock};

pub fn device() -> Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE
        .get_or_init(|| Device::open("amd-emu:0").expect("the emulated GPU opens"))
        .clone()
}

/// Code objects by source text address: each `.hip` file compiles once per process.
static CODE_OBJECTS: Mutex<Option<HashMap<usize, Vec<u8>>>> = Mutex::new(None);

pub fn program(source: &'static str, name: &str) -> Program {
    let dev = device();
    let code = {
        let mut objects = CODE_OBJECTS.lock().unwrap_or_else(|e| e.into_inner());
        objects
            .get_or_insert_with(HashMap::new)
            .entry(source.as_ptr() as usize)
            .or_insert_with(|| {
                dev.compile(source)
                    .unwrap_or_else(|e| panic!("compiling the source of {name}: {e}"))
            })
            .clone()
    };
    dev.program(&code, name)
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

pub fn upload<T: bytemuck::Pod>(values: &[T]) -> Buffer {
    let bytes: &[u8] = bytemuck::cast_slice(values);
    let buf = device().alloc(bytes.len().max(4)).expect("alloc");
    buf.copy_in(0, bytes).expect("copy in");
    buf
}

/// Outputs start from a sentinel so that elements the kernel never wrote show up.
pub fn filled<T: bytemuck::Pod>(n: usize, value: T) -> Buffer {
    upload(&vec![value; n])
}

pub fn read<T: bytemuck::Pod>(buf: &Buffer) -> Vec<T> {
    buf.read().expect("read back")
}

/// Runs kernel `name` of `source` on `groups` workgroups of `local` work-items and waits.
pub fn run(source: &'static str, name: &str, args: &[Arg<'_>], groups: [u32; 3], local: [u32; 3]) {
    run_with_lds(source, name, args, groups, local, 0);
}

pub fn run_with_lds(
    source: &'static str,
    name: &str,
    args: &[Arg<'_>],
    groups: [u32; 3],
    local: [u32; 3],
    dynamic_lds_bytes: u32,
) {
    let options = LaunchOptions {
        dynamic_lds_bytes,
        ..Default::default()
    };
    program(source, name)
        .launch_with(args, groups, local, &options)
        .unwrap_or_else(|e| panic!("{name} failed on the device: {e}"));
}

pub fn blocks(n: usize, per_block: usize) -> u32 {
    n.div_ceil(per_block) as u32
}

/// xorshift64*: the same inputs on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    /// Uniform in `[lo, hi)`.
    pub fn f32_in(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (lo as f64 + (hi - lo) as f64 * unit) as f32
    }

    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32_in(lo, hi)).collect()
    }
}

/// Collects mismatches and reports the first ones.
pub struct Check {
    what: String,
    shown: Vec<String>,
    failed: usize,
    checked: usize,
}

impl Check {
    pub fn new(what: &str) -> Check {
        Check {
            what: what.to_string(),
            shown: Vec::new(),
            failed: 0,
            checked: 0,
        }
    }

    pub fn ok(&mut self, pass: bool, detail: impl FnOnce() -> String) {
        self.checked += 1;
        if !pass {
            self.failed += 1;
            if self.shown.len() < 16 {
                self.shown.push(detail());
            }
        }
    }

    pub fn eq<T: PartialEq + Debug>(&mut self, got: T, want: T, ctx: impl FnOnce() -> String) {
        self.ok(got == want, || {
            format!("{}: got {got:?}, want {want:?}", ctx())
        });
    }

    /// Bit for bit (any NaN matches any NaN).
    pub fn f32_exact(&mut self, got: f32, want: f32, ctx: impl FnOnce() -> String) {
        let pass = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        self.ok(pass, || {
            format!(
                "{}: got {got:e} ({:#010x}), want {want:e} ({:#010x})",
                ctx(),
                got.to_bits(),
                want.to_bits()
            )
        });
    }

    /// `|got - want| <= tolerance`, `want` computed in f64.
    pub fn close(&mut self, got: f32, want: f64, tolerance: f64, ctx: impl FnOnce() -> String) {
        let err = (got as f64 - want).abs();
        self.ok(err <= tolerance, || {
            format!(
                "{}: got {got:e}, want {want:e}, error {err:e} > {tolerance:e}",
                ctx()
            )
        });
    }

    pub fn finish(self) {
        assert!(self.checked > 0, "{}: nothing was checked", self.what);
        assert!(
            self.failed == 0,
            "{}: {} of {} checks failed; the first ones:\n  {}",
            self.what,
            self.failed,
            self.checked,
            self.shown.join("\n  ")
        );
    }
}

/// 2^-24: the unit roundoff of f32.
pub const F32_UNIT_ROUNDOFF: f64 = 1.0 / 16_777_216.0;

/// `x` rounded to nearest-even with `fraction_bits` stored fraction bits, exponents down to
/// `min_exponent` (gradual underflow below it) and infinity at or above `2^(max_exponent+1)`,
/// by scaling to the format's quantum and rounding in f64 (exact for the f32 inputs here).
pub fn round_to_format(x: f64, fraction_bits: i32, min_exponent: i32, max_exponent: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let exponent = binary_exponent(x).max(min_exponent);
    let quantum = 2f64.powi(exponent - fraction_bits);
    let rounded = (x / quantum).round_ties_even() * quantum;
    if rounded.abs() >= 2f64.powi(max_exponent + 1) {
        f64::INFINITY.copysign(x)
    } else if rounded == 0.0 {
        0.0f64.copysign(x)
    } else {
        rounded
    }
}

/// floor(log2 |x|) of a normal f64, read from its exponent field.
fn binary_exponent(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// The value an IEEE binary16 bit pattern encodes.
pub fn f16_value(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = ((bits >> 10) & 0x1f) as i32;
    let fraction = (bits & 0x3ff) as f64;
    sign * match exponent {
        0 => fraction * 2f64.powi(-24),
        31 if fraction == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1024.0 + fraction) * 2f64.powi(exponent - 25),
    }
}

/// The f16 bit pattern of an exactly representable value (the host side of f16 inputs).
pub fn f16_bits(value: f64) -> u16 {
    let sign = if value.is_sign_negative() { 0x8000 } else { 0 };
    let a = value.abs();
    if a == 0.0 {
        return sign;
    }
    let exponent = binary_exponent(a).max(-14);
    let scaled = a / 2f64.powi(exponent - 10);
    assert_eq!(scaled.fract(), 0.0, "{value} is not an f16");
    if scaled < 1024.0 {
        sign | scaled as u16
    } else {
        sign | (((exponent + 15) as u16) << 10) | (scaled as u16 - 1024)
    }
}
