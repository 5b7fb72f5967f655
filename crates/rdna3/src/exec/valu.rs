//! Vector ALU execution over whole waves. Every VALU encoding arrives here as a canonical
//! [`ValuInst`]; sources are fetched once per instruction as 32-lane arrays, the operation
//! loops over lanes, and results are written under EXEC.

use super::denorm::{self, DenormRule, Denormals, Precision};
use super::float::*;
use super::{illegal, unimplemented, Flow, Wave, WAVE_SIZE};
use crate::decode::{CompareCondition, CompareType, Dpp, ValuInst, Vop1, Vop2, Vop3p, Vopd};
use crate::fault::FaultKind;
use crate::isa::{ValuOpcode, Vop1Op, Vop2Op, Vop3Op, Vop3pOp, Vop3sdOp, VopdOp};
use crate::operand::{Operand, EXEC_LO, M0};

type Lanes = [u64; WAVE_SIZE];

/// Result of a VALU operation before it is written back (short-lived, on the stack).
#[allow(clippy::large_enum_variant)]
enum Output {
    /// Per-lane values for the vector destination, optional per-lane carry for `sdst`.
    Vector { values: Lanes, carry: Option<u32> },
    /// A lane mask (compares) for the scalar destination or EXEC.
    Mask(u32),
    /// A scalar value (`v_readfirstlane_b32`, `v_readlane_b32`).
    Scalar(u32),
    /// One lane of the vector destination (`v_writelane_b32`).
    Lane { lane: usize, value: u32 },
}

#[inline]
fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
#[inline]
fn bf(x: f32) -> u64 {
    u64::from(x.to_bits())
}
#[inline]
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
#[inline]
fn bd(x: f64) -> u64 {
    x.to_bits()
}
#[inline]
fn h(x: u64) -> f32 {
    f16_to_f32(x as u16)
}
#[inline]
fn bh(x: f32) -> u64 {
    u64::from(f32_to_f16(x))
}
#[inline]
fn lo(x: u64) -> u32 {
    x as u32
}

fn map1(exec: u32, a: &Lanes, op: impl Fn(u64) -> u64) -> Lanes {
    let mut out = [0u64; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 {
            out[lane] = op(a[lane]);
        }
    }
    out
}

fn map2(exec: u32, a: &Lanes, b: &Lanes, op: impl Fn(u64, u64) -> u64) -> Lanes {
    let mut out = [0u64; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 {
            out[lane] = op(a[lane], b[lane]);
        }
    }
    out
}

fn map3(exec: u32, a: &Lanes, b: &Lanes, c: &Lanes, op: impl Fn(u64, u64, u64) -> u64) -> Lanes {
    let mut out = [0u64; WAVE_SIZE];
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 {
            out[lane] = op(a[lane], b[lane], c[lane]);
        }
    }
    out
}

/// Lanes with `test` true (among `exec`).
fn mask_of(exec: u32, test: impl Fn(usize) -> bool) -> u32 {
    let mut mask = 0;
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 != 0 && test(lane) {
            mask |= 1 << lane;
        }
    }
    mask
}

/// Per-lane add/sub with carry: returns (values, carry mask).
fn carry_op(
    exec: u32,
    a: &Lanes,
    b: &Lanes,
    carry_in: u32,
    subtract: bool,
    use_carry: bool,
    clamp: bool,
) -> (Lanes, u32) {
    let mut out = [0u64; WAVE_SIZE];
    let mut carry = 0u32;
    for lane in 0..WAVE_SIZE {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let cin = u64::from(use_carry && carry_in >> lane & 1 != 0);
        let (x, y) = (a[lane] & 0xffff_ffff, b[lane] & 0xffff_ffff);
        let (value, overflow) = if subtract {
            (x.wrapping_sub(y).wrapping_sub(cin), y + cin > x)
        } else {
            let sum = x + y + cin;
            (sum, sum >> 32 != 0)
        };
        out[lane] = value & 0xffff_ffff;
        if overflow {
            carry |= 1 << lane;
            if clamp {
                // Saturate: the carry/borrow out is still reported.
                out[lane] = if subtract { 0 } else { 0xffff_ffff };
            }
        }
    }
    (out, carry)
}

pub(super) fn bfe_u32(x: u32, offset: u32, width: u32) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    ((u64::from(x) >> offset) & ((1u64 << width) - 1)) as u32
}

/// V_BFE_I32: `(S0.i32 >> offset) & ((1 << width) - 1)` with an arithmetic shift, then
/// sign-extended from bit `width - 1` (offset and width are 5 bits; width 0 gives 0).
fn bfe_i32(x: u32, offset: u32, width: u32) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    let field = ((x as i32) >> offset) as u32 & ((1u32 << width) - 1);
    let shift = 32 - width;
    (((field << shift) as i32) >> shift) as u32
}

/// An integer result of `bits` bits: wrapped, or saturated to the (un)signed range when the
/// instruction's clamp bit is set.
fn int_result(x: i128, bits: u32, signed: bool, clamp: bool) -> u64 {
    let mask = (1u64 << bits) - 1;
    if !clamp {
        return (x as u64) & mask;
    }
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, i128::from(mask))
    };
    (x.clamp(min, max) as u64) & mask
}

/// Low 32 bits, unsigned, widened.
fn u32w(x: u64) -> i128 {
    i128::from(x as u32)
}
/// Low 32 bits, signed, widened.
fn i32w(x: u64) -> i128 {
    i128::from(x as u32 as i32)
}
/// Low 16 bits, unsigned, widened.
fn u16w(x: u64) -> i128 {
    i128::from(x as u16)
}
/// Low 16 bits, signed, widened.
fn i16w(x: u64) -> i128 {
    i128::from(x as u16 as i16)
}

/// V_DOT2ACC_F32_F16: `acc + lo(x) lo(y) + hi(x) hi(y)`, accumulated in f32 step by step
/// (products of f16 values are exact in f32).
fn dot2acc_f32_f16(x: u32, y: u32, acc: u32) -> u32 {
    let mut tmp = f32::from_bits(acc);
    tmp += f16_to_f32(x as u16) * f16_to_f32(y as u16);
    tmp += f16_to_f32((x >> 16) as u16) * f16_to_f32((y >> 16) as u16);
    tmp.to_bits()
}

/// V_DOT2ACC_F32_BF16 (VOPD): the bf16 form of [`dot2acc_f32_f16`].
fn dot2acc_f32_bf16(x: u32, y: u32, acc: u32) -> u32 {
    let bf16 = |v: u32| f32::from_bits(v << 16);
    let mut tmp = f32::from_bits(acc);
    tmp += bf16(x & 0xffff) * bf16(y & 0xffff);
    tmp += bf16(x >> 16) * bf16(y >> 16);
    tmp.to_bits()
}

/// An f32 result rounded to f16 bits (the f32 is exact or correctly rounded from f64).
fn hq(x: f32) -> u64 {
    u64::from(f64_to_f16(f64::from(x)))
}

/// An f64 result rounded once to f16 bits.
fn hd(x: f64) -> u64 {
    u64::from(f64_to_f16(x))
}

/// f32 to bf16 bits, rounding to nearest even (NaN stays quiet NaN).
fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}

/// Float to signed normalized 16-bit: clamp to [-1, 1], scale by 32767, round to nearest.
fn snorm16(x: f64) -> i16 {
    if x.is_nan() {
        return 0;
    }
    (x.clamp(-1.0, 1.0) * 32767.0).round_ties_even() as i16
}

/// Float to unsigned normalized 16-bit.
fn unorm16(x: f64) -> u16 {
    if x.is_nan() {
        return 0;
    }
    (x.clamp(0.0, 1.0) * 65535.0).round_ties_even() as u16
}

/// Sum of absolute byte differences; `masked` skips bytes where `y` is 0 (V_MSAD_U8).
fn sad_u8(x: u32, y: u32, masked: bool) -> u32 {
    (0..4)
        .map(|byte| {
            let (p, q) = ((x >> (8 * byte)) as u8, (y >> (8 * byte)) as u8);
            if masked && q == 0 {
                0
            } else {
                u32::from(p.abs_diff(q))
            }
        })
        .sum()
}

/// Four byte SADs of the sliding 32-bit windows of `windows` (bytes k..k+3) against
/// `reference`, each added to a 16-bit field of `accumulators` and kept to 16 bits
/// (V_QSAD_PK_U16_U8; V_MQSAD_PK_U16_U8 skips reference bytes that are 0).
fn quad_sad_u16(windows: u64, reference: u32, accumulators: u64, masked: bool) -> u64 {
    (0..4).fold(0u64, |out, k| {
        let window = (windows >> (8 * k)) as u32;
        let accumulator = ((accumulators >> (16 * k)) & 0xffff) as u32;
        let sum = sad_u8(window, reference, masked).wrapping_add(accumulator) & 0xffff;
        out | u64::from(sum) << (16 * k)
    })
}

/// V_CUBEID/SC/TC/MA_F32: face id, S and T coordinates and twice the major axis of the
/// cube-map direction (x, y, z). The major axis is z on ties with x or y, then y over x.
fn cube(op: Vop3Op, x: f32, y: f32, z: f32) -> f32 {
    let (ax, ay, az) = (x.abs(), y.abs(), z.abs());
    let negative = |v: f32| v < 0.0;
    if az >= ax && az >= ay {
        match op {
            Vop3Op::V_CUBEID_F32 => {
                if negative(z) {
                    5.0
                } else {
                    4.0
                }
            }
            Vop3Op::V_CUBESC_F32 => {
                if negative(z) {
                    -x
                } else {
                    x
                }
            }
            Vop3Op::V_CUBETC_F32 => -y,
            _ => z * 2.0,
        }
    } else if ay >= ax {
        match op {
            Vop3Op::V_CUBEID_F32 => {
                if negative(y) {
                    3.0
                } else {
                    2.0
                }
            }
            Vop3Op::V_CUBESC_F32 => x,
            Vop3Op::V_CUBETC_F32 => {
                if negative(y) {
                    -z
                } else {
                    z
                }
            }
            _ => y * 2.0,
        }
    } else {
        match op {
            Vop3Op::V_CUBEID_F32 => {
                if negative(x) {
                    1.0
                } else {
                    0.0
                }
            }
            Vop3Op::V_CUBESC_F32 => {
                if negative(x) {
                    z
                } else {
                    -z
                }
            }
            Vop3Op::V_CUBETC_F32 => -y,
            _ => x * 2.0,
        }
    }
}

/// The 1201 fraction bits of 2/π (0.b1200 b1199 ... b0), most significant first, padded
/// with zeros to 38 dwords.
const TWO_OVER_PI_FRACTION: [u32; 38] = [
    0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561,
    0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c, 0xfe1deb1c, 0xb129a73e, 0xe88235f5, 0x2ebb4484,
    0xe99c7026, 0xb45f7e41, 0x3991d639, 0x835339f4, 0x9c845f8b, 0xbdf9283b, 0x1ff897ff, 0xde05980f,
    0xef2f118b, 0x5a0a6d1f, 0x6d367ecf, 0x27cb09b7, 0x4f463f66, 0x9e5fea2d, 0x7527bac7, 0xebe5f17b,
    0x3d0739f7, 0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08, 0x56033046, 0xfc7b0000,
];

/// 53 bits of 2/π starting `skip` bits after the binary point (zeros past the table).
fn two_over_pi_segment(skip: usize) -> u64 {
    (0..53).fold(0u64, |segment, k| {
        let position = skip + k;
        let bit = TWO_OVER_PI_FRACTION
            .get(position / 32)
            .map_or(0, |word| (word >> (31 - position % 32)) & 1);
        segment << 1 | u64::from(bit)
    })
}

