//! Floating-point helpers: IEEE half precision conversions and ISA-specific operations.

/// Converts IEEE half-precision bits to f32 (exact).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match (exponent, mantissa) {
        (0, 0) => 0,
        (0, m) => {
            // Subnormal half: value = m × 2^-24, exactly representable in f32.
            return f32::from_bits(sign)
                + if sign != 0 { -(m as f32) } else { m as f32 } * (1.0 / 16_777_216.0);
        }
        (0x1f, 0) => 0x7f80_0000,
        (0x1f, m) => 0x7fc0_0000 | (m << 13),
        (e, m) => ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// Converts f32 to IEEE half-precision bits, rounding to nearest even.
pub fn f32_to_f16(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    if exponent == 0xff {
        return sign
            | if mantissa == 0 {
                0x7c00
            } else {
                0x7e00 | ((mantissa >> 13) as u16 & 0x1ff)
            };
    }
    let unbiased = exponent - 127;
    if unbiased > 15 {
        return sign | 0x7c00;
    }
    if unbiased >= -14 {
        // Normal half: keep 10 mantissa bits, round the remaining 13 to nearest even.
        let half_exponent = (unbiased + 15) as u32;
        let mut result = (half_exponent << 10) | (mantissa >> 13);
        let rest = mantissa & 0x1fff;
        if rest > 0x1000 || (rest == 0x1000 && result & 1 == 1) {
            result += 1; // may carry into the exponent, up to infinity, which is correct
        }
        return sign | result as u16;
    }
    // Subnormal or zero half: value / 2^-24, rounded to nearest even.
    if unbiased < -25 {
        return sign;
    }
    let full = mantissa | 0x80_0000; // 24-bit significand, value = full × 2^(unbiased-23)
    let shift = (-14 - unbiased + 13) as u32; // to units of 2^-24
    let mut result = full >> shift;
    let rest = full & ((1 << shift) - 1);
    let halfway = 1 << (shift - 1);
    if rest > halfway || (rest == halfway && result & 1 == 1) {
        result += 1;
    }
    sign | result as u16
}

/// `x × 2^exp` with a single rounding (f32).
pub fn ldexp_f32(x: f32, exp: i32) -> f32 {
    // Two steps keep the f64 scale factor finite; f64 has room for every intermediate.
    let e = exp.clamp(-400, 400);
    let half = e / 2;
    ((f64::from(x) * 2f64.powi(half)) * 2f64.powi(e - half)) as f32
}

/// `x × 2^exp` for f64.
pub fn ldexp_f64(x: f64, exp: i32) -> f64 {
    let mut value = x;
    let mut e = exp.clamp(-2200, 2200);
    while e > 1000 {
        value *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        value *= 2f64.powi(-1000);
        e += 1000;
    }
    value * 2f64.powi(e)
}

/// Exponent of `x` as `frexp` returns it (0 for zero, inf and NaN).
pub fn frexp_exp_f32(x: f32) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let bits = x.to_bits();
    let exponent = ((bits >> 23) & 0xff) as i32;
    if exponent == 0 {
        // Subnormal: normalise through f64.
        return frexp_exp_f64(f64::from(x));
    }
    exponent - 126
}

/// Exponent of `x` as `frexp` returns it (f64).
pub fn frexp_exp_f64(x: f64) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    if exponent == 0 {
        let scaled = x * 2f64.powi(64);
        return frexp_exp_f64(scaled) - 64;
    }
    exponent - 1022
}

/// Mantissa of `x` in [0.5, 1) with the sign of `x` (x for zero, inf and NaN).
pub fn frexp_mant_f32(x: f32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    ldexp_f32(x, -frexp_exp_f32(x))
}

/// Mantissa of `x` in [0.5, 1) (f64).
pub fn frexp_mant_f64(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    ldexp_f64(x, -frexp_exp_f64(x))
}

/// `x - floor(x)` clamped below 1.0 as V_FRACT does (NaN stays NaN, ±inf gives NaN).
pub fn fract_f32(x: f32) -> f32 {
    if x.is_nan() {
        return f32::from_bits(x.to_bits() | 0x40_0000);
    }
    if x.is_infinite() {
        // inf + -floor(inf) = inf - inf.
        return f32::NAN;
    }
    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
}

