//! Operations on packed 16-bit (and 8- or 4-bit) elements: VOP3P (packed f16 and integer
//! math, the mixed-precision FMAs, the f16, bf16 and integer dot products), the VOP2 forms
//! without a VOP3 encoding (v_pk_fmac_f16, v_dot2acc_f32_f16), the VOPD dual dot products,
//! and the VOP3 v_dot2 forms. VOP3P reads its operands as raw 32-bit words and picks halves
//! by opsel/opsel_hi and neg/neg_hi, a source model of its own. WMMA, also VOP3P, is in
//! `wmma.rs`.

use super::convert::f32_to_bf16;
use super::int::int_result;
use super::{hd, hq, map3, vector, Group, Lanes, Sources};
use crate::decode::{Vop2, Vop3p, Vopd};
use crate::exec::denorm::{self, DenormRule, Denormals, Precision};
use crate::exec::float::*;
use crate::exec::{unimplemented, Flow, Wave, WAVE_SIZE};
use crate::fault::FaultKind;
use crate::isa::{Vop2Op, Vop3Op, Vop3pOp, VopdOp};
use crate::operand::Operand;

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

impl Wave {
    /// VOP2 operations without a VOP3 form (`v_dot2acc_f32_f16`, `v_pk_fmac_f16`).
    pub(in crate::exec) fn vop2_special(&mut self, i: &Vop2) -> Result<Flow, FaultKind> {
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

    /// VOPD with a `v_dual_dot2acc_f32_{f16,bf16}` half: both halves read their sources
    /// before either writes.
    pub(super) fn vopd_with_dot(&mut self, i: &Vopd) -> Result<Flow, FaultKind> {
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

    /// Entry point of VOP3P (WMMA goes on to `wmma.rs`).
    // Lanes index several per-lane arrays at once.
    #[allow(clippy::needless_range_loop)]
    pub(in crate::exec) fn vop3p(&mut self, i: &Vop3p) -> Result<Flow, FaultKind> {
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

    /// The VOP3 dot products of f16 and bf16 pairs; `None` for other opcodes.
    pub(super) fn dot_op(&self, op: Vop3Op, s: &Sources) -> Group<Lanes> {
        use Vop3Op::*;
        let (a, b, c, exec) = (&s.a, &s.b, &s.c, s.exec);
        match op {
            V_DOT2_F16_F16 => vector(map3(exec, a, b, c, |x, y, z| {
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
            V_DOT2_BF16_BF16 => vector(map3(exec, a, b, c, |x, y, z| {
                let bf16 = |v: u64| f32::from_bits(u32::from(denorm::flush_bf16(v as u16)) << 16);
                let mut acc = bf16(z);
                for half in 0..2 {
                    acc = bf16(x >> (16 * half)).mul_add(bf16(y >> (16 * half)), acc);
                }
                u64::from(denorm::flush_bf16(f32_to_bf16(acc)))
            })),
            _ => Ok(None),
        }
    }
}
