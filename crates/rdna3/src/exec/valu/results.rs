//! Writing VALU results back: the output modifiers (clamp, omod) and denormal flushing of
//! float results, then the vector destination under the lane mask (16-bit halves by opsel,
//! 64-bit register pairs), carry-outs, compare masks, and scalar or single-lane results.
//! Every operation group's output goes through here, so destinations are handled once.

use super::{bd, bf, bh, d, f, h, Lanes, Output};
use crate::decode::ValuInst;
use crate::exec::denorm::Precision;
use crate::exec::Wave;
use crate::fault::FaultKind;
use crate::isa::{ValuOpcode, Vop3Op};
use crate::operand::{Operand, EXEC_LO};

impl Wave {
    /// Writes a computed VALU result.
    pub(super) fn valu_commit(
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