/// V_TRIG_PREOP_F64: the 53-bit segment `segment` (S1[4:0]) of 2/π for range reduction of
/// `x`, skipping further bits for large exponents, scaled to its place value (by 2^128 more
/// for the largest inputs); results below the normal range are truncated.
fn trig_preop(x: f64, segment: u32) -> f64 {
    let exponent = ((x.to_bits() >> 52) & 0x7ff) as i32;
    let mut shift = (segment & 31) as i32 * 53;
    if exponent > 1077 {
        shift += exponent - 1077;
    }
    let bits = two_over_pi_segment(shift as usize);
    let mut scale = -53 - shift;
    if exponent >= 1968 {
        scale += 128;
    }
    if bits == 0 {
        return 0.0;
    }
    let top = 63 - bits.leading_zeros() as i32;
    if top + scale >= -1022 {
        return ldexp_f64(bits as f64, scale);
    }
    // Denormal result: keep the bits at or above 2^-1074, drop the rest.
    let dropped = -1074 - scale;
    if dropped >= 64 {
        0.0
    } else {
        f64::from_bits(bits >> dropped)
    }
}

fn sext24(x: u64) -> i64 {
    ((x << 40) as i64) >> 40
}

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

/// V_PERM_B32 byte selection.
fn perm_byte(pool: u64, selector: u32) -> u32 {
    match selector {
        0..=7 => ((pool >> (selector * 8)) & 0xff) as u32,
        8..=11 => {
            let byte = match selector {
                8 => (pool >> 15) & 1,
                9 => (pool >> 31) & 1,
                10 => (pool >> 47) & 1,
                _ => (pool >> 63) & 1,
            };
            if byte != 0 {
                0xff
            } else {
                0
            }
        }
        12 => 0,
        _ => 0xff,
    }
}

impl Wave {
    pub(super) fn valu_optional(
        &mut self,
        v: Option<&ValuInst>,
        mnemonic: &str,
    ) -> Result<Flow, FaultKind> {
        let Some(v) = v else {
            return Err(unimplemented(mnemonic));
        };
        self.valu(v).map_err(|fault| match fault {
            FaultKind::Unimplemented { .. } => unimplemented(mnemonic),
            other => other,
        })
    }

    pub(super) fn valu(&mut self, v: &ValuInst) -> Result<Flow, FaultKind> {
        if let Some(flow) = self.valu_fast(v) {
            return Ok(flow);
        }
        if let ValuOpcode::Vop3(op) = v.op {
            if matches!(
                op,
                Vop3Op::V_MOVRELS_B32_E64
                    | Vop3Op::V_MOVRELD_B32_E64
                    | Vop3Op::V_MOVRELSD_B32_E64
                    | Vop3Op::V_MOVRELSD_2_B32_E64
                    | Vop3Op::V_MQSAD_U32_U8
                    | Vop3Op::V_PIPEFLUSH_E64
            ) {
                return self.valu_outside_lane_model(v, op);
            }
        }
        let (output, lane_mask) = self.valu_compute(v)?;
        self.valu_commit(v, output, lane_mask)?;
        Ok(Flow::Next)
    }

    /// The VGPR `base + offset` of the M0-relative moves (`base` is the register the
    /// instruction names), checked against the register file.
    fn relative_vgpr(&self, base: Operand, offset: u32) -> Result<usize, FaultKind> {
        let Operand::Vgpr(first) = base else {
            return Err(illegal(format!(
                "{base} is not a VGPR, so it cannot be indexed by M0"
            )));
        };
        let index = u32::from(first).saturating_add(offset);
        if index > 255 {
            return Err(illegal(format!(
                "{base} indexed by M0 = {offset} is v{index}, past v255"
            )));
        }
        Ok(self.vgpr_range(Operand::Vgpr(index as u8), 1)?.start)
    }

