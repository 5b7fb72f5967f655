//! Float arithmetic of the f16, f32 and f64 VALU operations: add, multiply, fma and the MAC
//! forms, min/max/med3, rounding, frexp/ldexp, the transcendentals, the DX9 multiply-by-zero
//! forms, the cube-map operations and V_TRIG_PREOP's table of 2/π. Format-level helpers that
//! other units share (f16 conversion, fma rounding, IEEE min/max) are in `exec/float.rs`;
//! this file is the per-instruction semantics of the VALU.

use super::{bd, bf, bh, d, f, h, hd, hq, lo, map1, map2, map3, vector, Group, Lanes, Sources};
use crate::decode::ValuInst;
use crate::exec::denorm::Precision;
use crate::exec::float::*;
use crate::exec::{Wave, WAVE_SIZE};
use crate::fault::FaultKind;
use crate::isa::Vop3Op;

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

/// What the f32 transcendental unit computes (on an input already flushed: the unit flushes
/// its inputs and results whatever MODE says, `exec/denorm.rs`); `None` for other opcodes.
pub(crate) fn f32_unit(op: Vop3Op) -> Option<fn(f32) -> f32> {
    use Vop3Op::*;
    Some(match op {
        V_RCP_F32_E64 | V_RCP_IFLAG_F32_E64 => |x| 1.0 / x,
        V_RSQ_F32_E64 => |x| 1.0 / x.sqrt(),
        V_SQRT_F32_E64 => f32::sqrt,
        V_EXP_F32_E64 => f32::exp2,
        V_LOG_F32_E64 => f32::log2,
        _ => return None,
    })
}

