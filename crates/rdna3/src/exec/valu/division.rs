//! Float division: V_DIV_SCALE, V_DIV_FMAS and V_DIV_FIXUP, the instructions compilers wrap
//! around a reciprocal and Newton-Raphson steps to divide with correct rounding. They only
//! make sense as a sequence (V_DIV_SCALE decides a scaling in VCC that V_DIV_FMAS undoes and
//! V_DIV_FIXUP patches the special cases), so they are kept together, apart from the rest
//! of the float math.

use super::{bd, bf, d, f, h, map3, vector, Group, Lanes, Sources};
use crate::exec::float::*;
use crate::exec::{Wave, WAVE_SIZE};
use crate::isa::{Vop3Op, Vop3sdOp};

/// Parameters of V_DIV_SCALE for one precision.
struct DivScaleParams {
    /// Biased exponent field of a value.
    exponent: fn(f64) -> i32,
    /// Whether a value is denormal in the operand precision.
    denormal: fn(f64) -> bool,
    /// Whether `1 / x` (the reciprocal the division will use) is denormal.
    reciprocal_denormal: fn(f64) -> bool,
    /// Whether the quotient `n / d` is denormal (or underflows to zero: the operands are
    /// nonzero, and scaling the numerator keeps such a quotient exact).
    quotient_denormal: fn(f64, f64) -> bool,
    /// Exponent difference at which the quotient nears the largest finite value.
    near_max: i32,
    /// Largest biased exponent of a "tiny" numerator.
    tiny: i32,
    /// The scale exponent (64 for f32, 128 for f64).
    scale: i32,
    /// Rounds an f64 to the operand precision after scaling.
    ldexp: fn(f64, i32) -> f64,
}

fn f32_denormal(x: f64) -> bool {
    let x = x as f32;
    x != 0.0 && x.abs() < f32::MIN_POSITIVE
}

fn f64_denormal(x: f64) -> bool {
    x != 0.0 && x.abs() < f64::MIN_POSITIVE
}

const DIV_SCALE_F32: DivScaleParams = DivScaleParams {
    exponent: |x| ((x as f32).to_bits() >> 23 & 0xff) as i32,
    denormal: f32_denormal,
    // The pseudocode writes this test as `1.0 / 64'F(S1.f32) == DENORM.f64`, which no f32
    // divisor meets and would leave the branch dead. The test that matters is whether
    // V_RCP_F32 of the divisor lands in the f32 denormal range (|S1| > 2^126), where it keeps
    // too few bits for the Newton-Raphson steps: the division expansion is then off by an ulp
    // (2^62 / FLT_MAX), or zero where the reciprocal flushes. Scaling such divisors down
    // keeps f32 division correctly rounded.
    reciprocal_denormal: |x| {
        let reciprocal = (1.0 / x).abs();
        reciprocal != 0.0 && reciprocal < f64::from(f32::MIN_POSITIVE)
    },
    quotient_denormal: |n, d| ((n as f32) / (d as f32)).abs() < f32::MIN_POSITIVE,
    near_max: 96,
    tiny: 23,
    scale: 64,
    ldexp: |x, e| f64::from(ldexp_f32(x as f32, e)),
};

const DIV_SCALE_F64: DivScaleParams = DivScaleParams {
    exponent: |x| (x.to_bits() >> 52 & 0x7ff) as i32,
    denormal: f64_denormal,
    reciprocal_denormal: |x| f64_denormal(1.0 / x),
    quotient_denormal: |n, d| (n / d).abs() < f64::MIN_POSITIVE,
    near_max: 768,
    tiny: 53,
    scale: 128,
    ldexp: ldexp_f64,
};

/// V_DIV_SCALE_F32/F64: `s0` is the value to scale (equal to `den` or `num`); returns the
/// scaled value and the lane's VCC bit (set when V_DIV_FMAS must rescale the quotient).
///
/// Follows the ISA pseudocode, with one deviation: when both the reciprocal of the
/// denominator and the quotient are denormal, the pseudocode scales the (huge) denominator
/// by 2^+scale, which overflows to infinity; the denominator is scaled by 2^-scale instead,
/// which makes the scaled quotient normal and lets V_DIV_FMAS scale it back down.
fn div_scale(s0: f64, den: f64, num: f64, p: &DivScaleParams) -> (f64, bool) {
    let scale = p.scale;
    if num == 0.0 || den == 0.0 {
        return (f64::NAN, false);
    }
    let (exp_num, exp_den) = ((p.exponent)(num), (p.exponent)(den));
    let reciprocal_denormal = (p.reciprocal_denormal)(den);
    let quotient_denormal = (p.quotient_denormal)(num, den);
    if exp_num - exp_den >= p.near_max {
        // Quotient near the largest finite value: scale only the denominator.
        let value = if s0 == den { (p.ldexp)(s0, scale) } else { s0 };
        (value, true)
    } else if (p.denormal)(den) {
        ((p.ldexp)(s0, scale), false)
    } else if reciprocal_denormal && quotient_denormal {
        let value = if s0 == den { (p.ldexp)(s0, -scale) } else { s0 };
        (value, true)
    } else if reciprocal_denormal {
        ((p.ldexp)(s0, -scale), false)
    } else if quotient_denormal {
        // Only the numerator is scaled.
        let value = if s0 == num { (p.ldexp)(s0, scale) } else { s0 };
        (value, true)
    } else if exp_num <= p.tiny {
        // Tiny numerator: scale both operands.
        ((p.ldexp)(s0, scale), false)
    } else {
        (s0, false)
    }
}