    /// VALU operations that do not fit the per-lane source/destination model of
    /// [`Wave::valu_compute`]: register indexing through M0 (v_movrel*), the 128-bit
    /// v_mqsad_u32_u8, and v_pipeflush.
    fn valu_outside_lane_model(&mut self, v: &ValuInst, op: Vop3Op) -> Result<Flow, FaultKind> {
        if v.dpp.is_some() {
            return Err(unimplemented(op.mnemonic()));
        }
        let exec = self.exec();
        let m0 = self.sgpr[usize::from(M0)];
        let (from, to) = match op {
            // Flushes a cache of VALU results, which a functional model does not have.
            Vop3Op::V_PIPEFLUSH_E64 => return Ok(Flow::Next),
            Vop3Op::V_MOVRELS_B32_E64 => (
                self.relative_vgpr(v.src[0], m0)?,
                self.relative_vgpr(v.dst, 0)?,
            ),
            Vop3Op::V_MOVRELD_B32_E64 => {
                // The source is any 32-bit operand; only the destination is indexed.
                let (values, _) = self.fetch(v, 0)?;
                let to = self.relative_vgpr(v.dst, m0)?;
                for (lane, value) in values.iter().enumerate() {
                    if exec >> lane & 1 != 0 {
                        self.vgpr[to][lane] = *value as u32;
                    }
                }
                return Ok(Flow::Next);
            }
            Vop3Op::V_MOVRELSD_B32_E64 => (
                self.relative_vgpr(v.src[0], m0)?,
                self.relative_vgpr(v.dst, m0)?,
            ),
            Vop3Op::V_MOVRELSD_2_B32_E64 => (
                self.relative_vgpr(v.src[0], m0 & 0x3ff)?,
                self.relative_vgpr(v.dst, (m0 >> 16) & 0x3ff)?,
            ),
            _ => return self.mqsad_u32_u8(v),
        };
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 != 0 {
                self.vgpr[to][lane] = self.vgpr[from][lane];
            }
        }
        Ok(Flow::Next)
    }

    /// V_MQSAD_U32_U8: four masked byte SADs of sliding 32-bit windows of S0 against S1,
    /// each accumulated onto one dword of the 128-bit S2 (always VGPRs).
    fn mqsad_u32_u8(&mut self, v: &ValuInst) -> Result<Flow, FaultKind> {
        let exec = self.exec();
        let (windows, _) = self.fetch(v, 0)?;
        let (reference, _) = self.fetch(v, 1)?;
        let accumulators = self.vgpr_range(v.src[2], 4)?.start;
        let dst = self.vgpr_range(v.dst, 4)?.start;
        let mut out = [[0u32; WAVE_SIZE]; 4];
        for lane in 0..WAVE_SIZE {
            for (k, dword) in out.iter_mut().enumerate() {
                let window = (windows[lane] >> (8 * k)) as u32;
                let sum = sad_u8(window, reference[lane] as u32, true);
                dword[lane] = sum.wrapping_add(self.vgpr[accumulators + k][lane]);
            }
        }
        // All four dwords are computed before any is written: the destination may overlap
        // the accumulators.
        for (k, dword) in out.iter().enumerate() {
            for (lane, value) in dword.iter().enumerate() {
                if exec >> lane & 1 != 0 {
                    self.vgpr[dst + k][lane] = *value;
                }
            }
        }
        Ok(Flow::Next)
    }

    /// VOP1 operations without a VOP3 form (`v_swap_b32`, `v_swaprel_b32`, `v_swap_b16`,
    /// `v_permlane64_b32`).
    pub(super) fn vop1_special(&mut self, i: &Vop1) -> Result<Flow, FaultKind> {
        if i.op == Vop1Op::V_PERMLANE64_B32_E32 && i.dpp.is_none() {
            // The ISA defines it for wave64 only and makes it a NOP in wave32, where a
            // compiler never emits it: running one means the code was built for wave64.
            return Err(FaultKind::Unsupported(
                "v_permlane64_b32 in wave32 (the ISA defines it for wave64 only)".to_string(),
            ));
        }
        if i.op == Vop1Op::V_SWAP_B16_E32 && i.dpp.is_none() {
            return self.swap_b16(i);
        }
        let swaps = matches!(i.op, Vop1Op::V_SWAP_B32_E32 | Vop1Op::V_SWAPREL_B32_E32);
        if !swaps || i.dpp.is_some() {
            return Err(unimplemented(i.op.mnemonic()));
        }
        let exec = self.exec();
        let (source, dst) = if i.op == Vop1Op::V_SWAPREL_B32_E32 {
            // Source indexed by M0[9:0], destination by M0[25:16].
            let m0 = self.sgpr[usize::from(M0)];
            (
                self.relative_vgpr(i.src0, m0 & 0x3ff)?,
                self.relative_vgpr(i.vdst, (m0 >> 16) & 0x3ff)?,
            )
        } else {
            (
                self.vgpr_range(i.src0, 1)?.start,
                self.vgpr_range(i.vdst, 1)?.start,
            )
        };
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 != 0 {
                let old = self.vgpr[dst][lane];
                self.vgpr[dst][lane] = self.vgpr[source][lane];
                self.vgpr[source][lane] = old;
            }
        }
        Ok(Flow::Next)
    }

    /// V_SWAP_B16: exchanges two 16-bit register halves. In the true16 encoding, bit 7 of
    /// each VGPR number selects the high half of VGPR `number & 0x7f`.
    fn swap_b16(&mut self, i: &Vop1) -> Result<Flow, FaultKind> {
        let half = |operand: Operand| match operand {
            Operand::Vgpr(n) => Ok((Operand::Vgpr(n & 0x7f), 16 * u32::from(n >> 7))),
            other => Err(illegal(format!(
                "v_swap_b16 operand {other} is not a VGPR half"
            ))),
        };
        let (dst, dst_shift) = half(i.vdst)?;
        let (source, source_shift) = half(i.src0)?;
        let dst = self.vgpr_range(dst, 1)?.start;
        let source = self.vgpr_range(source, 1)?.start;
        let exec = self.exec();
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let old_dst = (self.vgpr[dst][lane] >> dst_shift) & 0xffff;
            let old_source = (self.vgpr[source][lane] >> source_shift) & 0xffff;
            let word = &mut self.vgpr[dst][lane];
            *word = (*word & !(0xffff << dst_shift)) | (old_source << dst_shift);
            let word = &mut self.vgpr[source][lane];
            *word = (*word & !(0xffff << source_shift)) | (old_dst << source_shift);
        }
        Ok(Flow::Next)
    }

    /// VOP2 operations without a VOP3 form (`v_dot2acc_f32_f16`, `v_pk_fmac_f16`).
    pub(super) fn vop2_special(&mut self, i: &Vop2) -> Result<Flow, FaultKind> {
        if i.dpp.is_some() {
            return Err(unimplemented(i.op.mnemonic()));
        }
        let exec = self.exec();
        let src0 = match i.src0 {
            Operand::Vgpr(_) => self.vgpr[self.vgpr_range(i.src0, 1)?.start],
            Operand::InlineFloat(value) => {
                let half = u32::from(value.f16_bits());
                // Packed inline constants hold the value in the low half only.
                [half; WAVE_SIZE]
            }
            other => [self.read_scalar(other)?; WAVE_SIZE],
        };
        let src1 = self.vgpr[self.vgpr_range(i.vsrc1, 1)?.start];
        let dst = self.vgpr_range(i.vdst, 1)?.start;
        let op: fn(u32, u32, u32) -> u32 = match i.op {
            Vop2Op::V_DOT2ACC_F32_F16_E32 => dot2acc_f32_f16,
            Vop2Op::V_PK_FMAC_F16_E32 => |x, y, acc| {
                let low = fma_f16(x as u16, y as u16, acc as u16);
                let high = fma_f16((x >> 16) as u16, (y >> 16) as u16, (acc >> 16) as u16);
                u32::from(low) | (u32::from(high) << 16)
            },
            _ => return Err(unimplemented(i.op.mnemonic())),
        };
        // v_pk_fmac_f16 is an f16 operation and follows MODE; the dot product's rules are
        // not documented and it keeps its operands as they are.
        let denormals = if i.op == Vop2Op::V_PK_FMAC_F16_E32 {
            Denormals::of(self.mode, DenormRule::Mode)
        } else {
            Denormals::KEEP
        };
        let input = |x: u32| denormals.input(Precision::PackedHalf, x.into()) as u32;
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 != 0 {
                let result = op(
                    input(src0[lane]),
                    input(src1[lane]),
                    input(self.vgpr[dst][lane]),
                );
                self.vgpr[dst][lane] =
                    denormals.output(Precision::PackedHalf, result.into()) as u32;
            }
        }
        Ok(Flow::Next)
    }

    pub(super) fn vopd(&mut self, i: &Vopd) -> Result<Flow, FaultKind> {
        if i.x.is_none() || i.y.is_none() {
            return self.vopd_with_dot(i);
        }
        let (Some(x), Some(y)) = (&i.x, &i.y) else {
            let missing = if i.x.is_none() {
                i.opx.mnemonic()
            } else {
                i.opy.mnemonic()
            };
            return Err(unimplemented(missing));
        };
        // Both halves read their sources before either writes.
        let (out_x, mask_x) = self.valu_compute(x)?;
        let (out_y, mask_y) = self.valu_compute(y)?;
        self.valu_commit(x, out_x, mask_x)?;
        self.valu_commit(y, out_y, mask_y)?;
        Ok(Flow::Next)
    }

    /// VOPD with a `v_dual_dot2acc_f32_{f16,bf16}` half: both halves read their sources
    /// before either writes.
    fn vopd_with_dot(&mut self, i: &Vopd) -> Result<Flow, FaultKind> {
        let exec = self.exec();
        let dot_half = |w: &Wave,
                        op: VopdOp,
                        dst: Operand,
                        src: &[Operand; 2]|
         -> Result<Option<(usize, [u32; WAVE_SIZE])>, FaultKind> {
            let combine: fn(u32, u32, u32) -> u32 = match op {
                VopdOp::V_DUAL_DOT2ACC_F32_F16 => dot2acc_f32_f16,
                VopdOp::V_DUAL_DOT2ACC_F32_BF16 => dot2acc_f32_bf16,
                _ => return Err(unimplemented(op.mnemonic())),
            };
            let a = match src[0] {
                Operand::Vgpr(_) => w.vgpr[w.vgpr_range(src[0], 1)?.start],
                Operand::InlineFloat(value) => [u32::from(value.f16_bits()); WAVE_SIZE],
                other => [w.read_scalar(other)?; WAVE_SIZE],
            };
            let b = w.vgpr[w.vgpr_range(src[1], 1)?.start];
            let d = w.vgpr_range(dst, 1)?.start;
            let mut out = w.vgpr[d];
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 != 0 {
                    out[lane] = combine(a[lane], b[lane], out[lane]);
                }
            }
            Ok(Some((d, out)))
        };
        let x = match &i.x {
            Some(x) => Err(self.valu_compute(x)?),
            None => Ok(dot_half(self, i.opx, i.vdstx, &i.srcx)?),
        };
        let y = match &i.y {
            Some(y) => Err(self.valu_compute(y)?),
            None => Ok(dot_half(self, i.opy, i.vdsty, &i.srcy)?),
        };
        for (result, valu) in [(x, &i.x), (y, &i.y)] {
            match (result, valu) {
                (Ok(Some((d, out))), _) => self.vgpr[d] = out,
                (Err((output, mask)), Some(v)) => self.valu_commit(v, output, mask)?,
                _ => {}
            }
        }
        Ok(Flow::Next)
    }

    /// Reads source `n` of `v` for all lanes, with opsel, DPP and float modifiers applied.
    /// Also returns the lanes DPP leaves enabled.
    fn fetch(&self, v: &ValuInst, n: usize) -> Result<(Lanes, u32), FaultKind> {
        let bits = v.src_bits[n];
        let operand = v.src[n];
        let mut lanes = [0u64; WAVE_SIZE];
        let mut enabled = u32::MAX;
        if bits == 0 {
            return Ok((lanes, enabled));
        }
        let high_half = bits == 16 && (v.opsel >> n) & 1 != 0;
        match operand {
            Operand::Vgpr(_) => {
                let dwords = if bits > 32 { 2 } else { 1 };
                let range = self.vgpr_range(operand, dwords)?;
                let low = &self.vgpr[range.start];
                if dwords == 2 {
                    let high = &self.vgpr[range.start + 1];
                    for lane in 0..WAVE_SIZE {
                        lanes[lane] = u64::from(low[lane]) | (u64::from(high[lane]) << 32);
                    }
                } else {
                    for lane in 0..WAVE_SIZE {
                        lanes[lane] = u64::from(low[lane]);
                    }
                }
            }
            Operand::InlineFloat(value) if bits == 16 => {
                lanes = [u64::from(value.f16_bits()); WAVE_SIZE]
            }
            _ => {
                let value = if bits > 32 {
                    self.read_scalar64(operand, v.src_float[n])?
                } else {
                    u64::from(self.read_scalar(operand)?)
                };
                lanes = [value; WAVE_SIZE];
            }
        }
        if n == 0 {
            if let Some(dpp) = &v.dpp {
                (lanes, enabled) = self.apply_dpp(dpp, &lanes);
            }
        }
        if bits == 16 {
            for value in lanes.iter_mut() {
                *value = if high_half {
                    (*value >> 16) & 0xffff
                } else {
                    *value & 0xffff
                };
            }
        }
        // Input modifiers act on the sign bit of the operand's width; LLVM also uses them on
        // untyped selects such as v_cndmask_b32.
        if v.abs | v.neg != 0 {
            let sign = 1u64 << (u32::from(bits.min(64)) - 1);
            let (abs, neg) = ((v.abs >> n) & 1 != 0, (v.neg >> n) & 1 != 0);
            if abs || neg {
                for value in lanes.iter_mut() {
                    if abs {
                        *value &= !sign;
                    }
                    if neg {
                        *value ^= sign;
                    }
                }
            }
        }
        Ok((lanes, enabled))
    }

    /// Applies a DPP lane permutation; returns the permuted values and the lanes allowed to
    /// write (row/bank masks, invalid source lanes without bound_ctrl).
    fn apply_dpp(&self, dpp: &Dpp, values: &Lanes) -> (Lanes, u32) {
        let exec = self.exec();
        let mut out = [0u64; WAVE_SIZE];
        let mut enabled = 0u32;
        match *dpp {
            Dpp::Dpp8 { selects, .. } => {
                for lane in 0..WAVE_SIZE {
                    let source = (lane & !7) + usize::from(selects[lane & 7] & 7);
                    out[lane] = values[source];
                }
                enabled = u32::MAX;
            }
            Dpp::Dpp16 {
                ctrl,
                row_mask,
                bank_mask,
                bound_ctrl,
                fetch_inactive,
            } => {
                for (lane, out_value) in out.iter_mut().enumerate() {
                    let row_base = lane & !15;
                    let in_row = lane & 15;
                    let source: Option<usize> = match ctrl {
                        0x000..=0x0ff => {
                            Some((lane & !3) + usize::from((ctrl >> (2 * (lane & 3))) & 3))
                        }
                        0x101..=0x10f => {
                            let s = in_row + usize::from(ctrl & 0xf);
                            (s < 16).then_some(row_base + s)
                        }
                        0x111..=0x11f => in_row
                            .checked_sub(usize::from(ctrl & 0xf))
                            .map(|s| row_base + s),
                        0x121..=0x12f => {
                            Some(row_base + (in_row + 16 - usize::from(ctrl & 0xf)) % 16)
                        }
                        0x140 => Some(row_base + 15 - in_row),
                        0x141 => Some((lane & !7) + 7 - (lane & 7)),
                        0x150..=0x15f => Some(row_base + usize::from(ctrl & 0xf)),
                        0x160..=0x16f => Some(row_base + (in_row ^ usize::from(ctrl & 0xf))),
                        _ => None,
                    };
                    let row_on = (row_mask >> (lane / 16)) & 1 != 0;
                    let bank_on = (bank_mask >> ((lane & 15) / 4)) & 1 != 0;
                    if !row_on || !bank_on {
                        continue;
                    }
                    match source {
                        Some(s) if fetch_inactive || exec >> s & 1 != 0 => {
                            *out_value = values[s];
                            enabled |= 1 << lane;
                        }
                        _ if bound_ctrl => {
                            *out_value = 0;
                            enabled |= 1 << lane;
                        }
                        _ => {}
                    }
                }
            }
        }
        (out, enabled)
    }

    fn lane_mask_source(&self, v: &ValuInst, n: usize) -> Result<u32, FaultKind> {
        self.read_scalar(v.src[n])
    }

    /// What `v` does with denormals under the current MODE.
    fn denormals_of(&self, v: &ValuInst) -> Denormals {
        let rule = if v
            .compare
            .is_some_and(|c| c.condition == CompareCondition::Class)
        {
            DenormRule::Keep
        } else {
            denorm::rule(v.op)
        };
        Denormals::of(self.mode, rule)
    }

    /// [`Wave::fetch`] with the float source's denormals flushed as `denormals` says (after
    /// the input modifiers: flushing keeps the sign, so the order does not matter).
    fn fetch_flushed(
        &self,
        v: &ValuInst,
        n: usize,
        denormals: Denormals,
    ) -> Result<(Lanes, u32), FaultKind> {
        let (mut lanes, enabled) = self.fetch(v, n)?;
        if v.src_float[n] && !denormals.keeps_all() {
            if let Some(precision) = Precision::of_bits(v.src_bits[n]) {
                for value in lanes.iter_mut() {
                    *value = denormals.input(precision, *value);
                }
            }
        }
        Ok((lanes, enabled))
    }

    /// Computes a VALU operation; returns the output and the lanes that may be written.
    fn valu_compute(&self, v: &ValuInst) -> Result<(Output, u32), FaultKind> {
        let denormals = self.denormals_of(v);
        let (a, enabled) = self.fetch_flushed(v, 0, denormals)?;
        let exec = self.exec() & enabled;
        if let Some(compare) = v.compare {
            let (b, _) = self.fetch_flushed(v, 1, denormals)?;
            return Ok((
                Output::Mask(compare_lanes(exec, compare.condition, compare.ty, &a, &b)),
                exec,
            ));
        }
        let (b, _) = self.fetch_flushed(v, 1, denormals)?;
        let (c, _) = self.fetch_flushed(v, 2, denormals)?;
        let vector = |values: Lanes| {
            Ok((
                Output::Vector {
                    values,
                    carry: None,
                },
                exec,
            ))
        };
        match v.op {
            ValuOpcode::Vop3sd(op) => {
                use Vop3sdOp::*;
                let (values, carry) = match op {
                    V_ADD_CO_U32 => carry_op(exec, &a, &b, 0, false, false, v.clamp),
                    V_SUB_CO_U32 => carry_op(exec, &a, &b, 0, true, false, v.clamp),
                    V_SUBREV_CO_U32 => carry_op(exec, &b, &a, 0, true, false, v.clamp),
                    V_ADD_CO_CI_U32 => carry_op(
                        exec,
                        &a,
                        &b,
                        self.lane_mask_source(v, 2)?,
                        false,
                        true,
                        v.clamp,
                    ),
                    V_SUB_CO_CI_U32 => carry_op(
                        exec,
                        &a,
                        &b,
                        self.lane_mask_source(v, 2)?,
                        true,
                        true,
                        v.clamp,
                    ),
                    V_SUBREV_CO_CI_U32 => carry_op(
                        exec,
                        &b,
                        &a,
                        self.lane_mask_source(v, 2)?,
                        true,
                        true,
                        v.clamp,
                    ),
                    V_MAD_U64_U32 => {
                        let mut carry = 0;
                        let values = {
                            let mut out = [0u64; WAVE_SIZE];
                            for lane in 0..WAVE_SIZE {
                                if exec >> lane & 1 != 0 {
                                    let product = u128::from(a[lane] & 0xffff_ffff)
                                        * u128::from(b[lane] & 0xffff_ffff);
                                    let sum = product + u128::from(c[lane]);
                                    out[lane] = sum as u64;
                                    if sum >> 64 != 0 {
                                        carry |= 1 << lane;
                                        if v.clamp {
                                            out[lane] = u64::MAX;
                                        }
                                    }
                                }
                            }
                            out
                        };
                        (values, carry)
                    }
                    V_MAD_I64_I32 => {
                        let mut carry = 0;
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            if exec >> lane & 1 != 0 {
                                let product = i128::from(a[lane] as u32 as i32)
                                    * i128::from(b[lane] as u32 as i32);
                                let sum = product + i128::from(c[lane] as i64);
                                out[lane] = sum as u64;
                                if sum > i128::from(i64::MAX) || sum < i128::from(i64::MIN) {
                                    carry |= 1 << lane;
                                    if v.clamp {
                                        out[lane] =
                                            sum.clamp(i64::MIN.into(), i64::MAX.into()) as u64;
                                    }
                                }
                            }
                        }
                        (out, carry)
                    }
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
                };
                Ok((
                    Output::Vector {
                        values,
                        carry: Some(carry),
                    },
                    exec,
                ))
            }
            ValuOpcode::Vop3(op) => {
                use Vop3Op::*;
                let lane_select = |w: &Wave| -> Result<usize, FaultKind> {
                    Ok((w.read_scalar(v.src[1])? & 31) as usize)
                };
                let clamp = v.clamp;
                // The accumulator of the MAC forms: a float source like the others.
                let old_dst = |w: &Wave| -> Result<Lanes, FaultKind> {
                    let mut lanes = [0u64; WAVE_SIZE];
                    let range = w.vgpr_range(v.dst, 1)?;
                    let precision = Precision::of_bits(v.dst_bits).filter(|_| v.dst_float);
                    for (lane, value) in lanes.iter_mut().enumerate() {
                        *value = u64::from(w.vgpr[range.start][lane]);
                        if let Some(precision) = precision {
                            *value = denormals.input(precision, *value);
                        }
                    }
                    Ok(lanes)
                };
                match op {
                    V_NOP_E64 => Ok((
                        Output::Vector {
                            values: [0; WAVE_SIZE],
                            carry: None,
                        },
                        0,
                    )),
                    V_MOV_B32_E64 => vector(map1(exec, &a, |x| x)),
                    V_READFIRSTLANE_B32_E64 => {
                        let lane = if exec == 0 {
                            0
                        } else {
                            self.exec().trailing_zeros() as usize
                        };
                        let lane = lane.min(WAVE_SIZE - 1);
                        Ok((Output::Scalar(lo(a[lane])), exec))
                    }
                    V_READLANE_B32 => {
                        let (a, _) = self.fetch(v, 0)?;
                        Ok((Output::Scalar(lo(a[lane_select(self)?])), exec))
                    }
                    V_WRITELANE_B32 => {
                        let value = self.read_scalar(v.src[0])?;
                        Ok((
                            Output::Lane {
                                lane: lane_select(self)?,
                                value,
                            },
                            exec,
                        ))
                    }
                    V_CNDMASK_B32_E64 => {
                        let mask = self.lane_mask_source(v, 2)?;
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            out[lane] = if mask >> lane & 1 != 0 {
                                b[lane]
                            } else {
                                a[lane]
                            };
                        }
                        vector(out)
                    }
                    // 32-bit float arithmetic.
                    V_ADD_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(x) + f(y)))),
                    V_SUB_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(x) - f(y)))),
                    V_SUBREV_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(y) - f(x)))),
                    V_MUL_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(f(x) * f(y)))),
                    V_MUL_DX9_ZERO_F32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        if f(x) == 0.0 || f(y) == 0.0 {
                            bf(0.0)
                        } else {
                            bf(f(x) * f(y))
                        }
                    })),
                    V_FMA_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(f(x).mul_add(f(y), f(z)))
                    })),
                    V_FMAC_F32_E64 => {
                        let acc = old_dst(self)?;
                        vector(map3(exec, &a, &b, &acc, |x, y, z| {
                            bf(f(x).mul_add(f(y), f(z)))
                        }))
                    }
                    V_MIN_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(min_f32(f(x), f(y))))),
                    V_MAX_F32_E64 => vector(map2(exec, &a, &b, |x, y| bf(max_f32(f(x), f(y))))),
                    V_MIN3_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(min_f32(min_f32(f(x), f(y)), f(z)))
                    })),
                    V_MAX3_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(max_f32(max_f32(f(x), f(y)), f(z)))
                    })),
                    V_MED3_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(med3_f32(f(x), f(y), f(z)))
                    })),
                    V_LDEXP_F32 => vector(map2(exec, &a, &b, |x, y| {
                        bf(ldexp_f32(f(x), y as u32 as i32))
                    })),
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
                    V_DIV_FIXUP_F32 => vector(map3(exec, &a, &b, &c, |q, den, num| {
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
                    V_DIV_FIXUP_F16 => vector(map3(exec, &a, &b, &c, |q, den, num| {
                        f64_to_f16(div_fixup_f64(
                            f64::from(h(q)),
                            f64::from(h(den)),
                            f64::from(h(num)),
                            None,
                        ))
                        .into()
                    })),
                    V_RCP_F32_E64 => vector(map1(exec, &a, |x| bf(1.0 / f(x)))),
                    V_RCP_IFLAG_F32_E64 => vector(map1(exec, &a, |x| bf(1.0 / f(x)))),
                    V_RSQ_F32_E64 => vector(map1(exec, &a, |x| bf(1.0 / f(x).sqrt()))),
                    V_SQRT_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).sqrt()))),
                    V_EXP_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).exp2()))),
                    V_LOG_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).log2()))),
                    V_SIN_F32_E64 => {
                        vector(map1(exec, &a, |x| bf((f(x) * std::f32::consts::TAU).sin())))
                    }
                    V_COS_F32_E64 => {
                        vector(map1(exec, &a, |x| bf((f(x) * std::f32::consts::TAU).cos())))
                    }
                    V_FLOOR_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).floor()))),
                    V_CEIL_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).ceil()))),
                    V_TRUNC_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).trunc()))),
                    V_RNDNE_F32_E64 => vector(map1(exec, &a, |x| bf(f(x).round_ties_even()))),
                    V_FRACT_F32_E64 => vector(map1(exec, &a, |x| bf(fract_f32(f(x))))),
                    V_FREXP_MANT_F32_E64 => vector(map1(exec, &a, |x| bf(frexp_mant_f32(f(x))))),
                    V_FREXP_EXP_I32_F32_E64 => {
                        vector(map1(exec, &a, |x| frexp_exp_f32(f(x)) as u32 as u64))
                    }
                    // Conversions.
                    V_CVT_F32_I32_E64 => vector(map1(exec, &a, |x| bf(x as u32 as i32 as f32))),
                    V_CVT_F32_U32_E64 => vector(map1(exec, &a, |x| bf(x as u32 as f32))),
                    V_CVT_I32_F32_E64 => vector(map1(exec, &a, |x| f(x) as i32 as u32 as u64)),
                    V_CVT_U32_F32_E64 => vector(map1(exec, &a, |x| u64::from(f(x) as u32))),
                    V_CVT_F32_F64_E64 => vector(map1(exec, &a, |x| bf(d(x) as f32))),
                    V_CVT_F64_F32_E64 => vector(map1(exec, &a, |x| bd(f64::from(f(x))))),
                    V_CVT_I32_F64_E64 => vector(map1(exec, &a, |x| d(x) as i32 as u32 as u64)),
                    V_CVT_U32_F64_E64 => vector(map1(exec, &a, |x| u64::from(d(x) as u32))),
                    V_CVT_F64_I32_E64 => vector(map1(exec, &a, |x| bd(f64::from(x as u32 as i32)))),
                    V_CVT_F64_U32_E64 => vector(map1(exec, &a, |x| bd(f64::from(x as u32)))),
                    V_CVT_F16_F32_E64 => vector(map1(exec, &a, |x| bh(f(x)))),
                    V_CVT_F32_F16_E64 => vector(map1(exec, &a, |x| bf(h(x)))),
                    V_CVT_F32_UBYTE0_E64 => vector(map1(exec, &a, |x| bf((x & 0xff) as f32))),
                    V_CVT_F32_UBYTE1_E64 => {
                        vector(map1(exec, &a, |x| bf(((x >> 8) & 0xff) as f32)))
                    }
                    V_CVT_F32_UBYTE2_E64 => {
                        vector(map1(exec, &a, |x| bf(((x >> 16) & 0xff) as f32)))
                    }
                    V_CVT_F32_UBYTE3_E64 => {
                        vector(map1(exec, &a, |x| bf(((x >> 24) & 0xff) as f32)))
                    }
                    V_CVT_FLOOR_I32_F32_E64 => {
                        vector(map1(exec, &a, |x| f(x).floor() as i32 as u32 as u64))
                    }
                    V_CVT_NEAREST_I32_F32_E64 => vector(map1(exec, &a, |x| {
                        (f(x) + 0.5).floor() as i32 as u32 as u64
                    })),
                    V_CVT_PK_RTZ_F16_F32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        let rtz = |v: f32| {
                            let rounded = f32_to_f16(v);
                            // Round toward zero: step back if rounding went away from zero.
                            if f16_to_f32(rounded).abs() > v.abs() && v.is_finite() {
                                u64::from(rounded - 1)
                            } else {
                                u64::from(rounded)
                            }
                        };
                        rtz(f(x)) | (rtz(f(y)) << 16)
                    })),
                    V_CVT_PK_U16_U32 => vector(map2(exec, &a, &b, |x, y| {
                        (x & 0xffff).min(0xffff) | ((y & 0xffff) << 16)
                    })),
                    // 16-bit float arithmetic (low halves).
                    V_ADD_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(x) + h(y)))),
                    V_SUB_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(x) - h(y)))),
                    V_SUBREV_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(y) - h(x)))),
                    V_MUL_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(h(x) * h(y)))),
                    V_FMAC_F16_E64 => {
                        let acc = old_dst(self)?;
                        vector(map3(exec, &a, &b, &acc, |x, y, z| {
                            u64::from(fma_f16(x as u16, y as u16, z as u16))
                        }))
                    }
                    V_MAX_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(max_f32(h(x), h(y))))),
                    V_MIN_F16_E64 => vector(map2(exec, &a, &b, |x, y| bh(min_f32(h(x), h(y))))),
                    // 64-bit float arithmetic.
                    V_ADD_F64 => vector(map2(exec, &a, &b, |x, y| bd(d(x) + d(y)))),
                    V_MUL_F64 => vector(map2(exec, &a, &b, |x, y| bd(d(x) * d(y)))),
                    V_FMA_F64 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bd(d(x).mul_add(d(y), d(z)))
                    })),
                    V_MIN_F64 => vector(map2(exec, &a, &b, |x, y| bd(min_f64(d(x), d(y))))),
                    V_MAX_F64 => vector(map2(exec, &a, &b, |x, y| bd(max_f64(d(x), d(y))))),
                    V_LDEXP_F64 => vector(map2(exec, &a, &b, |x, y| {
                        bd(ldexp_f64(d(x), y as u32 as i32))
                    })),
                    V_RCP_F64_E64 => vector(map1(exec, &a, |x| bd(1.0 / d(x)))),
                    V_RSQ_F64_E64 => vector(map1(exec, &a, |x| bd(1.0 / d(x).sqrt()))),
                    V_SQRT_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).sqrt()))),
                    V_FLOOR_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).floor()))),
                    V_CEIL_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).ceil()))),
                    V_TRUNC_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).trunc()))),
                    V_RNDNE_F64_E64 => vector(map1(exec, &a, |x| bd(d(x).round_ties_even()))),
                    V_FRACT_F64_E64 => vector(map1(exec, &a, |x| bd(fract_f64(d(x))))),
                    V_FREXP_MANT_F64_E64 => vector(map1(exec, &a, |x| bd(frexp_mant_f64(d(x))))),
                    V_FREXP_EXP_I32_F64_E64 => {
                        vector(map1(exec, &a, |x| frexp_exp_f64(d(x)) as u32 as u64))
                    }
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
                    V_DIV_FIXUP_F64 => vector(map3(exec, &a, &b, &c, |q, den, num| {
                        bd(div_fixup_f64(d(q), d(den), d(num), None))
                    })),
                    // 32-bit integer arithmetic and logic.
                    // Integer clamp saturates to the destination type's range.
                    V_ADD_NC_U32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(u32w(x) + u32w(y), 32, false, clamp)
                    })),
                    V_SUB_NC_U32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(u32w(x) - u32w(y), 32, false, clamp)
                    })),
                    V_SUBREV_NC_U32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(u32w(y) - u32w(x), 32, false, clamp)
                    })),
                    V_ADD_NC_I32 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(i32w(x) + i32w(y), 32, true, clamp)
                    })),
                    V_SUB_NC_I32 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(i32w(x) - i32w(y), 32, true, clamp)
                    })),
                    V_ADD3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        int_result(u32w(x) + u32w(y) + u32w(z), 32, false, clamp)
                    })),
                    V_XAD_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        int_result(u32w(x ^ y) + u32w(z), 32, false, clamp)
                    })),
                    V_MAD_U16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        int_result(u16w(x) * u16w(y) + u16w(z), 16, false, clamp)
                    })),
                    V_MAD_I16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        int_result(i16w(x) * i16w(y) + i16w(z), 16, true, clamp)
                    })),
                    V_MAD_U32_U16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        int_result(u16w(x) * u16w(y) + u32w(z), 32, false, clamp)
                    })),
                    V_MAD_I32_I16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        int_result(i16w(x) * i16w(y) + i32w(z), 32, true, clamp)
                    })),
                    V_ADD_NC_I16 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(i16w(x) + i16w(y), 16, true, clamp)
                    })),
                    V_SUB_NC_I16 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(i16w(x) - i16w(y), 16, true, clamp)
                    })),
                    V_MUL_LO_U32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).wrapping_mul(lo(y)))
                    })),
                    V_MUL_HI_U32 => vector(map2(exec, &a, &b, |x, y| {
                        ((x & 0xffff_ffff) * (y & 0xffff_ffff)) >> 32
                    })),
                    V_MUL_HI_I32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(
                            ((i64::from(lo(x) as i32) * i64::from(lo(y) as i32)) >> 32) as u32,
                        )
                    })),
                    V_MUL_U32_U24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        ((x & 0xff_ffff) * (y & 0xff_ffff)) & 0xffff_ffff
                    })),
                    V_MUL_HI_U32_U24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        ((x & 0xff_ffff) * (y & 0xff_ffff)) >> 32
                    })),
                    V_MUL_I32_I24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((sext24(x) * sext24(y)) as u32)
                    })),
                    V_MUL_HI_I32_I24_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(((sext24(x) * sext24(y)) >> 32) as u32)
                    })),
                    V_MAD_U32_U24 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let product = i128::from((x & 0xff_ffff) * (y & 0xff_ffff));
                        int_result(product + u32w(z), 32, false, clamp)
                    })),
                    V_MAD_I32_I24 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let product = i128::from(sext24(x) * sext24(y));
                        int_result(product + i32w(z), 32, true, clamp)
                    })),
                    V_MIN_I32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((lo(x) as i32).min(lo(y) as i32) as u32)
                    })),
                    V_MAX_I32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((lo(x) as i32).max(lo(y) as i32) as u32)
                    })),
                    V_MIN_U32_E64 => vector(map2(exec, &a, &b, |x, y| x.min(y))),
                    V_MAX_U32_E64 => vector(map2(exec, &a, &b, |x, y| x.max(y))),
                    V_MIN3_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) as i32).min(lo(y) as i32).min(lo(z) as i32) as u32)
                    })),
                    V_MAX3_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) as i32).max(lo(y) as i32).max(lo(z) as i32) as u32)
                    })),
                    V_MIN3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| x.min(y).min(z))),
                    V_MAX3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| x.max(y).max(z))),
                    V_MED3_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let (x, y, z) = (lo(x) as i32, lo(y) as i32, lo(z) as i32);
                        u64::from(x.min(y).max(x.max(y).min(z)) as u32)
                    })),
                    V_MED3_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        x.min(y).max(x.max(y).min(z))
                    })),
                    V_AND_B32_E64 => vector(map2(exec, &a, &b, |x, y| x & y)),
                    V_OR_B32_E64 => vector(map2(exec, &a, &b, |x, y| x | y)),
                    V_XOR_B32_E64 => vector(map2(exec, &a, &b, |x, y| x ^ y)),
                    V_XNOR_B32_E64 => vector(map2(exec, &a, &b, |x, y| !(x ^ y) & 0xffff_ffff)),
                    V_NOT_B32_E64 => vector(map1(exec, &a, |x| !x & 0xffff_ffff)),
                    V_AND_OR_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| (x & y) | z)),
                    V_OR3_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| x | y | z)),
                    V_XOR3_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| x ^ y ^ z)),
                    V_LSHLREV_B32_E64 => {
                        vector(map2(exec, &a, &b, |x, y| u64::from(lo(y) << (x & 31))))
                    }
                    V_LSHRREV_B32_E64 => {
                        vector(map2(exec, &a, &b, |x, y| u64::from(lo(y) >> (x & 31))))
                    }
                    V_ASHRREV_I32_E64 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(((lo(y) as i32) >> (x & 31)) as u32)
                    })),
                    V_LSHL_ADD_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) << (y & 31)).wrapping_add(lo(z)))
                    })),
                    V_ADD_LSHL_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).wrapping_add(lo(y)) << (z & 31))
                    })),
                    V_LSHL_OR_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) << (y & 31)) | lo(z))
                    })),
                    V_BFE_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(bfe_u32(lo(x), lo(y), lo(z)))
                    })),
                    V_BFE_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(bfe_i32(lo(x), lo(y), lo(z)))
                    })),
                    V_BFI_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        (x & y) | (!x & z & 0xffff_ffff)
                    })),
                    V_BFM_B32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((((1u64 << (x & 31)) - 1) as u32) << (y & 31))
                    })),
                    V_ALIGNBIT_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        ((((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff)) >> (z & 31)) & 0xffff_ffff
                    })),
                    V_ALIGNBYTE_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        ((((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff)) >> (8 * (z & 3)))
                            & 0xffff_ffff
                    })),
                    V_PERM_B32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let pool = ((x & 0xffff_ffff) << 32) | (y & 0xffff_ffff);
                        let sel = lo(z);
                        let mut r = 0u32;
                        for byte in 0..4 {
                            r |= perm_byte(pool, (sel >> (8 * byte)) & 0xff) << (8 * byte);
                        }
                        u64::from(r)
                    })),
                    V_BFREV_B32_E64 => vector(map1(exec, &a, |x| u64::from(lo(x).reverse_bits()))),
                    V_BCNT_U32_B32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(lo(x).count_ones().wrapping_add(lo(y)))
                    })),
                    V_CLZ_I32_U32_E64 => vector(map1(exec, &a, |x| {
                        if lo(x) == 0 {
                            0xffff_ffff
                        } else {
                            u64::from(lo(x).leading_zeros())
                        }
                    })),
                    V_CTZ_I32_B32_E64 => vector(map1(exec, &a, |x| {
                        if lo(x) == 0 {
                            0xffff_ffff
                        } else {
                            u64::from(lo(x).trailing_zeros())
                        }
                    })),
                    V_CLS_I32_E64 => vector(map1(exec, &a, |x| {
                        let v = lo(x);
                        if v == 0 || v == u32::MAX {
                            0xffff_ffff
                        } else if v >> 31 == 1 {
                            u64::from((!v).leading_zeros())
                        } else {
                            u64::from(v.leading_zeros())
                        }
                    })),
                    V_MBCNT_LO_U32_B32 => {
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            if exec >> lane & 1 != 0 {
                                let below =
                                    (lo(a[lane]) & ((1u64 << lane) - 1) as u32).count_ones();
                                out[lane] = u64::from(below.wrapping_add(lo(b[lane])));
                            }
                        }
                        vector(out)
                    }
                    // Wave32: lanes 32..63 do not exist, so the high half counts nothing.
                    V_MBCNT_HI_U32_B32 => vector(map2(exec, &a, &b, |_, y| y & 0xffff_ffff)),
                    V_SAD_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).abs_diff(lo(y)).wrapping_add(lo(z)))
                    })),
                    // 64-bit integer.
                    V_LSHLREV_B64 => vector(map2(exec, &a, &b, |x, y| y << (x & 63))),
                    V_LSHRREV_B64 => vector(map2(exec, &a, &b, |x, y| y >> (x & 63))),
                    V_ASHRREV_I64 => {
                        vector(map2(exec, &a, &b, |x, y| ((y as i64) >> (x & 63)) as u64))
                    }
                    // 16-bit integer (low halves).
                    V_ADD_NC_U16 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(u16w(x) + u16w(y), 16, false, clamp)
                    })),
                    V_SUB_NC_U16 => vector(map2(exec, &a, &b, |x, y| {
                        int_result(u16w(x) - u16w(y), 16, false, clamp)
                    })),
                    V_MUL_LO_U16 => vector(map2(exec, &a, &b, |x, y| x.wrapping_mul(y) & 0xffff)),
                    V_LSHLREV_B16 => vector(map2(exec, &a, &b, |x, y| (y << (x & 15)) & 0xffff)),
                    V_LSHRREV_B16 => vector(map2(exec, &a, &b, |x, y| (y & 0xffff) >> (x & 15))),
                    V_ASHRREV_I16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(((y as u16 as i16) >> (x & 15)) as u16)
                    })),
                    V_MAX_U16 => vector(map2(exec, &a, &b, |x, y| x.max(y))),
                    V_MIN_U16 => vector(map2(exec, &a, &b, |x, y| x.min(y))),
                    V_MAX_I16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((x as u16 as i16).max(y as u16 as i16) as u16)
                    })),
                    V_MIN_I16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from((x as u16 as i16).min(y as u16 as i16) as u16)
                    })),
                    // Three-operand min/max combinations.
                    V_MAXMIN_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) as i32).max(lo(y) as i32).min(lo(z) as i32) as u32)
                    })),
                    V_MINMAX_I32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((lo(x) as i32).min(lo(y) as i32).max(lo(z) as i32) as u32)
                    })),
                    V_MAXMIN_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).max(lo(y)).min(lo(z)))
                    })),
                    V_MINMAX_U32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(lo(x).min(lo(y)).max(lo(z)))
                    })),
                    V_MAXMIN_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(min_f32(max_f32(f(x), f(y)), f(z)))
                    })),
                    V_MINMAX_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        bf(max_f32(min_f32(f(x), f(y)), f(z)))
                    })),
                    V_MAXMIN_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        hq(min_f32(max_f32(h(x), h(y)), h(z)))
                    })),
                    V_MINMAX_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        hq(max_f32(min_f32(h(x), h(y)), h(z)))
                    })),
                    V_MAX3_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        hq(max_f32(max_f32(h(x), h(y)), h(z)))
                    })),
                    V_MIN3_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        hq(min_f32(min_f32(h(x), h(y)), h(z)))
                    })),
                    V_MED3_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        hq(med3_f32(h(x), h(y), h(z)))
                    })),
                    V_MAX3_I16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        i16w(x).max(i16w(y)).max(i16w(z)) as u64 & 0xffff
                    })),
                    V_MIN3_I16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        i16w(x).min(i16w(y)).min(i16w(z)) as u64 & 0xffff
                    })),
                    V_MED3_I16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let (x, y, z) = (i16w(x), i16w(y), i16w(z));
                        x.min(y).max(x.max(y).min(z)) as u64 & 0xffff
                    })),
                    V_MAX3_U16 => vector(map3(exec, &a, &b, &c, |x, y, z| x.max(y).max(z))),
                    V_MIN3_U16 => vector(map3(exec, &a, &b, &c, |x, y, z| x.min(y).min(z))),
                    V_MED3_U16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        x.min(y).max(x.max(y).min(z))
                    })),
                    // 16-bit conversions.
                    V_CVT_I16_F16_E64 => vector(map1(exec, &a, |x| u64::from(h(x) as i16 as u16))),
                    V_CVT_U16_F16_E64 => vector(map1(exec, &a, |x| u64::from(h(x) as u16))),
                    V_CVT_F16_I16_E64 => {
                        vector(map1(exec, &a, |x| u64::from(f64_to_f16(i16w(x) as f64))))
                    }
                    V_CVT_F16_U16_E64 => {
                        vector(map1(exec, &a, |x| u64::from(f64_to_f16(u16w(x) as f64))))
                    }
                    V_CVT_I32_I16_E64 => vector(map1(exec, &a, |x| i16w(x) as u64 & 0xffff_ffff)),
                    V_CVT_U32_U16_E64 => vector(map1(exec, &a, |x| x & 0xffff)),
                    V_CVT_NORM_I16_F16_E64 => vector(map1(exec, &a, |x| {
                        u64::from(snorm16(f64::from(h(x))) as u16)
                    })),
                    V_CVT_NORM_U16_F16_E64 => {
                        vector(map1(exec, &a, |x| u64::from(unorm16(f64::from(h(x))))))
                    }
                    V_CVT_PK_NORM_I16_F32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(snorm16(f64::from(f(x))) as u16)
                            | u64::from(snorm16(f64::from(f(y))) as u16) << 16
                    })),
                    V_CVT_PK_NORM_U16_F32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(unorm16(f64::from(f(x))))
                            | u64::from(unorm16(f64::from(f(y)))) << 16
                    })),
                    V_CVT_PK_NORM_I16_F16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(snorm16(f64::from(h(x))) as u16)
                            | u64::from(snorm16(f64::from(h(y))) as u16) << 16
                    })),
                    V_CVT_PK_NORM_U16_F16 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(unorm16(f64::from(h(x))))
                            | u64::from(unorm16(f64::from(h(y)))) << 16
                    })),
                    V_CVT_PK_I16_I32 => vector(map2(exec, &a, &b, |x, y| {
                        let sat = |v: u64| i32w(v).clamp(-32768, 32767) as u64 & 0xffff;
                        sat(x) | sat(y) << 16
                    })),
                    V_CVT_PK_U16_F32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(f(x) as u16) | u64::from(f(y) as u16) << 16
                    })),
                    V_CVT_PK_I16_F32 => vector(map2(exec, &a, &b, |x, y| {
                        u64::from(f(x) as i16 as u16) | u64::from(f(y) as i16 as u16) << 16
                    })),
                    V_CVT_PK_U8_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let shift = (y & 3) * 8;
                        let byte = u64::from(f(x).round_ties_even() as u8);
                        (z & 0xffff_ffff & !(0xff << shift)) | byte << shift
                    })),
                    V_SAT_PK_U8_I16_E64 => vector(map1(exec, &a, |x| {
                        let sat = |v: u64| (v as u16 as i16).clamp(0, 255) as u64;
                        sat(x) | sat(x >> 16) << 8
                    })),
                    V_PACK_B32_F16 => {
                        vector(map2(exec, &a, &b, |x, y| (x & 0xffff) | (y & 0xffff) << 16))
                    }
                    // 16-bit float arithmetic and transcendentals (one rounding from f64).
                    V_FMA_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(fma_f16(x as u16, y as u16, z as u16))
                    })),
                    V_RCP_F16_E64 => vector(map1(exec, &a, |x| hd(1.0 / f64::from(h(x))))),
                    V_RSQ_F16_E64 => vector(map1(exec, &a, |x| hd(1.0 / f64::from(h(x)).sqrt()))),
                    V_SQRT_F16_E64 => vector(map1(exec, &a, |x| hd(f64::from(h(x)).sqrt()))),
                    V_LOG_F16_E64 => vector(map1(exec, &a, |x| hd(f64::from(h(x)).log2()))),
                    V_EXP_F16_E64 => vector(map1(exec, &a, |x| hd(f64::from(h(x)).exp2()))),
                    V_SIN_F16_E64 => vector(map1(exec, &a, |x| {
                        hd((f64::from(h(x)) * std::f64::consts::TAU).sin())
                    })),
                    V_COS_F16_E64 => vector(map1(exec, &a, |x| {
                        hd((f64::from(h(x)) * std::f64::consts::TAU).cos())
                    })),
                    V_FLOOR_F16_E64 => vector(map1(exec, &a, |x| hq(h(x).floor()))),
                    V_CEIL_F16_E64 => vector(map1(exec, &a, |x| hq(h(x).ceil()))),
                    V_TRUNC_F16_E64 => vector(map1(exec, &a, |x| hq(h(x).trunc()))),
                    V_RNDNE_F16_E64 => vector(map1(exec, &a, |x| hq(h(x).round_ties_even()))),
                    V_FRACT_F16_E64 => vector(map1(exec, &a, |x| {
                        let v = h(x);
                        if v.is_finite() {
                            // Largest f16 below 1.0 is 0x3bff.
                            hq((v - v.floor()).min(f16_to_f32(0x3bff)))
                        } else {
                            hq(fract_f32(v))
                        }
                    })),
                    V_FREXP_MANT_F16_E64 => vector(map1(exec, &a, |x| hq(frexp_mant_f32(h(x))))),
                    V_FREXP_EXP_I16_F16_E64 => {
                        vector(map1(exec, &a, |x| u64::from(frexp_exp_f32(h(x)) as u16)))
                    }
                    V_LDEXP_F16_E64 => vector(map2(exec, &a, &b, |x, y| {
                        let exponent = i32::from(y as u16 as i16).clamp(-100, 100);
                        hd(f64::from(h(x)) * 2f64.powi(exponent))
                    })),
                    V_CNDMASK_B16 => {
                        let mask = self.lane_mask_source(v, 2)?;
                        let mut out = [0u64; WAVE_SIZE];
                        for lane in 0..WAVE_SIZE {
                            out[lane] = if mask >> lane & 1 != 0 {
                                b[lane]
                            } else {
                                a[lane]
                            };
                        }
                        vector(out)
                    }
                    V_AND_B16 => vector(map2(exec, &a, &b, |x, y| x & y & 0xffff)),
                    V_OR_B16 => vector(map2(exec, &a, &b, |x, y| (x | y) & 0xffff)),
                    V_XOR_B16 => vector(map2(exec, &a, &b, |x, y| (x ^ y) & 0xffff)),
                    V_NOT_B16_E64 => vector(map1(exec, &a, |x| !x & 0xffff)),
                    V_MOV_B16_E64 => vector(map1(exec, &a, |x| x & 0xffff)),
                    V_FMA_DX9_ZERO_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        if f(x) == 0.0 || f(y) == 0.0 {
                            z & 0xffff_ffff
                        } else {
                            bf(f(x).mul_add(f(y), f(z)))
                        }
                    })),
                    V_FMAC_DX9_ZERO_F32_E64 => {
                        let acc = old_dst(self)?;
                        vector(map3(exec, &a, &b, &acc, |x, y, z| {
                            if f(x) == 0.0 || f(y) == 0.0 {
                                z & 0xffff_ffff
                            } else {
                                bf(f(x).mul_add(f(y), f(z)))
                            }
                        }))
                    }
                    V_CUBEID_F32 | V_CUBESC_F32 | V_CUBETC_F32 | V_CUBEMA_F32 => {
                        vector(map3(exec, &a, &b, &c, |x, y, z| {
                            bf(cube(op, f(x), f(y), f(z)))
                        }))
                    }
                    V_QSAD_PK_U16_U8 | V_MQSAD_PK_U16_U8 => {
                        let masked = op == V_MQSAD_PK_U16_U8;
                        vector(map3(exec, &a, &b, &c, |x, y, z| {
                            quad_sad_u16(x, lo(y), z, masked)
                        }))
                    }
                    // A 4-bit signed integer in sixteenths: 0x7 is 0.4375, 0x8 is -0.5.
                    V_CVT_OFF_F32_I4_E64 => vector(map1(exec, &a, |x| {
                        let nibble = ((x as u8) << 4) as i8 >> 4;
                        bf(f32::from(nibble) / 16.0)
                    })),
                    V_TRIG_PREOP_F64 => {
                        vector(map2(exec, &a, &b, |x, y| bd(trig_preop(d(x), lo(y)))))
                    }
                    V_MULLIT_F32 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let (y, z) = (f(y), f(z));
                        if y == -f32::MAX
                            || y == f32::NEG_INFINITY
                            || y.is_nan()
                            || z <= 0.0
                            || z.is_nan()
                        {
                            bf(-f32::MAX)
                        } else {
                            bf(f(x) * y)
                        }
                    })),
                    // Byte and 16-bit sums of absolute differences, byte lerp.
                    V_SAD_U8 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(sad_u8(lo(x), lo(y), false).wrapping_add(lo(z)))
                    })),
                    V_MSAD_U8 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from(sad_u8(lo(x), lo(y), true).wrapping_add(lo(z)))
                    })),
                    V_SAD_HI_U8 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        u64::from((sad_u8(lo(x), lo(y), false) << 16).wrapping_add(lo(z)))
                    })),
                    V_SAD_U16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let (x, y) = (lo(x), lo(y));
                        let low = (x as u16).abs_diff(y as u16);
                        let high = ((x >> 16) as u16).abs_diff((y >> 16) as u16);
                        u64::from(
                            lo(z)
                                .wrapping_add(u32::from(low))
                                .wrapping_add(u32::from(high)),
                        )
                    })),
                    V_LERP_U8 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let mut result = 0u64;
                        for byte in 0..4 {
                            let shift = byte * 8;
                            let sum =
                                ((x >> shift) & 0xff) + ((y >> shift) & 0xff) + ((z >> shift) & 1);
                            result |= (sum >> 1) << shift;
                        }
                        result
                    })),
                    V_DOT2_F16_F16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        // tmp = S2; tmp += lo products; tmp += hi products (f16 steps).
                        let mut acc = z as u16;
                        for half in 0..2 {
                            let (p, q) = ((x >> (16 * half)) as u16, (y >> (16 * half)) as u16);
                            acc = fma_f16(p, q, acc);
                        }
                        u64::from(acc)
                    })),
                    // "DOT2_BF16_BF16 disables all denorms" (RDNA3 ISA §7.2.4), whatever
                    // MODE says.
                    V_DOT2_BF16_BF16 => vector(map3(exec, &a, &b, &c, |x, y, z| {
                        let bf16 =
                            |v: u64| f32::from_bits(u32::from(denorm::flush_bf16(v as u16)) << 16);
                        let mut acc = bf16(z);
                        for half in 0..2 {
                            acc = bf16(x >> (16 * half)).mul_add(bf16(y >> (16 * half)), acc);
                        }
                        u64::from(denorm::flush_bf16(f32_to_bf16(acc)))
                    })),
                    V_PERMLANE16_B32 | V_PERMLANEX16_B32 => {
                        let select = u64::from(self.read_scalar(v.src[1])?)
                            | u64::from(self.read_scalar(v.src[2])?) << 32;
                        let cross = op == V_PERMLANEX16_B32;
                        // op_sel[0] is FI and op_sel[1] is BOUND_CTRL, as in DPP: a lane whose
                        // source lane is inactive reads it anyway with FI, reads 0 with
                        // BOUND_CTRL, and is left unwritten (keeps `old`) otherwise.
                        let fetch_inactive = v.opsel & 1 != 0;
                        let bound_ctrl = v.opsel & 2 != 0;
                        let wave_exec = self.exec();
                        let mut written = exec;
                        let mut out = [0u64; WAVE_SIZE];
                        for (lane, value) in out.iter_mut().enumerate() {
                            let row = lane / 16;
                            let source_row = if cross { row ^ 1 } else { row };
                            let index = ((select >> ((lane % 16) * 4)) & 0xf) as usize;
                            let source = source_row * 16 + index;
                            if fetch_inactive || wave_exec >> source & 1 != 0 {
                                *value = a[source];
                            } else if !bound_ctrl {
                                written &= !(1 << lane);
                            }
                        }
                        Ok((
                            Output::Vector {
                                values: out,
                                carry: None,
                            },
                            written,
                        ))
                    }
                    _ => Err(unimplemented(op.mnemonic())),
                }
            }
        }
    }

    /// Writes a computed VALU result.
    fn valu_commit(
        &mut self,
        v: &ValuInst,
        output: Output,
        lane_mask: u32,
    ) -> Result<(), FaultKind> {
        match output {
            Output::Vector { mut values, carry } => {
                if v.dst_float && (v.clamp || v.omod != 0) {
                    apply_output_modifiers(&mut values, v);
                }
                let denormals = self.denormals_of(v);
                if !denormals.keeps_all() {
                    if let Some(precision) = result_precision(v) {
                        for value in values.iter_mut() {
                            *value = denormals.output(precision, *value);
                        }
                    }
                }
                self.write_vector(v.dst, v.dst_bits, v.opsel, &values, lane_mask)?;
                if let Some(carry) = carry {
                    self.write_scalar(v.sdst, carry & lane_mask)?;
                }
            }
            Output::Mask(mask) => {
                if v.compare.is_some_and(|c| c.writes_exec) || v.dst == Operand::ExecLo {
                    self.sgpr[usize::from(EXEC_LO)] = mask;
                } else {
                    self.write_scalar(v.dst, mask)?;
                }
            }
            Output::Scalar(value) => self.write_scalar(v.dst, value)?,
            Output::Lane { lane, value } => {
                let range = self.vgpr_range(v.dst, 1)?;
                self.vgpr[range.start][lane] = value;
            }
        }
        Ok(())
    }

    fn write_vector(
        &mut self,
        dst: Operand,
        bits: u8,
        opsel: u8,
        values: &Lanes,
        mask: u32,
    ) -> Result<(), FaultKind> {
        let dwords = if bits > 32 { 2 } else { 1 };
        let range = self.vgpr_range(dst, dwords)?;
        let first = range.start;
        for (lane, &value) in values.iter().enumerate() {
            if mask >> lane & 1 == 0 {
                continue;
            }
            match bits {
                16 => {
                    let old = self.vgpr[first][lane];
                    self.vgpr[first][lane] = if opsel & 8 != 0 {
                        (old & 0xffff) | ((value as u32) << 16)
                    } else {
                        (old & 0xffff_0000) | (value as u32 & 0xffff)
                    };
                }
                64 => {
                    self.vgpr[first][lane] = value as u32;
                    self.vgpr[first + 1][lane] = (value >> 32) as u32;
                }
                _ => self.vgpr[first][lane] = value as u32,
            }
        }
        Ok(())
    }

    // Lanes index several per-lane arrays at once.
    #[allow(clippy::needless_range_loop)]
    pub(super) fn vop3p(&mut self, i: &Vop3p) -> Result<Flow, FaultKind> {
        if i.dpp.is_some() {
            return Err(unimplemented(i.op.mnemonic()));
        }
        use Vop3pOp::*;
        if matches!(
            i.op,
            V_WMMA_F32_16X16X16_F16
                | V_WMMA_F32_16X16X16_BF16
                | V_WMMA_F16_16X16X16_F16
                | V_WMMA_BF16_16X16X16_BF16
                | V_WMMA_I32_16X16X16_IU8
                | V_WMMA_I32_16X16X16_IU4
        ) {
            return self.wmma(i);
        }
        let exec = self.exec();
        let mixed = matches!(i.op, V_FMA_MIX_F32 | V_FMA_MIXLO_F16 | V_FMA_MIXHI_F16);
        // Fetch raw 32-bit sources. Inline float constants are f16 for packed operands and
        // f32 for the 32-bit operands of mixed and dot operations.
        let mut raw = [[0u32; WAVE_SIZE]; 3];
        for (n, lanes) in raw.iter_mut().enumerate() {
            let f32_operand = (mixed && (i.opsel_hi >> n) & 1 == 0)
                || (n == 2 && matches!(i.op, V_DOT2_F32_F16 | V_DOT2_F32_BF16));
            match i.src[n] {
                Operand::Vgpr(_) => {
                    let range = self.vgpr_range(i.src[n], 1)?;
                    *lanes = self.vgpr[range.start];
                }
                Operand::InlineFloat(value) if !f32_operand => {
                    *lanes = [u32::from(value.f16_bits()); WAVE_SIZE]
                }
                other => *lanes = [self.read_scalar(other)?; WAVE_SIZE],
            }
        }
        let range = self.vgpr_range(i.vdst, 1)?;
        let dst = range.start;
        // Packed f16 arithmetic and the mixed-precision FMAs follow MODE per operand
        // precision; the dot products (rules not documented) keep their operands.
        let denormals = Denormals::of(self.mode, DenormRule::Mode);
        if mixed {
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                // neg negates, neg_hi takes the absolute value; opsel_hi picks f16 sources.
                let input = |n: usize| -> f32 {
                    let word = raw[n][lane];
                    let half = |bits: u32| {
                        f16_to_f32(denormals.input(Precision::Half, u64::from(bits)) as u16)
                    };
                    let mut x = if (i.opsel_hi >> n) & 1 == 0 {
                        f32::from_bits(denormals.input(Precision::Single, word.into()) as u32)
                    } else if (i.opsel >> n) & 1 != 0 {
                        half(word >> 16)
                    } else {
                        half(word & 0xffff)
                    };
                    if (i.neg_hi >> n) & 1 != 0 {
                        x = x.abs();
                    }
                    if (i.neg >> n) & 1 != 0 {
                        x = -x;
                    }
                    x
                };
                let mut result = input(0).mul_add(input(1), input(2));
                if i.clamp {
                    result = clamp_unit(result);
                }
                let old = self.vgpr[dst][lane];
                let half = || denormals.output(Precision::Half, f32_to_f16(result).into()) as u32;
                self.vgpr[dst][lane] = match i.op {
                    V_FMA_MIX_F32 => {
                        denormals.output(Precision::Single, result.to_bits().into()) as u32
                    }
                    V_FMA_MIXLO_F16 => (old & 0xffff_0000) | half(),
                    _ => (old & 0xffff) | (half() << 16),
                };
            }
            return Ok(Flow::Next);
        }
        let half = |n: usize, lane: usize, high: bool| -> u16 {
            let select = if high {
                (i.opsel_hi >> n) & 1
            } else {
                (i.opsel >> n) & 1
            };
            let value = if select != 0 {
                (raw[n][lane] >> 16) as u16
            } else {
                raw[n][lane] as u16
            };
            let negate = if high {
                (i.neg_hi >> n) & 1
            } else {
                (i.neg >> n) & 1
            };
            if negate != 0 {
                value ^ 0x8000
            } else {
                value
            }
        };
        // Dot products: one 32-bit result per lane.
        let dot: Option<DotF32> = match i.op {
            V_DOT2_F32_F16 => Some(|h, c, _, clamp| {
                // tmp = S2; tmp += lo product; tmp += hi product (f16 products are exact).
                let mut acc = f32::from_bits(c);
                acc += f16_to_f32(h[0]) * f16_to_f32(h[2]);
                acc += f16_to_f32(h[1]) * f16_to_f32(h[3]);
                if clamp {
                    acc = clamp_unit(acc);
                }
                acc.to_bits()
            }),
            V_DOT2_F32_BF16 => Some(|h, c, _, clamp| {
                let bf16 = |x: u16| f32::from_bits(u32::from(x) << 16);
                let mut acc = f32::from_bits(c);
                acc = bf16(h[0]).mul_add(bf16(h[2]), acc);
                acc = bf16(h[1]).mul_add(bf16(h[3]), acc);
                if clamp {
                    acc = clamp_unit(acc);
                }
                acc.to_bits()
            }),
            _ => None,
        };
        if let Some(dot) = dot {
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                let halves = [
                    half(0, lane, false),
                    half(0, lane, true),
                    half(1, lane, false),
                    half(1, lane, true),
                ];
                let mut c = raw[2][lane];
                if (i.neg >> 2) & 1 != 0 {
                    c ^= 0x8000_0000;
                }
                self.vgpr[dst][lane] = dot(&halves, c, i.neg, i.clamp);
            }
            return Ok(Flow::Next);
        }
        // Integer dot products: NEG bits select signed inputs (iu forms).
        let int_dot = match i.op {
            V_DOT4_I32_IU8 => Some((8u32, true)),
            V_DOT4_U32_U8 => Some((8, false)),
            V_DOT8_I32_IU4 => Some((4, true)),
            V_DOT8_U32_U4 => Some((4, false)),
            _ => None,
        };
        if let Some((width, signed_result)) = int_dot {
            let signed_a = signed_result && i.neg & 1 != 0;
            let signed_b = signed_result && i.neg & 2 != 0;
            let element = |word: u32, k: u32, signed: bool| -> i128 {
                let field = (word >> (k * width)) & ((1 << width) - 1);
                if signed {
                    i128::from(((field << (32 - width)) as i32) >> (32 - width))
                } else {
                    i128::from(field)
                }
            };
            for lane in 0..WAVE_SIZE {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                let (x, y, z) = (raw[0][lane], raw[1][lane], raw[2][lane]);
                let mut acc = if signed_result {
                    i128::from(z as i32)
                } else {
                    i128::from(z)
                };
                for k in 0..32 / width {
                    acc += element(x, k, signed_a) * element(y, k, signed_b);
                }
                self.vgpr[dst][lane] = int_result(acc, 32, signed_result, i.clamp) as u32;
            }
            return Ok(Flow::Next);
        }
        // Packed 16-bit operations: each half computed independently.
        enum Packed {
            Float(fn(u16, u16, u16) -> u16),
            Int(fn(u16, u16, u16) -> i128, bool),
            Bits(fn(u16, u16, u16) -> u16),
        }
        let operation = match i.op {
            V_PK_ADD_F16 => Packed::Float(|x, y, _| {
                hd(f64::from(f16_to_f32(x)) + f64::from(f16_to_f32(y))) as u16
            }),
            V_PK_MUL_F16 => Packed::Float(|x, y, _| {
                hd(f64::from(f16_to_f32(x)) * f64::from(f16_to_f32(y))) as u16
            }),
            V_PK_FMA_F16 => Packed::Float(fma_f16),
            V_PK_MAX_F16 => {
                Packed::Float(|x, y, _| hq(max_f32(f16_to_f32(x), f16_to_f32(y))) as u16)
            }
            V_PK_MIN_F16 => {
                Packed::Float(|x, y, _| hq(min_f32(f16_to_f32(x), f16_to_f32(y))) as u16)
            }
            V_PK_ADD_U16 => Packed::Int(|x, y, _| i128::from(x) + i128::from(y), false),
            V_PK_SUB_U16 => Packed::Int(|x, y, _| i128::from(x) - i128::from(y), false),
            V_PK_ADD_I16 => {
                Packed::Int(|x, y, _| i128::from(x as i16) + i128::from(y as i16), true)
            }
            V_PK_SUB_I16 => {
                Packed::Int(|x, y, _| i128::from(x as i16) - i128::from(y as i16), true)
            }
            V_PK_MAD_U16 => Packed::Int(
                |x, y, z| i128::from(x) * i128::from(y) + i128::from(z),
                false,
            ),
            V_PK_MAD_I16 => Packed::Int(
                |x, y, z| i128::from(x as i16) * i128::from(y as i16) + i128::from(z as i16),
                true,
            ),
            V_PK_MUL_LO_U16 => Packed::Bits(|x, y, _| x.wrapping_mul(y)),
            V_PK_LSHLREV_B16 => Packed::Bits(|x, y, _| y.wrapping_shl(u32::from(x & 15))),
            V_PK_LSHRREV_B16 => Packed::Bits(|x, y, _| y >> (x & 15)),
            V_PK_ASHRREV_I16 => Packed::Bits(|x, y, _| ((y as i16) >> (x & 15)) as u16),
            V_PK_MAX_U16 => Packed::Bits(|x, y, _| x.max(y)),
            V_PK_MIN_U16 => Packed::Bits(|x, y, _| x.min(y)),
            V_PK_MAX_I16 => Packed::Bits(|x, y, _| (x as i16).max(y as i16) as u16),
            V_PK_MIN_I16 => Packed::Bits(|x, y, _| (x as i16).min(y as i16) as u16),
            _ => return Err(unimplemented(i.op.mnemonic())),
        };
        let clamp = i.clamp;
        let per_half = |x: u16, y: u16, z: u16| -> u16 {
            match &operation {
                Packed::Float(op) => {
                    let input = |h: u16| denormals.input(Precision::Half, h.into()) as u16;
                    let r = op(input(x), input(y), input(z));
                    let r = if clamp {
                        hq(clamp_unit(f16_to_f32(r))) as u16
                    } else {
                        r
                    };
                    denormals.output(Precision::Half, r.into()) as u16
                }
                Packed::Int(op, signed) => int_result(op(x, y, z), 16, *signed, clamp) as u16,
                Packed::Bits(op) => op(x, y, z),
            }
        };
        for lane in 0..WAVE_SIZE {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let low = per_half(
                half(0, lane, false),
                half(1, lane, false),
                half(2, lane, false),
            );
            let high = per_half(
                half(0, lane, true),
                half(1, lane, true),
                half(2, lane, true),
            );
            self.vgpr[dst][lane] = u32::from(low) | (u32::from(high) << 16);
        }
        Ok(Flow::Next)
    }

    /// V_WMMA_*_16X16X16_*: D = A × B + C over the whole wave. Lane `l` (mod 16) holds row
    /// `l` of A and column `l` of B (16 elements over 8 VGPRs, or 4/2 for 8/4-bit integers;
    /// lanes 16-31 repeat lanes 0-15). C and D element (r, c) is in lane `c + 16 (r % 2)`,
    /// VGPR `r / 2` (32-bit results; 16-bit results use the low halves, or the high halves
    /// with opsel[2]).
    fn wmma(&mut self, i: &Vop3p) -> Result<Flow, FaultKind> {
        use Vop3pOp::*;
        let exec = self.exec();
        if exec != u32::MAX {
            return Err(super::illegal("WMMA requires all lanes of EXEC"));
        }
        let (ab_dwords, element_bits) = match i.op {
            V_WMMA_I32_16X16X16_IU8 => (4, 8),
            V_WMMA_I32_16X16X16_IU4 => (2, 4),
            _ => (8, 16),
        };
        let a = self.vgpr_range(i.src[0], ab_dwords)?.start;
        let b = self.vgpr_range(i.src[1], ab_dwords)?.start;
        let element = |base: usize, lane: usize, k: usize| -> u32 {
            let bit = k * element_bits;
            let word = self.vgpr[base + bit / 32][lane];
            (word >> (bit % 32)) & ((1u32 << element_bits) - 1)
        };
        let c_word = |r: usize, col: usize| -> Result<u32, FaultKind> {
            match i.src[2] {
                Operand::Vgpr(_) => {
                    let c = self.vgpr_range(i.src[2], 8)?.start;
                    Ok(self.vgpr[c + r / 2][col + 16 * (r % 2)])
                }
                Operand::InlineFloat(value) => Ok(match i.op {
                    V_WMMA_F16_16X16X16_F16 => u32::from(value.f16_bits()),
                    V_WMMA_BF16_16X16X16_BF16 => value.f32_bits() >> 16,
                    _ => value.f32_bits(),
                }),
                other => self.read_scalar(other),
            }
        };
        let high_half = i.opsel & 4 != 0;
        let mut result = [[0u32; WAVE_SIZE]; 8];
        for r in 0..16 {
            for col in 0..16 {
                let c = c_word(r, col)?;
                let c16 = if high_half {
                    (c >> 16) as u16
                } else {
                    c as u16
                };
                let value = match i.op {
                    V_WMMA_I32_16X16X16_IU8 | V_WMMA_I32_16X16X16_IU4 => {
                        let bits = element_bits as u32;
                        let signed_a = i.neg & 1 != 0;
                        let signed_b = i.neg & 2 != 0;
                        let extend = |x: u32, signed: bool| -> i128 {
                            if signed {
                                i128::from(((x << (32 - bits)) as i32) >> (32 - bits))
                            } else {
                                i128::from(x)
                            }
                        };
                        let mut acc = i128::from(c as i32);
                        for k in 0..16 {
                            acc += extend(element(a, r, k), signed_a)
                                * extend(element(b, col, k), signed_b);
                        }
                        int_result(acc, 32, true, i.clamp) as u32
                    }
                    _ => {
                        let to_f64 = |x: u32| -> f64 {
                            match i.op {
                                V_WMMA_F32_16X16X16_BF16 | V_WMMA_BF16_16X16X16_BF16 => {
                                    f64::from(f32::from_bits(x << 16))
                                }
                                _ => f64::from(f16_to_f32(x as u16)),
                            }
                        };
                        // Products of 16-bit floats are exact in f64; sum them exactly as
                        // far as f64 allows, then round once to the result format.
                        let mut acc = match i.op {
                            V_WMMA_F16_16X16X16_F16 => f64::from(f16_to_f32(c16)),
                            V_WMMA_BF16_16X16X16_BF16 => {
                                f64::from(f32::from_bits(u32::from(c16) << 16))
                            }
                            _ => f64::from(f32::from_bits(c)),
                        };
                        for k in 0..16 {
                            acc += to_f64(element(a, r, k)) * to_f64(element(b, col, k));
                        }
                        match i.op {
                            V_WMMA_F16_16X16X16_F16 => {
                                let h = u32::from(f64_to_f16(acc));
                                if high_half {
                                    (c & 0xffff) | (h << 16)
                                } else {
                                    (c & 0xffff_0000) | h
                                }
                            }
                            V_WMMA_BF16_16X16X16_BF16 => {
                                let h = u32::from(f32_to_bf16(acc as f32));
                                if high_half {
                                    (c & 0xffff) | (h << 16)
                                } else {
                                    (c & 0xffff_0000) | h
                                }
                            }
                            _ => (acc as f32).to_bits(),
                        }
                    }
                };
                result[r / 2][col + 16 * (r % 2)] = value;
            }
        }
        let d = self.vgpr_range(i.vdst, 8)?.start;
        for (k, lanes) in result.iter().enumerate() {
            self.vgpr[d + k] = *lanes;
        }
        Ok(Flow::Next)
    }
}

