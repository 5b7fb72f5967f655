//! Reading VALU source operands: each source once per instruction as 32 lanes (from VGPRs,
//! SGPRs, inline constants or literals), with opsel half selection, the DPP lane
//! permutation, the abs/neg input modifiers and MODE's denormal flushing applied. Every
//! operation group reads its operands through here, so the operand forms are handled once.

use super::Lanes;
use crate::decode::{CompareCondition, Dpp, ValuInst};
use crate::exec::denorm::{self, DenormRule, Denormals, Precision};
use crate::exec::{Wave, WAVE_SIZE};
use crate::fault::FaultKind;
use crate::operand::Operand;

impl Wave {
    /// Reads source `n` of `v` for all lanes, with opsel, DPP and float modifiers applied.
    /// Also returns the lanes DPP leaves enabled.
    pub(super) fn fetch(&self, v: &ValuInst, n: usize) -> Result<(Lanes, u32), FaultKind> {
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

    pub(super) fn lane_mask_source(&self, v: &ValuInst, n: usize) -> Result<u32, FaultKind> {
        self.read_scalar(v.src[n])
    }

    /// What `v` does with denormals under the current MODE.
    pub(super) fn denormals_of(&self, v: &ValuInst) -> Denormals {
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
    pub(super) fn fetch_flushed(
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
}
