//! Conversions between the VALU number formats: float widths, floats and 32- or 16-bit
//! integers, normalized (snorm/unorm) and packed forms, bytes and 4-bit values. Each has its
//! own rounding and saturation rule, which is what this file is about; `f32_to_bf16` is
//! shared with the bf16 dot products and WMMA.

use super::int::{i16w, i32w, u16w};
use super::{bd, bf, bh, d, f, h, map1, map2, map3, vector, Group, Lanes, Sources};
use crate::exec::float::*;
use crate::exec::Wave;
use crate::isa::Vop3Op;

/// f32 to bf16 bits, rounding to nearest even (NaN stays quiet NaN).
pub(super) fn f32_to_bf16(x: f32) -> u16 {
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

impl Wave {
    /// The conversions of [`Wave::valu_compute`]; `None` for other opcodes.
    pub(super) fn convert_op(&self, op: Vop3Op, s: &Sources) -> Group<Lanes> {
        use Vop3Op::*;
        let (a, b, c, exec) = (&s.a, &s.b, &s.c, s.exec);
        match op {
            // Conversions.
            V_CVT_F32_I32_E64 => vector(map1(exec, a, |x| bf(x as u32 as i32 as f32))),
            V_CVT_F32_U32_E64 => vector(map1(exec, a, |x| bf(x as u32 as f32))),
            V_CVT_I32_F32_E64 => vector(map1(exec, a, |x| f(x) as i32 as u32 as u64)),
            V_CVT_U32_F32_E64 => vector(map1(exec, a, |x| u64::from(f(x) as u32))),
            V_CVT_F32_F64_E64 => vector(map1(exec, a, |x| bf(d(x) as f32))),
            V_CVT_F64_F32_E64 => vector(map1(exec, a, |x| bd(f64::from(f(x))))),
            V_CVT_I32_F64_E64 => vector(map1(exec, a, |x| d(x) as i32 as u32 as u64)),
            V_CVT_U32_F64_E64 => vector(map1(exec, a, |x| u64::from(d(x) as u32))),
            V_CVT_F64_I32_E64 => vector(map1(exec, a, |x| bd(f64::from(x as u32 as i32)))),
            V_CVT_F64_U32_E64 => vector(map1(exec, a, |x| bd(f64::from(x as u32)))),
            V_CVT_F16_F32_E64 => vector(map1(exec, a, |x| bh(f(x)))),
            V_CVT_F32_F16_E64 => vector(map1(exec, a, |x| bf(h(x)))),
            V_CVT_F32_UBYTE0_E64 => vector(map1(exec, a, |x| bf((x & 0xff) as f32))),
            V_CVT_F32_UBYTE1_E64 => vector(map1(exec, a, |x| bf(((x >> 8) & 0xff) as f32))),
            V_CVT_F32_UBYTE2_E64 => vector(map1(exec, a, |x| bf(((x >> 16) & 0xff) as f32))),
            V_CVT_F32_UBYTE3_E64 => vector(map1(exec, a, |x| bf(((x >> 24) & 0xff) as f32))),
            V_CVT_FLOOR_I32_F32_E64 => vector(map1(exec, a, |x| f(x).floor() as i32 as u32 as u64)),
            V_CVT_NEAREST_I32_F32_E64 => {
                vector(map1(exec, a, |x| (f(x) + 0.5).floor() as i32 as u32 as u64))
            }
            V_CVT_PK_RTZ_F16_F32_E64 => vector(map2(exec, a, b, |x, y| {
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
            V_CVT_PK_U16_U32 => vector(map2(exec, a, b, |x, y| {
                (x & 0xffff).min(0xffff) | ((y & 0xffff) << 16)
            })),
            // 16-bit conversions.
            V_CVT_I16_F16_E64 => vector(map1(exec, a, |x| u64::from(h(x) as i16 as u16))),
            V_CVT_U16_F16_E64 => vector(map1(exec, a, |x| u64::from(h(x) as u16))),
            V_CVT_F16_I16_E64 => vector(map1(exec, a, |x| u64::from(f64_to_f16(i16w(x) as f64)))),
            V_CVT_F16_U16_E64 => vector(map1(exec, a, |x| u64::from(f64_to_f16(u16w(x) as f64)))),
            V_CVT_I32_I16_E64 => vector(map1(exec, a, |x| i16w(x) as u64 & 0xffff_ffff)),
            V_CVT_U32_U16_E64 => vector(map1(exec, a, |x| x & 0xffff)),
            V_CVT_NORM_I16_F16_E64 => {
                vector(map1(
                    exec,
                    a,
                    |x| u64::from(snorm16(f64::from(h(x))) as u16),
                ))
            }
            V_CVT_NORM_U16_F16_E64 => {
                vector(map1(exec, a, |x| u64::from(unorm16(f64::from(h(x))))))
            }
            V_CVT_PK_NORM_I16_F32 => vector(map2(exec, a, b, |x, y| {
                u64::from(snorm16(f64::from(f(x))) as u16)
                    | u64::from(snorm16(f64::from(f(y))) as u16) << 16
            })),
            V_CVT_PK_NORM_U16_F32 => vector(map2(exec, a, b, |x, y| {
                u64::from(unorm16(f64::from(f(x)))) | u64::from(unorm16(f64::from(f(y)))) << 16
            })),
            V_CVT_PK_NORM_I16_F16 => vector(map2(exec, a, b, |x, y| {
                u64::from(snorm16(f64::from(h(x))) as u16)
                    | u64::from(snorm16(f64::from(h(y))) as u16) << 16
            })),
            V_CVT_PK_NORM_U16_F16 => vector(map2(exec, a, b, |x, y| {
                u64::from(unorm16(f64::from(h(x)))) | u64::from(unorm16(f64::from(h(y)))) << 16
            })),
            V_CVT_PK_I16_I32 => vector(map2(exec, a, b, |x, y| {
                let sat = |v: u64| i32w(v).clamp(-32768, 32767) as u64 & 0xffff;
                sat(x) | sat(y) << 16
            })),
            V_CVT_PK_U16_F32 => vector(map2(exec, a, b, |x, y| {
                u64::from(f(x) as u16) | u64::from(f(y) as u16) << 16
            })),
            V_CVT_PK_I16_F32 => vector(map2(exec, a, b, |x, y| {
                u64::from(f(x) as i16 as u16) | u64::from(f(y) as i16 as u16) << 16
            })),
            V_CVT_PK_U8_F32 => vector(map3(exec, a, b, c, |x, y, z| {
                let shift = (y & 3) * 8;
                let byte = u64::from(f(x).round_ties_even() as u8);
                (z & 0xffff_ffff & !(0xff << shift)) | byte << shift
            })),
            V_SAT_PK_U8_I16_E64 => vector(map1(exec, a, |x| {
                let sat = |v: u64| (v as u16 as i16).clamp(0, 255) as u64;
                sat(x) | sat(x >> 16) << 8
            })),
            V_PACK_B32_F16 => vector(map2(exec, a, b, |x, y| (x & 0xffff) | (y & 0xffff) << 16)),
            // A 4-bit signed integer in sixteenths: 0x7 is 0.4375, 0x8 is -0.5.
            V_CVT_OFF_F32_I4_E64 => vector(map1(exec, a, |x| {
                let nibble = ((x as u8) << 4) as i8 >> 4;
                bf(f32::from(nibble) / 16.0)
            })),
            _ => Ok(None),
        }
    }
}