/// A float dot product: (halves a.lo, a.hi, b.lo, b.hi; accumulator; neg bits; clamp).
type DotF32 = fn(&[u16; 4], u32, u8, bool) -> u32;

/// Clamp of a float result to [0, 1] (NaN gives 0).
fn clamp_unit(x: f32) -> f32 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// The float format of a VALU result, for flushing its denormals.
fn result_precision(v: &ValuInst) -> Option<Precision> {
    if v.dst_float {
        return Precision::of_bits(v.dst_bits);
    }
    // Two f16 results packed into a B32-typed destination.
    (v.op == ValuOpcode::Vop3(Vop3Op::V_CVT_PK_RTZ_F16_F32_E64)).then_some(Precision::PackedHalf)
}

/// Clamp to [0, 1] and output scaling (×2, ×4, ÷2) of float results.
fn apply_output_modifiers(values: &mut Lanes, v: &ValuInst) {
    let scale = match v.omod {
        1 => 2.0,
        2 => 4.0,
        3 => 0.5,
        _ => 1.0,
    };
    for value in values.iter_mut() {
        match v.dst_bits {
            64 => {
                let mut x = d(*value) * scale;
                if v.clamp {
                    x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                }
                *value = bd(x);
            }
            16 => {
                let mut x = h(*value) * scale as f32;
                if v.clamp {
                    x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                }
                *value = bh(x);
            }
            _ => {
                let mut x = f(*value) * scale as f32;
                if v.clamp {
                    x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                }
                *value = bf(x);
            }
        }
    }
}

