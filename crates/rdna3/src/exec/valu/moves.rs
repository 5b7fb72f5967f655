//! Moves, selects and cross-lane operations: v_mov, v_cndmask, v_readfirstlane, v_readlane,
//! v_writelane, v_permlane16/x16, the M0-indexed v_movrel* and v_swaprel, and the VOP1
//! swaps. They compute nothing; what they share, and the other groups never need, is where
//! a value comes from or goes to: another lane, an SGPR, or a register picked at run time.

use super::{lo, map1, Group, Lanes, Output, Sources};
use crate::decode::{ValuInst, Vop1};
use crate::exec::{illegal, unimplemented, Flow, Wave, WAVE_SIZE};
use crate::fault::FaultKind;
use crate::isa::{Vop1Op, Vop3Op};
use crate::operand::{Operand, M0};

impl Wave {
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
    pub(super) fn valu_outside_lane_model(
        &mut self,
        v: &ValuInst,
        op: Vop3Op,
    ) -> Result<Flow, FaultKind> {
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

    /// VOP1 operations without a VOP3 form (`v_swap_b32`, `v_swaprel_b32`, `v_swap_b16`,
    /// `v_permlane64_b32`).
    pub(in crate::exec) fn vop1_special(&mut self, i: &Vop1) -> Result<Flow, FaultKind> {
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

    /// The moves, selects and cross-lane reads of [`Wave::valu_compute`], whose output is
    /// not always a value per lane; `None` for other opcodes.
    pub(super) fn move_op(&self, v: &ValuInst, op: Vop3Op, s: &Sources) -> Group<(Output, u32)> {
        use Vop3Op::*;
        let (a, b, exec) = (&s.a, &s.b, s.exec);
        let lane_select =
            |w: &Wave| -> Result<usize, FaultKind> { Ok((w.read_scalar(v.src[1])? & 31) as usize) };
        let vector = |values: Lanes| {
            Ok((
                Output::Vector {
                    values,
                    carry: None,
                },
                exec,
            ))
        };
        let output = match op {
            V_NOP_E64 => Ok((
                Output::Vector {
                    values: [0; WAVE_SIZE],
                    carry: None,
                },
                0,
            )),
            V_MOV_B32_E64 => vector(map1(exec, a, |x| x)),
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
            V_CNDMASK_B32_E64 | V_CNDMASK_B16 => {
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
            V_MOV_B16_E64 => vector(map1(exec, a, |x| x & 0xffff)),
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
            _ => return Ok(None),
        };
        output.map(Some)
    }
}
