//! Scalar ALU and program control: SOP1, SOP2, SOPK, SOPC, SOPP.

use super::{illegal, unimplemented, Flow, Wave};
use crate::decode::{spec_dwords, Sop1, Sop2, Sopc, Sopk, Sopp};
use crate::fault::FaultKind;
use crate::isa::{operand_spec, Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp};
use crate::operand::{Operand, EXEC_LO, M0, SGPR_COUNT};

/// Sign-extends the low `bits` bits of `value` (bits in 1..=64; 0 yields 0).
fn sign_extend64(value: u64, bits: u32) -> i64 {
    if bits == 0 {
        return 0;
    }
    if bits >= 64 {
        return value as i64;
    }
    let shift = 64 - bits;
    ((value << shift) as i64) >> shift
}

/// Low `width` bits set (width may be ≥ 64).
fn low_mask64(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

impl Wave {
    /// The SGPR `base + offset` of the S_MOVREL* instructions (`base` is the register the
    /// instruction names, `offset` comes from M0), checked so that `dwords` registers fit
    /// in s0..s105: an index past them would reach VCC, M0 or EXEC.
    fn relative_sgpr(&self, base: Operand, offset: u32, dwords: usize) -> Result<usize, FaultKind> {
        let Operand::Sgpr(first) = base else {
            return Err(illegal(format!(
                "{base} is not an SGPR, so it cannot be indexed by M0"
            )));
        };
        // The named tuple itself must be one, whatever M0 adds to it.
        self.scalar_range(base, dwords)?;
        let index = usize::from(first) + offset as usize;
        if index + dwords > SGPR_COUNT {
            return Err(illegal(format!(
                "{base} indexed by M0 = {offset} is s{index}, past s{}",
                SGPR_COUNT - 1
            )));
        }
        Ok(index)
    }

    fn set_exec(&mut self, value: u32) {
        self.sgpr[usize::from(EXEC_LO)] = value;
    }

    pub(super) fn sop1(&mut self, i: &Sop1) -> Result<Flow, FaultKind> {
        use Sop1Op::*;
        let float_src = operand_spec(i.op.operands(), "ssrc0").is_some_and(|s| s.is_float());
        let s32 = |w: &Wave| w.read_scalar(i.ssrc0);
        let s64 = |w: &Wave| w.read_scalar64(i.ssrc0, float_src);
        match i.op {
            S_MOV_B32 => {
                let v = s32(self)?;
                self.write_scalar(i.sdst, v)?;
            }
            S_MOV_B64 => {
                let v = s64(self)?;
                self.write_scalar64(i.sdst, v)?;
            }
            S_CMOV_B32 => {
                let v = s32(self)?;
                if self.scc {
                    self.write_scalar(i.sdst, v)?;
                }
            }
            S_CMOV_B64 => {
                let v = s64(self)?;
                if self.scc {
                    self.write_scalar64(i.sdst, v)?;
                }
            }
            S_NOT_B32 => {
                let v = !s32(self)?;
                self.scc = v != 0;
                self.write_scalar(i.sdst, v)?;
            }
            S_NOT_B64 => {
                let v = !s64(self)?;
                self.scc = v != 0;
                self.write_scalar64(i.sdst, v)?;
            }
            S_BREV_B32 => {
                let v = s32(self)?.reverse_bits();
                self.write_scalar(i.sdst, v)?;
            }
            S_BREV_B64 => {
                let v = s64(self)?.reverse_bits();
                self.write_scalar64(i.sdst, v)?;
            }
            S_BCNT0_I32_B32 | S_BCNT1_I32_B32 | S_BCNT0_I32_B64 | S_BCNT1_I32_B64 => {
                let ones = match i.op {
                    S_BCNT0_I32_B32 => s32(self)?.count_zeros(),
                    S_BCNT1_I32_B32 => s32(self)?.count_ones(),
                    S_BCNT0_I32_B64 => s64(self)?.count_zeros(),
                    _ => s64(self)?.count_ones(),
                };
                self.scc = ones != 0;
                self.write_scalar(i.sdst, ones)?;
            }
            S_CTZ_I32_B32 => {
                let v = s32(self)?;
                let r = if v == 0 { u32::MAX } else { v.trailing_zeros() };
                self.write_scalar(i.sdst, r)?;
            }
            S_CTZ_I32_B64 => {
                let v = s64(self)?;
                let r = if v == 0 { u32::MAX } else { v.trailing_zeros() };
                self.write_scalar(i.sdst, r)?;
            }
            S_CLZ_I32_U32 => {
                let v = s32(self)?;
                let r = if v == 0 { u32::MAX } else { v.leading_zeros() };
                self.write_scalar(i.sdst, r)?;
            }
            S_CLZ_I32_U64 => {
                let v = s64(self)?;
                let r = if v == 0 { u32::MAX } else { v.leading_zeros() };
                self.write_scalar(i.sdst, r)?;
            }
            S_CLS_I32 => {
                let v = s32(self)?;
                let r = if v == 0 || v == u32::MAX {
                    u32::MAX
                } else if v >> 31 == 1 {
                    (!v).leading_zeros()
                } else {
                    v.leading_zeros()
                };
                self.write_scalar(i.sdst, r)?;
            }
            S_SEXT_I32_I8 => {
                let v = s32(self)? as u8 as i8 as i32 as u32;
                self.write_scalar(i.sdst, v)?;
            }
            S_SEXT_I32_I16 => {
                let v = s32(self)? as u16 as i16 as i32 as u32;
                self.write_scalar(i.sdst, v)?;
            }
            S_ABS_I32 => {
                let v = (s32(self)? as i32).wrapping_abs() as u32;
                self.scc = v != 0;
                self.write_scalar(i.sdst, v)?;
            }
            S_BITSET0_B32 | S_BITSET1_B32 => {
                let bit = s32(self)? & 31;
                let old = self.read_scalar(i.sdst)?;
                let v = if i.op == S_BITSET1_B32 {
                    old | (1 << bit)
                } else {
                    old & !(1 << bit)
                };
                self.write_scalar(i.sdst, v)?;
            }
            S_BITSET0_B64 | S_BITSET1_B64 => {
                let bit = s32(self)? & 63;
                let old = self.read_scalar64(i.sdst, false)?;
                let v = if i.op == S_BITSET1_B64 {
                    old | (1 << bit)
                } else {
                    old & !(1 << bit)
                };
                self.write_scalar64(i.sdst, v)?;
            }
            S_WQM_B32 => {
                let v = s32(self)?;
                let mut r = 0u32;
                for quad in 0..8 {
                    if (v >> (quad * 4)) & 0xf != 0 {
                        r |= 0xf << (quad * 4);
                    }
                }
                self.scc = r != 0;
                self.write_scalar(i.sdst, r)?;
            }
            S_GETPC_B64 => {
                let next = self.pc.wrapping_add(4);
                self.write_scalar64(i.sdst, next)?;
            }
            S_SETPC_B64 => {
                let target = s64(self)?;
                return Ok(Flow::Jump(target));
            }
            S_SWAPPC_B64 => {
                let target = s64(self)?;
                let next = self.pc.wrapping_add(4);
                self.write_scalar64(i.sdst, next)?;
                return Ok(Flow::Jump(target));
            }
            S_AND_SAVEEXEC_B32
            | S_OR_SAVEEXEC_B32
            | S_XOR_SAVEEXEC_B32
            | S_NAND_SAVEEXEC_B32
            | S_NOR_SAVEEXEC_B32
            | S_XNOR_SAVEEXEC_B32
            | S_AND_NOT0_SAVEEXEC_B32
            | S_AND_NOT1_SAVEEXEC_B32
            | S_OR_NOT0_SAVEEXEC_B32
            | S_OR_NOT1_SAVEEXEC_B32
            | S_AND_NOT0_WREXEC_B32
            | S_AND_NOT1_WREXEC_B32 => {
                let src = s32(self)?;
                let exec = self.exec();
                let new_exec = match i.op {
                    S_AND_SAVEEXEC_B32 => src & exec,
                    S_OR_SAVEEXEC_B32 => src | exec,
                    S_XOR_SAVEEXEC_B32 => src ^ exec,
                    S_NAND_SAVEEXEC_B32 => !(src & exec),
                    S_NOR_SAVEEXEC_B32 => !(src | exec),
                    S_XNOR_SAVEEXEC_B32 => !(src ^ exec),
                    S_AND_NOT0_SAVEEXEC_B32 | S_AND_NOT0_WREXEC_B32 => !exec & src,
                    S_AND_NOT1_SAVEEXEC_B32 | S_AND_NOT1_WREXEC_B32 => src & !exec,
                    S_OR_NOT0_SAVEEXEC_B32 => !exec | src,
                    _ => src | !exec,
                };
                self.set_exec(new_exec);
                self.scc = new_exec != 0;
                let wrexec = matches!(i.op, S_AND_NOT0_WREXEC_B32 | S_AND_NOT1_WREXEC_B32);
                self.write_scalar(i.sdst, if wrexec { new_exec } else { exec })?;
            }
            S_CLS_I32_I64 => {
                let v = s64(self)?;
                // Bits below the sign bit that still equal it; -1 when all 64 bits agree.
                let magnitude = if v >> 63 == 1 { !v } else { v };
                let r = if magnitude == 0 {
                    u32::MAX
                } else {
                    magnitude.leading_zeros()
                };
                self.write_scalar(i.sdst, r)?;
            }
            S_BITREPLICATE_B64_B32 => {
                let v = s32(self)?;
                let mut r = 0u64;
                for bit in 0..32 {
                    if (v >> bit) & 1 != 0 {
                        r |= 0b11 << (2 * bit);
                    }
                }
                self.write_scalar64(i.sdst, r)?;
            }
            S_QUADMASK_B32 => {
                let v = s32(self)?;
                let r = (0..8).fold(0u32, |r, quad| {
                    r | u32::from((v >> (quad * 4)) & 0xf != 0) << quad
                });
                self.scc = r != 0;
                self.write_scalar(i.sdst, r)?;
            }
            S_QUADMASK_B64 => {
                let v = s64(self)?;
                let r = (0..16).fold(0u64, |r, quad| {
                    r | u64::from((v >> (quad * 4)) & 0xf != 0) << quad
                });
                self.scc = r != 0;
                self.write_scalar64(i.sdst, r)?;
            }
            S_WQM_B64 => {
                let v = s64(self)?;
                let r = (0..16).fold(0u64, |r, quad| {
                    if (v >> (quad * 4)) & 0xf != 0 {
                        r | 0xf << (quad * 4)
                    } else {
                        r
                    }
                });
                self.scc = r != 0;
                self.write_scalar64(i.sdst, r)?;
            }
            S_MOVRELS_B32 | S_MOVRELS_B64 => {
                let dwords = if i.op == S_MOVRELS_B64 { 2 } else { 1 };
                let offset = self.sgpr[usize::from(M0)];
                let from = self.relative_sgpr(i.ssrc0, offset, dwords)?;
                let low = self.sgpr[from];
                if dwords == 2 {
                    let value = u64::from(low) | u64::from(self.sgpr[from + 1]) << 32;
                    self.write_scalar64(i.sdst, value)?;
                } else {
                    self.write_scalar(i.sdst, low)?;
                }
            }
            S_MOVRELD_B32 | S_MOVRELD_B64 => {
                let dwords = if i.op == S_MOVRELD_B64 { 2 } else { 1 };
                let value = if dwords == 2 {
                    s64(self)?
                } else {
                    u64::from(s32(self)?)
                };
                let offset = self.sgpr[usize::from(M0)];
                let to = self.relative_sgpr(i.sdst, offset, dwords)?;
                self.sgpr[to] = value as u32;
                if dwords == 2 {
                    self.sgpr[to + 1] = (value >> 32) as u32;
                }
            }
            S_MOVRELSD_2_B32 => {
                let m0 = self.sgpr[usize::from(M0)];
                let from = self.relative_sgpr(i.ssrc0, m0 & 0x3ff, 1)?;
                let to = self.relative_sgpr(i.sdst, (m0 >> 16) & 0x3ff, 1)?;
                self.sgpr[to] = self.sgpr[from];
            }
            S_CVT_F32_I32 => {
                let v = (s32(self)? as i32 as f32).to_bits();
                self.write_scalar(i.sdst, v)?;
            }
            S_CVT_F32_U32 => {
                let v = (s32(self)? as f32).to_bits();
                self.write_scalar(i.sdst, v)?;
            }
            S_CVT_I32_F32 => {
                let v = f32::from_bits(s32(self)?) as i32 as u32;
                self.write_scalar(i.sdst, v)?;
            }
            S_CVT_U32_F32 => {
                let v = f32::from_bits(s32(self)?) as u32;
                self.write_scalar(i.sdst, v)?;
            }
            _ => return Err(unimplemented(i.op.mnemonic())),
        }
        Ok(Flow::Next)
    }

    pub(super) fn sop2(&mut self, i: &Sop2) -> Result<Flow, FaultKind> {
        use Sop2Op::*;
        let a = |w: &Wave| w.read_scalar(i.ssrc0);
        let b = |w: &Wave| w.read_scalar(i.ssrc1);
        // The 64-bit operations' sources at their own widths: a shift amount or a bitfield
        // spec is one register (which need not start a pair).
        let read = |w: &Wave, operand: Operand, name: &str| {
            if spec_dwords(i.op.operands(), name) == 2 {
                w.read_scalar64(operand, false)
            } else {
                w.read_scalar(operand).map(u64::from)
            }
        };
        let a64 = |w: &Wave| read(w, i.ssrc0, "ssrc0");
        let b64 = |w: &Wave| read(w, i.ssrc1, "ssrc1");
        let (value, scc): (u32, Option<bool>) = match i.op {
            S_ADD_U32 => {
                let (r, carry) = a(self)?.overflowing_add(b(self)?);
                (r, Some(carry))
            }
            S_SUB_U32 => {
                let (r, borrow) = a(self)?.overflowing_sub(b(self)?);
                (r, Some(borrow))
            }
            S_ADD_I32 => {
                let (r, overflow) = (a(self)? as i32).overflowing_add(b(self)? as i32);
                (r as u32, Some(overflow))
            }
            S_SUB_I32 => {
                let (r, overflow) = (a(self)? as i32).overflowing_sub(b(self)? as i32);
                (r as u32, Some(overflow))
            }
            S_ADDC_U32 => {
                let sum = u64::from(a(self)?) + u64::from(b(self)?) + u64::from(self.scc);
                (sum as u32, Some(sum >> 32 != 0))
            }
            S_SUBB_U32 => {
                let (x, y, c) = (
                    u64::from(a(self)?),
                    u64::from(b(self)?),
                    u64::from(self.scc),
                );
                (x.wrapping_sub(y).wrapping_sub(c) as u32, Some(y + c > x))
            }
            S_MIN_I32 => {
                let (x, y) = (a(self)? as i32, b(self)? as i32);
                (x.min(y) as u32, Some(x < y))
            }
            S_MIN_U32 => {
                let (x, y) = (a(self)?, b(self)?);
                (x.min(y), Some(x < y))
            }
            S_MAX_I32 => {
                let (x, y) = (a(self)? as i32, b(self)? as i32);
                (x.max(y) as u32, Some(x > y))
            }
            S_MAX_U32 => {
                let (x, y) = (a(self)?, b(self)?);
                (x.max(y), Some(x > y))
            }
            S_CSELECT_B32 => (if self.scc { a(self)? } else { b(self)? }, None),
            S_AND_B32 | S_OR_B32 | S_XOR_B32 | S_NAND_B32 | S_NOR_B32 | S_XNOR_B32
            | S_AND_NOT1_B32 | S_OR_NOT1_B32 => {
                let (x, y) = (a(self)?, b(self)?);
                let r = match i.op {
                    S_AND_B32 => x & y,
                    S_OR_B32 => x | y,
                    S_XOR_B32 => x ^ y,
                    S_NAND_B32 => !(x & y),
                    S_NOR_B32 => !(x | y),
                    S_XNOR_B32 => !(x ^ y),
                    S_AND_NOT1_B32 => x & !y,
                    _ => x | !y,
                };
                (r, Some(r != 0))
            }
            S_LSHL_B32 => {
                let r = a(self)? << (b(self)? & 31);
                (r, Some(r != 0))
            }
            S_LSHR_B32 => {
                let r = a(self)? >> (b(self)? & 31);
                (r, Some(r != 0))
            }
            S_ASHR_I32 => {
                let r = ((a(self)? as i32) >> (b(self)? & 31)) as u32;
                (r, Some(r != 0))
            }
            S_LSHL1_ADD_U32 | S_LSHL2_ADD_U32 | S_LSHL3_ADD_U32 | S_LSHL4_ADD_U32 => {
                let shift = match i.op {
                    S_LSHL1_ADD_U32 => 1,
                    S_LSHL2_ADD_U32 => 2,
                    S_LSHL3_ADD_U32 => 3,
                    _ => 4,
                };
                let sum = (u64::from(a(self)?) << shift) + u64::from(b(self)?);
                (sum as u32, Some(sum >> 32 != 0))
            }
            S_BFM_B32 => {
                let r = ((1u64 << (a(self)? & 31)) - 1) as u32;
                (r.wrapping_shl(b(self)? & 31), None)
            }
            S_MUL_I32 => ((a(self)? as i32).wrapping_mul(b(self)? as i32) as u32, None),
            S_MUL_HI_U32 => (
                ((u64::from(a(self)?) * u64::from(b(self)?)) >> 32) as u32,
                None,
            ),
            S_MUL_HI_I32 => (
                ((i64::from(a(self)? as i32) * i64::from(b(self)? as i32)) >> 32) as u32,
                None,
            ),
            S_BFE_U32 | S_BFE_I32 => {
                let (x, control) = (a(self)?, b(self)?);
                let offset = control & 31;
                let width = (control >> 16) & 0x7f;
                let field = (u64::from(x) >> offset) & low_mask64(width);
                let r = if i.op == S_BFE_I32 {
                    sign_extend64(field, width.min(32)) as u32
                } else {
                    field as u32
                };
                (r, Some(r != 0))
            }
            S_ABSDIFF_I32 => {
                let r = (a(self)? as i32)
                    .wrapping_sub(b(self)? as i32)
                    .wrapping_abs() as u32;
                (r, Some(r != 0))
            }
            S_PACK_LL_B32_B16 => ((a(self)? & 0xffff) | (b(self)? << 16), None),
            S_PACK_LH_B32_B16 => ((a(self)? & 0xffff) | (b(self)? & 0xffff_0000), None),
            S_PACK_HH_B32_B16 => ((a(self)? >> 16) | (b(self)? & 0xffff_0000), None),
            S_PACK_HL_B32_B16 => ((a(self)? >> 16) | (b(self)? << 16), None),
            S_ADD_F32 | S_SUB_F32 | S_MUL_F32 | S_MIN_F32 | S_MAX_F32 => {
                let (x, y) = (f32::from_bits(a(self)?), f32::from_bits(b(self)?));
                let r = match i.op {
                    S_ADD_F32 => x + y,
                    S_SUB_F32 => x - y,
                    S_MUL_F32 => x * y,
                    S_MIN_F32 => x.min(y),
                    _ => x.max(y),
                };
                (r.to_bits(), None)
            }
            // 64-bit operations write a register pair and return early.
            S_AND_B64 | S_OR_B64 | S_XOR_B64 | S_NAND_B64 | S_NOR_B64 | S_XNOR_B64
            | S_AND_NOT1_B64 | S_OR_NOT1_B64 | S_LSHL_B64 | S_LSHR_B64 | S_ASHR_I64
            | S_CSELECT_B64 | S_BFM_B64 | S_BFE_U64 | S_BFE_I64 => {
                return self.sop2_64(i, a64(self)?, b64(self)?)
            }
            _ => return Err(unimplemented(i.op.mnemonic())),
        };
        self.write_scalar(i.sdst, value)?;
        if let Some(scc) = scc {
            self.scc = scc;
        }
        Ok(Flow::Next)
    }

    fn sop2_64(&mut self, i: &Sop2, x: u64, y: u64) -> Result<Flow, FaultKind> {
        use Sop2Op::*;
        let (value, sets_scc) = match i.op {
            S_AND_B64 => (x & y, true),
            S_OR_B64 => (x | y, true),
            S_XOR_B64 => (x ^ y, true),
            S_NAND_B64 => (!(x & y), true),
            S_NOR_B64 => (!(x | y), true),
            S_XNOR_B64 => (!(x ^ y), true),
            S_AND_NOT1_B64 => (x & !y, true),
            S_OR_NOT1_B64 => (x | !y, true),
            S_LSHL_B64 => (x << (y & 63), true),
            S_LSHR_B64 => (x >> (y & 63), true),
            S_ASHR_I64 => (((x as i64) >> (y & 63)) as u64, true),
            S_CSELECT_B64 => (if self.scc { x } else { y }, false),
            S_BFM_B64 => (low_mask64((x & 63) as u32) << (y & 63), false),
            S_BFE_U64 | S_BFE_I64 => {
                let offset = (y & 63) as u32;
                let width = ((y >> 16) & 0x7f) as u32;
                let field = (x >> offset) & low_mask64(width);
                let r = if i.op == S_BFE_I64 {
                    sign_extend64(field, width.min(64)) as u64
                } else {
                    field
                };
                (r, true)
            }
            _ => return Err(unimplemented(i.op.mnemonic())),
        };
        self.write_scalar64(i.sdst, value)?;
        if sets_scc {
            self.scc = value != 0;
        }
        Ok(Flow::Next)
    }

    pub(super) fn sopk(&mut self, i: &Sopk, size_bytes: u64) -> Result<Flow, FaultKind> {
        use SopkOp::*;
        let imm_i = i32::from(i.simm16 as i16);
        let imm_u = u32::from(i.simm16);
        match i.op {
            S_MOVK_I32 => self.write_scalar(i.sdst, imm_i as u32)?,
            S_CMOVK_I32 => {
                if self.scc {
                    self.write_scalar(i.sdst, imm_i as u32)?;
                }
            }
            S_ADDK_I32 => {
                let old = self.read_scalar(i.sdst)? as i32;
                let (r, overflow) = old.overflowing_add(imm_i);
                self.scc = overflow;
                self.write_scalar(i.sdst, r as u32)?;
            }
            S_MULK_I32 => {
                let old = self.read_scalar(i.sdst)? as i32;
                self.write_scalar(i.sdst, old.wrapping_mul(imm_i) as u32)?;
            }
            S_CMPK_EQ_I32 | S_CMPK_LG_I32 | S_CMPK_GT_I32 | S_CMPK_GE_I32 | S_CMPK_LT_I32
            | S_CMPK_LE_I32 => {
                let x = self.read_scalar(i.sdst)? as i32;
                self.scc = match i.op {
                    S_CMPK_EQ_I32 => x == imm_i,
                    S_CMPK_LG_I32 => x != imm_i,
                    S_CMPK_GT_I32 => x > imm_i,
                    S_CMPK_GE_I32 => x >= imm_i,
                    S_CMPK_LT_I32 => x < imm_i,
                    _ => x <= imm_i,
                };
            }
            S_CMPK_EQ_U32 | S_CMPK_LG_U32 | S_CMPK_GT_U32 | S_CMPK_GE_U32 | S_CMPK_LT_U32
            | S_CMPK_LE_U32 => {
                let x = self.read_scalar(i.sdst)?;
                self.scc = match i.op {
                    S_CMPK_EQ_U32 => x == imm_u,
                    S_CMPK_LG_U32 => x != imm_u,
                    S_CMPK_GT_U32 => x > imm_u,
                    S_CMPK_GE_U32 => x >= imm_u,
                    S_CMPK_LT_U32 => x < imm_u,
                    _ => x <= imm_u,
                };
            }
            S_CALL_B64 => {
                let next = self.pc.wrapping_add(size_bytes);
                self.write_scalar64(i.sdst, next)?;
                return Ok(Flow::Jump(branch_target(self.pc, i.simm16)));
            }
            S_WAITCNT_VSCNT | S_WAITCNT_VMCNT | S_WAITCNT_EXPCNT | S_WAITCNT_LGKMCNT => {}
            S_GETREG_B32 => {
                let field = HwRegField::of(i.simm16);
                // Only MODE is modelled; the other hardware registers read as 0.
                let value = if field.id == HW_REG_MODE {
                    (self.mode & field.mask()) >> field.offset
                } else {
                    0
                };
                self.write_scalar(i.sdst, value)?;
            }
            S_SETREG_B32 | S_SETREG_IMM32_B32 => {
                let field = HwRegField::of(i.simm16);
                let source = if i.op == S_SETREG_IMM32_B32 {
                    i.literal
                        .ok_or_else(|| illegal("s_setreg_imm32_b32 without its literal"))?
                } else {
                    self.read_scalar(i.sdst)?
                };
                // Writes to the other hardware registers (status, trap state, allocation
                // registers) are privileged or have no effect the model could show.
                if field.id == HW_REG_MODE {
                    let mask = field.mask();
                    self.mode = (self.mode & !mask) | (source.wrapping_shl(field.offset) & mask);
                }
            }
            _ => return Err(unimplemented(i.op.mnemonic())),
        }
        Ok(Flow::Next)
    }

    // The negated float comparisons are the ISA's NaN-aware "not less than" etc.
    #[allow(
        clippy::neg_cmp_op_on_partial_ord,
        clippy::nonminimal_bool,
        clippy::double_comparisons
    )]
    pub(super) fn sopc(&mut self, i: &Sopc) -> Result<Flow, FaultKind> {
        use SopcOp::*;
        let a = self.read_scalar(i.ssrc0);
        let b = self.read_scalar(i.ssrc1);
        self.scc = match i.op {
            S_CMP_EQ_U64 | S_CMP_LG_U64 | S_BITCMP0_B64 | S_BITCMP1_B64 => {
                let x = self.read_scalar64(i.ssrc0, false)?;
                match i.op {
                    S_CMP_EQ_U64 => x == self.read_scalar64(i.ssrc1, false)?,
                    S_CMP_LG_U64 => x != self.read_scalar64(i.ssrc1, false)?,
                    S_BITCMP0_B64 => (x >> (b? & 63)) & 1 == 0,
                    _ => (x >> (b? & 63)) & 1 == 1,
                }
            }
            S_CMP_EQ_I32 | S_CMP_EQ_U32 => a? == b?,
            S_CMP_LG_I32 | S_CMP_LG_U32 => a? != b?,
            S_CMP_GT_I32 => (a? as i32) > (b? as i32),
            S_CMP_GE_I32 => (a? as i32) >= (b? as i32),
            S_CMP_LT_I32 => (a? as i32) < (b? as i32),
            S_CMP_LE_I32 => (a? as i32) <= (b? as i32),
            S_CMP_GT_U32 => a? > b?,
            S_CMP_GE_U32 => a? >= b?,
            S_CMP_LT_U32 => a? < b?,
            S_CMP_LE_U32 => a? <= b?,
            S_BITCMP0_B32 => (a? >> (b? & 31)) & 1 == 0,
            S_BITCMP1_B32 => (a? >> (b? & 31)) & 1 == 1,
            _ => {
                let (x, y) = (f32::from_bits(a?), f32::from_bits(b?));
                match i.op {
                    S_CMP_EQ_F32 => x == y,
                    S_CMP_LG_F32 => x < y || x > y,
                    S_CMP_GT_F32 => x > y,
                    S_CMP_GE_F32 => x >= y,
                    S_CMP_LT_F32 => x < y,
                    S_CMP_LE_F32 => x <= y,
                    S_CMP_O_F32 => !x.is_nan() && !y.is_nan(),
                    S_CMP_U_F32 => x.is_nan() || y.is_nan(),
                    S_CMP_NEQ_F32 => x != y,
                    S_CMP_NLG_F32 => !(x < y || x > y),
                    S_CMP_NGT_F32 => !(x > y),
                    S_CMP_NGE_F32 => !(x >= y),
                    S_CMP_NLT_F32 => !(x < y),
                    S_CMP_NLE_F32 => !(x <= y),
                    _ => return Err(unimplemented(i.op.mnemonic())),
                }
            }
        };
        Ok(Flow::Next)
    }

    pub(super) fn sopp(&mut self, i: &Sopp, size_bytes: u64) -> Result<Flow, FaultKind> {
        use SoppOp::*;
        let target = branch_target(self.pc, i.simm16);
        let taken = |cond: bool| if cond { Flow::Jump(target) } else { Flow::Next };
        let _ = size_bytes;
        Ok(match i.op {
            op if timing_only(op) => Flow::Next,
            S_DENORM_MODE => {
                self.mode = super::denorm::with_denorm_mode(self.mode, u32::from(i.simm16));
                Flow::Next
            }
            S_ROUND_MODE => {
                self.mode = super::denorm::with_round_mode(self.mode, u32::from(i.simm16));
                Flow::Next
            }
            S_ENDPGM | S_ENDPGM_SAVED | S_ENDPGM_ORDERED_PS_DONE | S_SETHALT => Flow::End,
            S_BARRIER => Flow::Barrier,
            S_BRANCH => Flow::Jump(target),
            S_CBRANCH_SCC0 => taken(!self.scc),
            S_CBRANCH_SCC1 => taken(self.scc),
            S_CBRANCH_VCCZ => taken(self.vcc() == 0),
            S_CBRANCH_VCCNZ => taken(self.vcc() != 0),
            S_CBRANCH_EXECZ => taken(self.exec() == 0),
            S_CBRANCH_EXECNZ => taken(self.exec() != 0),
            S_CBRANCH_CDBGSYS
            | S_CBRANCH_CDBGUSER
            | S_CBRANCH_CDBGSYS_OR_USER
            | S_CBRANCH_CDBGSYS_AND_USER => Flow::Next,
            S_TRAP => {
                return Err(FaultKind::Trap {
                    id: i.simm16 & 0xff,
                })
            }
            _ => return Err(unimplemented(i.op.mnemonic())),
        })
    }
}