impl Wave {
    /// The float arithmetic of [`Wave::valu_compute`]; `None` for other opcodes.
    pub(super) fn float_op(&self, v: &ValuInst, op: Vop3Op, s: &Sources) -> Group<Lanes> {
        use Vop3Op::*;
        let (a, b, c, exec, denormals) = (&s.a, &s.b, &s.c, s.exec, s.denormals);
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
        if let Some(unit) = f32_unit(op) {
            return vector(map1(exec, a, |x| bf(unit(f(x)))));
        }
        match op {
            // 32-bit float arithmetic.
            V_ADD_F32_E64 => vector(map2(exec, a, b, |x, y| bf(f(x) + f(y)))),
            V_SUB_F32_E64 => vector(map2(exec, a, b, |x, y| bf(f(x) - f(y)))),
            V_SUBREV_F32_E64 => vector(map2(exec, a, b, |x, y| bf(f(y) - f(x)))),
            V_MUL_F32_E64 => vector(map2(exec, a, b, |x, y| bf(f(x) * f(y)))),
            V_MUL_DX9_ZERO_F32_E64 => vector(map2(exec, a, b, |x, y| {
                if f(x) == 0.0 || f(y) == 0.0 {
                    bf(0.0)
                } else {
                    bf(f(x) * f(y))
                }
            })),
            V_FMA_F32 => vector(map3(exec, a, b, c, |x, y, z| bf(f(x).mul_add(f(y), f(z))))),
            V_FMAC_F32_E64 => {
                let acc = old_dst(self)?;
                vector(map3(exec, a, b, &acc, |x, y, z| {
                    bf(f(x).mul_add(f(y), f(z)))
                }))
            }
            V_MIN_F32_E64 => vector(map2(exec, a, b, |x, y| bf(min_f32(f(x), f(y))))),
            V_MAX_F32_E64 => vector(map2(exec, a, b, |x, y| bf(max_f32(f(x), f(y))))),
            V_MIN3_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                bf(min_f32(min_f32(f(x), f(y)), f(z)))
            })),
            V_MAX3_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                bf(max_f32(max_f32(f(x), f(y)), f(z)))
            })),
            V_MED3_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                bf(med3_f32(f(x), f(y), f(z)))
            })),
            V_LDEXP_F32 => vector(map2(exec, a, b, |x, y| {
                bf(ldexp_f32(f(x), y as u32 as i32))
            })),
            V_SIN_F32_E64 => vector(map1(exec, a, |x| bf((f(x) * std::f32::consts::TAU).sin()))),
            V_COS_F32_E64 => vector(map1(exec, a, |x| bf((f(x) * std::f32::consts::TAU).cos()))),
            V_FLOOR_F32_E64 => vector(map1(exec, a, |x| bf(f(x).floor()))),
            V_CEIL_F32_E64 => vector(map1(exec, a, |x| bf(f(x).ceil()))),
            V_TRUNC_F32_E64 => vector(map1(exec, a, |x| bf(f(x).trunc()))),
            V_RNDNE_F32_E64 => vector(map1(exec, a, |x| bf(f(x).round_ties_even()))),
            V_FRACT_F32_E64 => vector(map1(exec, a, |x| bf(fract_f32(f(x))))),
            V_FREXP_MANT_F32_E64 => vector(map1(exec, a, |x| bf(frexp_mant_f32(f(x))))),
            V_FREXP_EXP_I32_F32_E64 => vector(map1(exec, a, |x| frexp_exp_f32(f(x)) as u32 as u64)),
            // 16-bit float arithmetic (low halves).
            V_ADD_F16_E64 => vector(map2(exec, a, b, |x, y| bh(h(x) + h(y)))),
            V_SUB_F16_E64 => vector(map2(exec, a, b, |x, y| bh(h(x) - h(y)))),
            V_SUBREV_F16_E64 => vector(map2(exec, a, b, |x, y| bh(h(y) - h(x)))),
            V_MUL_F16_E64 => vector(map2(exec, a, b, |x, y| bh(h(x) * h(y)))),
            V_FMAC_F16_E64 => {
                let acc = old_dst(self)?;
                vector(map3(exec, a, b, &acc, |x, y, z| {
                    u64::from(fma_f16(x as u16, y as u16, z as u16))
                }))
            }
            V_MAX_F16_E64 => vector(map2(exec, a, b, |x, y| bh(max_f32(h(x), h(y))))),
            V_MIN_F16_E64 => vector(map2(exec, a, b, |x, y| bh(min_f32(h(x), h(y))))),
            // 64-bit float arithmetic.
            V_ADD_F64 => vector(map2(exec, a, b, |x, y| bd(d(x) + d(y)))),
            V_MUL_F64 => vector(map2(exec, a, b, |x, y| bd(d(x) * d(y)))),
            V_FMA_F64 => vector(map3(exec, a, b, c, |x, y, z| bd(d(x).mul_add(d(y), d(z))))),
            V_MIN_F64 => vector(map2(exec, a, b, |x, y| bd(min_f64(d(x), d(y))))),
            V_MAX_F64 => vector(map2(exec, a, b, |x, y| bd(max_f64(d(x), d(y))))),
            V_LDEXP_F64 => vector(map2(exec, a, b, |x, y| {
                bd(ldexp_f64(d(x), y as u32 as i32))
            })),
            V_RCP_F64_E64 => vector(map1(exec, a, |x| bd(1.0 / d(x)))),
            V_RSQ_F64_E64 => vector(map1(exec, a, |x| bd(1.0 / d(x).sqrt()))),
            V_SQRT_F64_E64 => vector(map1(exec, a, |x| bd(d(x).sqrt()))),
            V_FLOOR_F64_E64 => vector(map1(exec, a, |x| bd(d(x).floor()))),
            V_CEIL_F64_E64 => vector(map1(exec, a, |x| bd(d(x).ceil()))),
            V_TRUNC_F64_E64 => vector(map1(exec, a, |x| bd(d(x).trunc()))),
            V_RNDNE_F64_E64 => vector(map1(exec, a, |x| bd(d(x).round_ties_even()))),
            V_FRACT_F64_E64 => vector(map1(exec, a, |x| bd(fract_f64(d(x))))),
            V_FREXP_MANT_F64_E64 => vector(map1(exec, a, |x| bd(frexp_mant_f64(d(x))))),
            V_FREXP_EXP_I32_F64_E64 => vector(map1(exec, a, |x| frexp_exp_f64(d(x)) as u32 as u64)),
            // Three-operand min/max combinations.
            V_MAXMIN_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                bf(min_f32(max_f32(f(x), f(y)), f(z)))
            })),
            V_MINMAX_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                bf(max_f32(min_f32(f(x), f(y)), f(z)))
            })),
            V_MAXMIN_F16 => vector(map3(exec, a, b, c, |x, y, z| {
                hq(min_f32(max_f32(h(x), h(y)), h(z)))
            })),
            V_MINMAX_F16 => vector(map3(exec, a, b, c, |x, y, z| {
                hq(max_f32(min_f32(h(x), h(y)), h(z)))
            })),
            V_MAX3_F16 => vector(map3(exec, a, b, c, |x, y, z| {
                hq(max_f32(max_f32(h(x), h(y)), h(z)))
            })),
            V_MIN3_F16 => vector(map3(exec, a, b, c, |x, y, z| {
                hq(min_f32(min_f32(h(x), h(y)), h(z)))
            })),
            V_MED3_F16 => vector(map3(exec, a, b, c, |x, y, z| {
                hq(med3_f32(h(x), h(y), h(z)))
            })),
            // 16-bit float arithmetic and transcendentals (one rounding from f64).
            V_FMA_F16 => vector(map3(exec, a, b, c, |x, y, z| {
                u64::from(fma_f16(x as u16, y as u16, z as u16))
            })),
            V_RCP_F16_E64 => vector(map1(exec, a, |x| hd(1.0 / f64::from(h(x))))),
            V_RSQ_F16_E64 => vector(map1(exec, a, |x| hd(1.0 / f64::from(h(x)).sqrt()))),
            V_SQRT_F16_E64 => vector(map1(exec, a, |x| hd(f64::from(h(x)).sqrt()))),
            V_LOG_F16_E64 => vector(map1(exec, a, |x| hd(f64::from(h(x)).log2()))),
            V_EXP_F16_E64 => vector(map1(exec, a, |x| hd(f64::from(h(x)).exp2()))),
            V_SIN_F16_E64 => vector(map1(exec, a, |x| {
                hd((f64::from(h(x)) * std::f64::consts::TAU).sin())
            })),
            V_COS_F16_E64 => vector(map1(exec, a, |x| {
                hd((f64::from(h(x)) * std::f64::consts::TAU).cos())
            })),
            V_FLOOR_F16_E64 => vector(map1(exec, a, |x| hq(h(x).floor()))),
            V_CEIL_F16_E64 => vector(map1(exec, a, |x| hq(h(x).ceil()))),
            V_TRUNC_F16_E64 => vector(map1(exec, a, |x| hq(h(x).trunc()))),
            V_RNDNE_F16_E64 => vector(map1(exec, a, |x| hq(h(x).round_ties_even()))),
            V_FRACT_F16_E64 => vector(map1(exec, a, |x| {
                let v = h(x);
                if v.is_finite() {
                    // Largest f16 below 1.0 is 0x3bff.
                    hq((v - v.floor()).min(f16_to_f32(0x3bff)))
                } else {
                    hq(fract_f32(v))
                }
            })),
            V_FREXP_MANT_F16_E64 => vector(map1(exec, a, |x| hq(frexp_mant_f32(h(x))))),
            V_FREXP_EXP_I16_F16_E64 => {
                vector(map1(exec, a, |x| u64::from(frexp_exp_f32(h(x)) as u16)))
            }
            V_LDEXP_F16_E64 => vector(map2(exec, a, b, |x, y| {
                let exponent = i32::from(y as u16 as i16).clamp(-100, 100);
                hd(f64::from(h(x)) * 2f64.powi(exponent))
            })),
            V_FMA_DX9_ZERO_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                if f(x) == 0.0 || f(y) == 0.0 {
                    z & 0xffff_ffff
                } else {
                    bf(f(x).mul_add(f(y), f(z)))
                }
            })),
            V_FMAC_DX9_ZERO_F32_E64 => {
                let acc = old_dst(self)?;
                vector(map3(exec, a, b, &acc, |x, y, z| {
                    if f(x) == 0.0 || f(y) == 0.0 {
                        z & 0xffff_ffff
                    } else {
                        bf(f(x).mul_add(f(y), f(z)))
                    }
                }))
            }
            V_CUBEID_F32 | V_CUBESC_F32 | V_CUBETC_F32 | V_CUBEMA_F32 => {
                vector(map3(exec, a, b, c, |x, y, z| {
                    bf(cube(op, f(x), f(y), f(z)))
                }))
            }
            V_TRIG_PREOP_F64 => vector(map2(exec, a, b, |x, y| bd(trig_preop(d(x), lo(y))))),
            V_MULLIT_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                let (y, z) = (f(y), f(z));
                if y == -f32::MAX || y == f32::NEG_INFINITY || y.is_nan() || z <= 0.0 || z.is_nan()
                {
                    bf(-f32::MAX)
                } else {
                    bf(f(x) * y)
                }
            })),
            _ => Ok(None),
        }
    }
}