/// Evaluates a compare over the lanes in `exec`; inactive lanes produce 0.
// The negated float comparisons are the ISA's NaN-aware "not less than" etc.
#[allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::nonminimal_bool,
    clippy::double_comparisons
)]
fn compare_lanes(
    exec: u32,
    condition: CompareCondition,
    ty: CompareType,
    a: &Lanes,
    b: &Lanes,
) -> u32 {
    use CompareCondition as C;
    match condition {
        C::False => return 0,
        C::True => return exec,
        C::Class => {
            return mask_of(exec, |lane| {
                let (value, quiet, denormal) = match ty {
                    CompareType::F64 => {
                        let x = d(a[lane]);
                        (
                            x,
                            a[lane] >> 51 & 1 != 0,
                            x != 0.0 && x.abs() < f64::MIN_POSITIVE,
                        )
                    }
                    CompareType::F16 => {
                        let bits = a[lane] as u16;
                        let x = f64::from(f16_to_f32(bits));
                        (
                            x,
                            bits >> 9 & 1 != 0,
                            bits & 0x7c00 == 0 && bits & 0x3ff != 0,
                        )
                    }
                    _ => {
                        let x = f(a[lane]);
                        (
                            f64::from(x),
                            a[lane] >> 22 & 1 != 0,
                            x != 0.0 && x.abs() < f32::MIN_POSITIVE,
                        )
                    }
                };
                class_bit_f64(value, quiet, denormal) & lo(b[lane]) != 0
            })
        }
        _ => {}
    }
    let float = |x: f64, y: f64| match condition {
        C::Lt => x < y,
        C::Eq => x == y,
        C::Le => x <= y,
        C::Gt => x > y,
        C::Lg => x < y || x > y,
        C::Ge => x >= y,
        C::O => !x.is_nan() && !y.is_nan(),
        C::U => x.is_nan() || y.is_nan(),
        C::Nge => !(x >= y),
        C::Nlg => !(x < y || x > y),
        C::Ngt => !(x > y),
        C::Nle => !(x <= y),
        C::Neq => x != y,
        C::Nlt => !(x < y),
        _ => false,
    };
    let integer = |ordering: std::cmp::Ordering| match condition {
        C::Lt => ordering.is_lt(),
        C::Eq => ordering.is_eq(),
        C::Le => ordering.is_le(),
        C::Gt => ordering.is_gt(),
        C::Lg => ordering.is_ne(),
        C::Ge => ordering.is_ge(),
        _ => false,
    };
    match ty {
        CompareType::F32 => mask_of(exec, |l| float(f64::from(f(a[l])), f64::from(f(b[l])))),
        CompareType::F64 => mask_of(exec, |l| float(d(a[l]), d(b[l]))),
        CompareType::F16 => mask_of(exec, |l| float(f64::from(h(a[l])), f64::from(h(b[l])))),
        CompareType::I16 => mask_of(exec, |l| {
            integer((a[l] as u16 as i16).cmp(&(b[l] as u16 as i16)))
        }),
        CompareType::U16 => mask_of(exec, |l| integer((a[l] as u16).cmp(&(b[l] as u16)))),
        CompareType::I32 => mask_of(exec, |l| {
            integer((a[l] as u32 as i32).cmp(&(b[l] as u32 as i32)))
        }),
        CompareType::U32 => mask_of(exec, |l| integer((a[l] as u32).cmp(&(b[l] as u32)))),
        CompareType::I64 => mask_of(exec, |l| integer((a[l] as i64).cmp(&(b[l] as i64)))),
        CompareType::U64 => mask_of(exec, |l| integer(a[l].cmp(&b[l]))),
    }
}