/// V_FRACT_F64.
pub fn fract_f64(x: f64) -> f64 {
    if x.is_nan() {
        return f64::from_bits(x.to_bits() | (1 << 51));
    }
    if x.is_infinite() {
        return f64::NAN;
    }
    (x - x.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff))
}

/// IEEE minNum/maxNum (a NaN operand yields the other operand); -0 < +0.
pub fn min_f32(x: f32, y: f32) -> f32 {
    if x.is_nan() {
        return y;
    }
    if y.is_nan() {
        return x;
    }
    if x == y {
        return if x.is_sign_negative() { x } else { y };
    }
    if x < y {
        x
    } else {
        y
    }
}

/// See [`min_f32`].
pub fn max_f32(x: f32, y: f32) -> f32 {
    if x.is_nan() {
        return y;
    }
    if y.is_nan() {
        return x;
    }
    if x == y {
        return if x.is_sign_positive() { x } else { y };
    }
    if x > y {
        x
    } else {
        y
    }
}

/// IEEE minNum for f64.
pub fn min_f64(x: f64, y: f64) -> f64 {
    if x.is_nan() {
        return y;
    }
    if y.is_nan() {
        return x;
    }
    if x == y {
        return if x.is_sign_negative() { x } else { y };
    }
    x.min(y)
}

/// IEEE maxNum for f64.
pub fn max_f64(x: f64, y: f64) -> f64 {
    if x.is_nan() {
        return y;
    }
    if y.is_nan() {
        return x;
    }
    if x == y {
        return if x.is_sign_positive() { x } else { y };
    }
    x.max(y)
}

/// Median of three (V_MED3_F32): NaN handling via min/max of IEEE minNum/maxNum.
pub fn med3_f32(a: f32, b: f32, c: f32) -> f32 {
    max_f32(min_f32(a, b), min_f32(max_f32(a, b), c))
}

/// The V_CMP_CLASS mask bit of a value: 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal,
/// 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf.
pub fn class_bit_f64(x: f64, quiet_bit: bool, is_denormal: bool) -> u32 {
    if x.is_nan() {
        return if quiet_bit { 1 << 1 } else { 1 << 0 };
    }
    let negative = x.is_sign_negative();
    let index = if x.is_infinite() {
        if negative {
            2
        } else {
            9
        }
    } else if x == 0.0 {
        if negative {
            5
        } else {
            6
        }
    } else if is_denormal {
        if negative {
            4
        } else {
            7
        }
    } else if negative {
        3
    } else {
        8
    };
    1 << index
}

/// A binary floating-point format: significand bits (with the implicit one) and the smallest
/// normal exponent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Format {
    /// Significand precision in bits.
    pub precision: u32,
    /// Exponent of the smallest normal number.
    pub min_exp: i32,
    /// Largest finite value.
    pub max: f64,
}

/// IEEE binary16.
pub const HALF: Format = Format {
    precision: 11,
    min_exp: -14,
    max: 65504.0,
};
/// IEEE binary32.
pub const SINGLE: Format = Format {
    precision: 24,
    min_exp: -126,
    max: f32::MAX as f64,
};
/// IEEE binary64.
pub const DOUBLE: Format = Format {
    precision: 53,
    min_exp: -1022,
    max: f64::MAX,
};

/// `(negative, significand, exponent)` with `|x| = significand × 2^exponent` (finite `x`).
fn decompose(x: f64) -> (bool, u64, i32) {
    let bits = x.to_bits();
    let negative = bits >> 63 != 0;
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & 0xf_ffff_ffff_ffff;
    if biased == 0 {
        (negative, fraction, -1074)
    } else {
        (negative, fraction | (1 << 52), biased - 1075)
    }
}