/// HW_REG_MODE, the hardware register id of MODE in `hwreg(...)` operands.
const HW_REG_MODE: u32 = 1;

/// The `hwreg(id, offset, size)` field of S_GETREG / S_SETREG: id in SIMM16[5:0], offset in
/// [10:6], size - 1 in [15:11].
struct HwRegField {
    id: u32,
    offset: u32,
    size: u32,
}

impl HwRegField {
    fn of(simm16: u16) -> HwRegField {
        let simm16 = u32::from(simm16);
        HwRegField {
            id: simm16 & 0x3f,
            offset: (simm16 >> 6) & 0x1f,
            size: ((simm16 >> 11) & 0x1f) + 1,
        }
    }

    /// The register bits the field covers. The ISA pseudocode applies the unshifted
    /// `(1 << size) - 1` to the shifted value, which would make every field at a nonzero
    /// offset unwritable (`hwreg(HW_REG_MODE, 4, 4)`, LLVM's way of setting FP_DENORM, would
    /// do nothing); the field is meant, so the mask is shifted by the offset.
    fn mask(&self) -> u32 {
        let width = (1u64 << self.size) - 1;
        (width << self.offset) as u32
    }
}

/// Target of a SOPP/SOPK branch: the next dword plus the signed dword offset.
/// Whether a SOPP instruction only affects timing (or things not modelled), so that
/// executing it changes nothing here.
pub(crate) fn timing_only(op: SoppOp) -> bool {
    use SoppOp::*;
    matches!(
        op,
        S_NOP
            | S_CLAUSE
            | S_DELAY_ALU
            | S_WAITCNT
            | S_WAITCNT_DEPCTR
            | S_WAIT_IDLE
            | S_WAIT_EVENT
            | S_SENDMSG
            | S_SENDMSGHALT
            | S_ICACHE_INV
            | S_CODE_END
            | S_SLEEP
            | S_SETPRIO
            | S_INCPERFLEVEL
            | S_DECPERFLEVEL
            | S_SET_INST_PREFETCH_DISTANCE
            | S_TTRACEDATA
            | S_TTRACEDATA_IMM
            | S_WAKEUP
            | S_SETKILL
    )
}

/// Target of a SOPP branch at `pc`: the next instruction plus SIMM16 dwords.
pub(crate) fn branch_target(pc: u64, simm16: u16) -> u64 {
    let offset = i64::from(simm16 as i16) * 4;
    pc.wrapping_add(4).wrapping_add(offset as u64)
}
