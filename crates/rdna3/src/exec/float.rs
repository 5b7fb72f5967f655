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
    if x.is_infinite() {
        return f32::NAN;
    }
    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
}

/// V_FRACT_F64.
pub fn fract_f64(x: f64) -> f64 {
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