/// Rounds `magnitude × 2^exponent` to nearest even in `format`; the result is exact in f64.
fn round_to_format(negative: bool, magnitude: u128, exponent: i32, format: Format) -> f64 {
    if magnitude == 0 {
        return if negative { -0.0 } else { 0.0 };
    }
    let length = 128 - magnitude.leading_zeros() as i32;
    let top = exponent + length - 1;
    let precision = format.precision as i32;
    let quantum = (top - (precision - 1)).max(format.min_exp - (precision - 1));
    let shift = quantum - exponent;
    let kept = if shift <= 0 {
        // Exact: at most `precision` significant bits.
        magnitude
    } else if shift >= 128 {
        // Everything is below half a quantum (the magnitude has < 128 bits).
        0
    } else {
        let kept = magnitude >> shift;
        let rest = magnitude & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        if rest > half || (rest == half && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        }
    };
    let quantum = if shift <= 0 { exponent } else { quantum };
    let value = ldexp_f64(kept as f64, quantum);
    let value = if value > format.max {
        f64::INFINITY
    } else {
        value
    };
    if negative {
        -value
    } else {
        value
    }
}

/// `(a × b + c) × 2^scale` with one rounding to `format` (inputs must be exact in it).
/// Special values (NaN, infinities, zero factors) follow IEEE fusedMultiplyAdd.
pub fn fma_scaled(a: f64, b: f64, c: f64, scale: i32, format: Format) -> f64 {
    if !(a.is_finite() && b.is_finite() && c.is_finite()) || a == 0.0 || b == 0.0 {
        // No rounding happens besides the final one (0 × x + c = c exactly, or special).
        let exact = a.mul_add(b, c);
        return round_special(exact, scale, format);
    }
    let (na, ma, ea) = decompose(a);
    let (nb, mb, eb) = decompose(b);
    let product_negative = na != nb;
    let mut product = u128::from(ma) * u128::from(mb);
    let mut product_exp = ea + eb;
    // Left-align both terms at bit 125 so that alignment shifts lose no needed bits.
    let align = |m: &mut u128, e: &mut i32| {
        let length = 128 - m.leading_zeros() as i32;
        let up = 125 - length;
        *m <<= up;
        *e -= up;
    };
    align(&mut product, &mut product_exp);
    if c == 0.0 {
        return round_to_format(product_negative, product, product_exp + scale, format);
    }
    let (nc, mc, ec) = decompose(c);
    let mut addend = u128::from(mc);
    let mut addend_exp = ec;
    align(&mut addend, &mut addend_exp);
    // Shift the smaller-exponent term right, folding lost bits into a sticky bit.
    let shift_right = |m: u128, by: i32| -> u128 {
        if by <= 0 {
            m
        } else if by >= 127 {
            u128::from(m != 0)
        } else {
            (m >> by) | u128::from(m & ((1u128 << by) - 1) != 0)
        }
    };
    let exponent = product_exp.max(addend_exp);
    let p = shift_right(product, exponent - product_exp);
    let q = shift_right(addend, exponent - addend_exp);
    let (negative, magnitude) = if product_negative == nc {
        (nc, p + q)
    } else if p >= q {
        (product_negative, p - q)
    } else {
        (nc, q - p)
    };
    if magnitude == 0 {
        // Exact cancellation rounds to +0 in round-to-nearest.
        return 0.0;
    }
    round_to_format(negative, magnitude, exponent + scale, format)
}

/// Rounds an f64 (exact or special) scaled by `2^scale` to `format`.
fn round_special(x: f64, scale: i32, format: Format) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let (negative, m, e) = decompose(x);
    round_to_format(negative, u128::from(m), e + scale, format)
}

/// Rounds an f64 to the nearest f16 (ties to even), as bits.
pub fn f64_to_f16(x: f64) -> u16 {
    if x.is_nan() {
        let bits = x.to_bits();
        return ((bits >> 48) as u16 & 0x8000) | 0x7e00 | ((bits >> 42) as u16 & 0x1ff);
    }
    // The rounded value is exact in f32, whose conversion to f16 is then exact.
    f32_to_f16(round_special(x, 0, HALF) as f32)
}

/// `a × b + c` for f16 operands (bits) with one rounding.
pub fn fma_f16(a: u16, b: u16, c: u16) -> u16 {
    let (x, y, z) = (
        f64::from(f16_to_f32(a)),
        f64::from(f16_to_f32(b)),
        f64::from(f16_to_f32(c)),
    );
    if x.is_nan() || y.is_nan() || z.is_nan() {
        return f64_to_f16(x.mul_add(y, z));
    }
    f64_to_f16(fma_scaled(x, y, z, 0, HALF))
}
