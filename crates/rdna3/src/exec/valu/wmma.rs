//! WMMA (wave matrix multiply-accumulate): V_WMMA_*_16X16X16_*, one 16×16×16 matrix
//! product over the whole wave. It is the one VALU operation whose lanes exchange data as
//! matrix rows and columns, with a register layout of its own, so it stands alone.

use super::convert::f32_to_bf16;
use super::int::int_result;
use crate::decode::Vop3p;
use crate::exec::float::{f16_to_f32, f64_to_f16};
use crate::exec::{illegal, Flow, Wave, WAVE_SIZE};
use crate::fault::FaultKind;
use crate::isa::Vop3pOp;
use crate::operand::Operand;

impl Wave {
    /// V_WMMA_*_16X16X16_*: D = A × B + C over the whole wave. Lane `l` (mod 16) holds row
    /// `l` of A and column `l` of B (16 elements over 8 VGPRs, or 4/2 for 8/4-bit integers;
    /// lanes 16-31 repeat lanes 0-15). C and D element (r, c) is in lane `c + 16 (r % 2)`,
    /// VGPR `r / 2` (32-bit results; 16-bit results use the low halves, or the high halves
    /// with opsel[2]).
    pub(super) fn wmma(&mut self, i: &Vop3p) -> Result<Flow, FaultKind> {
        use Vop3pOp::*;
        let exec = self.exec();
        if exec != u32::MAX {
            return Err(illegal("WMMA requires all lanes of EXEC"));
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