/// V_DIV_FMAS: `fma(a, b, c)`, rescaled (with a single rounding) when VCC is set: by
/// 2^+scale when the scaled quotient `c` is at least 2 (the denominator was scaled up), by
/// 2^-scale otherwise (the numerator was scaled up).
fn div_fmas(a: f64, b: f64, c: f64, vcc: bool, format: Format, scale: i32) -> f64 {
    if !vcc {
        return fma_scaled(a, b, c, 0, format);
    }
    let scale = if c.abs() >= 2.0 { scale } else { -scale };
    fma_scaled(a, b, c, scale, format)
}

/// V_DIV_FIXUP_F16/F32/F64 special-case handling; `quotient` is S0, `den` S1, `num` S2.
/// `underflow` flags operands whose quotient is below the format's range (a signed zero).
fn div_fixup_f64(
    quotient: f64,
    den: f64,
    num: f64,
    underflow: Option<fn(f64, f64) -> bool>,
) -> f64 {
    let sign_negative = den.is_sign_negative() != num.is_sign_negative();
    let signed_inf = if sign_negative {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    let signed_zero = if sign_negative { -0.0 } else { 0.0 };
    // The default NaN of 0/0 and inf/inf has the sign bit set (0xffc00000 etc.).
    let default_nan = -f64::NAN.abs();
    if num.is_nan() {
        num
    } else if den.is_nan() {
        den
    } else if (den == 0.0 && num == 0.0) || (den.is_infinite() && num.is_infinite()) {
        default_nan
    } else if den == 0.0 || num.is_infinite() {
        signed_inf
    } else if den.is_infinite() || num == 0.0 || underflow.is_some_and(|test| test(num, den)) {
        signed_zero
    } else if quotient.is_nan() {
        // Finite operands whose scaled quotient overflowed inside the Newton-Raphson
        // sequence (inf - inf): the quotient is beyond the format's range.
        signed_inf
    } else if sign_negative {
        -quotient.abs()
    } else {
        quotient.abs()
    }
}

impl Wave {
    /// V_DIV_SCALE_F32/F64 (VOP3SD: the VCC bit is their carry-out); `None` for other
    /// opcodes.
    pub(super) fn div_scale_op(&self, op: Vop3sdOp, s: &Sources) -> Group<(Lanes, u32)> {
        use Vop3sdOp::*;
        let (a, b, c, exec) = (&s.a, &s.b, &s.c, s.exec);
        let result = match op {
            V_DIV_SCALE_F32 => {
                let mut out = [0u64; WAVE_SIZE];
                let mut vcc = 0u32;
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 != 0 {
                        let (value, flag) = div_scale(
                            f64::from(f(a[lane])),
                            f64::from(f(b[lane])),
                            f64::from(f(c[lane])),
                            &DIV_SCALE_F32,
                        );
                        out[lane] = bf(value as f32);
                        vcc |= u32::from(flag) << lane;
                    }
                }
                (out, vcc)
            }
            V_DIV_SCALE_F64 => {
                let mut out = [0u64; WAVE_SIZE];
                let mut vcc = 0u32;
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 != 0 {
                        let (value, flag) =
                            div_scale(d(a[lane]), d(b[lane]), d(c[lane]), &DIV_SCALE_F64);
                        out[lane] = bd(value);
                        vcc |= u32::from(flag) << lane;
                    }
                }
                (out, vcc)
            }
            _ => return Ok(None),
        };
        Ok(Some(result))
    }

    /// V_DIV_FMAS and V_DIV_FIXUP; `None` for other opcodes.
    pub(super) fn division_op(&self, op: Vop3Op, s: &Sources) -> Group<Lanes> {
        use Vop3Op::*;
        let (a, b, c, exec) = (&s.a, &s.b, &s.c, s.exec);
        match op {
            V_DIV_FMAS_F32 => {
                let vcc = self.vcc();
                let mut out = [0u64; WAVE_SIZE];
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 != 0 {
                        let value = div_fmas(
                            f64::from(f(a[lane])),
                            f64::from(f(b[lane])),
                            f64::from(f(c[lane])),
                            vcc >> lane & 1 != 0,
                            SINGLE,
                            64,
                        );
                        out[lane] = bf(value as f32);
                    }
                }
                vector(out)
            }
            V_DIV_FIXUP_F32 => vector(map3(exec, a, b, c, |q, den, num| {
                let underflow: fn(f64, f64) -> bool = |n, d| {
                    let exponent = |x: f64| ((x as f32).to_bits() >> 23 & 0xff) as i32;
                    exponent(n) - exponent(d) < -150
                };
                bf(div_fixup_f64(
                    f64::from(f(q)),
                    f64::from(f(den)),
                    f64::from(f(num)),
                    Some(underflow),
                ) as f32)
            })),
            V_DIV_FIXUP_F16 => vector(map3(exec, a, b, c, |q, den, num| {
                f64_to_f16(div_fixup_f64(
                    f64::from(h(q)),
                    f64::from(h(den)),
                    f64::from(h(num)),
                    None,
                ))
                .into()
            })),
            V_DIV_FMAS_F64 => {
                let vcc = self.vcc();
                let mut out = [0u64; WAVE_SIZE];
                for lane in 0..WAVE_SIZE {
                    if exec >> lane & 1 != 0 {
                        out[lane] = bd(div_fmas(
                            d(a[lane]),
                            d(b[lane]),
                            d(c[lane]),
                            vcc >> lane & 1 != 0,
                            DOUBLE,
                            128,
                        ));
                    }
                }
                vector(out)
            }
            V_DIV_FIXUP_F64 => vector(map3(exec, a, b, c, |q, den, num| {
                bd(div_fixup_f64(d(q), d(den), d(num), None))
            })),
            _ => Ok(None),
        }
    }
}
