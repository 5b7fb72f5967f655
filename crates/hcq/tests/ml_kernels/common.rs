//! Shared pieces of the ML kernel tests: the device, each source compiled once, buffers,
//! deterministic inputs, and element-by-element checks.

use hcq::{Arg, LaunchOptions};

pub use crate::shared::{filled, program, read, upload, Check, Rng};

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
