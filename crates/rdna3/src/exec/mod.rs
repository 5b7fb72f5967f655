//! The wave32 interpreter: wave state and the per-instruction dispatch (one `match` over
//! [`Inst`]). Each instruction runs over all 32 lanes at once, masked by EXEC.

mod buffer_ops;
mod denorm;
mod fast;
mod float;
mod memory_ops;
mod salu;
mod valu;

use std::cell::Cell;

use crate::decode::Inst;
use crate::fault::FaultKind;
use crate::memory::Memory;
use crate::operand::{tuple_alignment, Aperture, Operand, EXEC_LO, NULL, SCALAR_SLOTS, VCC_LO};

pub(crate) use denorm::flush_f32;
pub use denorm::{mode_from_rsrc1, DEFAULT_MODE};
pub use float::{f16_to_f32, f32_to_f16};
pub(crate) use salu::{branch_target, timing_only};
pub(crate) use valu::f32_unit;

/// Lanes per wave.
pub const WAVE_SIZE: usize = 32;
/// VGPRs a wave32 wave can address (the architectural maximum, and the allocation of a
/// [`Wave::new`] wave).
pub const VGPR_COUNT: usize = 256;
/// COMPUTE_PGM_RSRC1.VGPRS counts blocks of this many VGPRs, minus one, for wave32 on gfx10
/// and gfx11 (LLVM's AMDGPUUsage, `GRANULATED_WORKITEM_VGPR_COUNT`).
pub const WAVE32_VGPR_GRANULE: usize = 8;

/// VGPRs a wave32 wave gets from COMPUTE_PGM_RSRC1 (bits 5:0 = blocks minus one), at most
/// [`VGPR_COUNT`].
pub fn wave32_vgprs_of_rsrc1(rsrc1: u32) -> usize {
    (hcq_amd_sys::regs::PgmRsrc1(rsrc1).vgprs() as usize + 1)
        .saturating_mul(WAVE32_VGPR_GRANULE)
        .min(VGPR_COUNT)
}

/// Base of the LDS aperture of flat addresses (`src_shared_base` returns its high half).
/// Outside the canonical x86-64/AArch64 user range, so it never aliases host memory.
pub const SHARED_APERTURE_BASE: u64 = 0x0001_0000_0000_0000;
/// Base of the private (scratch) aperture of flat addresses.
pub const PRIVATE_APERTURE_BASE: u64 = 0x0002_0000_0000_0000;
/// Size of each aperture.
pub const APERTURE_SIZE: u64 = 1 << 32;

/// What a wave does after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Continue with the next instruction.
    Next,
    /// Continue at this byte address.
    Jump(u64),
    /// Wait at a workgroup barrier, then continue with the next instruction.
    Barrier,
    /// The wave has ended.
    End,
}

/// Per-lane private memory of a wave (from COMPUTE_DISPATCH_SCRATCH_BASE / TMPRING_SIZE).
#[derive(Clone, Copy, Debug, Default)]
pub struct PrivateSegment {
    /// Byte address of this wave's scratch area.
    pub base: u64,
    /// Bytes of scratch per lane.
    pub bytes_per_lane: u64,
}

/// Architectural state of one wave32.
pub struct Wave {
    /// Scalar register file indexed by the 7-bit operand encoding (s0..s105, VCC, TTMPs,
    /// NULL, M0, EXEC).
    pub sgpr: [u32; SCALAR_SLOTS],
    /// Vector registers: `vgpr[register][lane]`; as many rows as the wave has VGPRs
    /// allocated ([`Wave::set_vgpr_allocation`]), so every register check is against the
    /// allocation.
    pub vgpr: Vec<[u32; WAVE_SIZE]>,
    /// Scalar condition code.
    pub scc: bool,
    /// Byte address of the next instruction.
    pub pc: u64,
    /// Private memory of the wave.
    pub private: PrivateSegment,
    /// The MODE hardware register (HW_REG_MODE): FP_ROUND in bits 3:0, FP_DENORM in bits
    /// 7:4 (see `denorm.rs`), DX10_CLAMP bit 8, IEEE bit 9. Only FP_DENORM changes what
    /// instructions compute; the other bits are kept for S_GETREG.
    pub mode: u32,
    /// One past the highest VGPR row handed out by [`Wave::vgpr_range`] (and the fast VALU
    /// paths): every row the interpreter may have written is below it, so [`Wave::reset`]
    /// only has to clear those rows.
    vgpr_used: Cell<usize>,
}

/// What an instruction can reach besides its wave's registers.
pub struct ExecContext<'a> {
    /// GPU memory.
    pub mem: &'a dyn Memory,
    /// The workgroup's LDS.
    pub lds: &'a mut [u8],
}

/// An illegal-operand fault.
pub(crate) fn illegal(detail: impl Into<String>) -> FaultKind {
    FaultKind::IllegalOperand {
        detail: detail.into(),
    }
}

/// An unimplemented-instruction fault.
pub(crate) fn unimplemented(mnemonic: &str) -> FaultKind {
    FaultKind::Unimplemented {
        mnemonic: mnemonic.to_string(),
    }
}

impl Wave {
    /// A wave with all registers zero, starting at `pc`.
    pub fn new(pc: u64) -> Self {
        Self {
            sgpr: [0; SCALAR_SLOTS],
            vgpr: vec![[0; WAVE_SIZE]; VGPR_COUNT],
            scc: false,
            pc,
            private: PrivateSegment::default(),
            mode: DEFAULT_MODE,
            vgpr_used: Cell::new(VGPR_COUNT),
        }
    }

    /// Returns the wave to the state of [`Wave::new`]`(pc)`, keeping its allocation. Only the
    /// VGPR rows the interpreter may have touched since the last reset are cleared.
    pub fn reset(&mut self, pc: u64) {
        let used = self.vgpr_used.get().min(self.vgpr.len());
        self.vgpr[..used].fill([0; WAVE_SIZE]);
        self.vgpr_used.set(0);
        self.sgpr = [0; SCALAR_SLOTS];
        self.scc = false;
        self.pc = pc;
        self.private = PrivateSegment::default();
        self.mode = DEFAULT_MODE;
    }

    /// Gives the wave `count` VGPRs (at most [`VGPR_COUNT`]): instructions naming a register
    /// at or past it fault with [`FaultKind::VgprOutOfRange`]. Rows added are zero.
    pub fn set_vgpr_allocation(&mut self, count: usize) {
        let count = count.min(VGPR_COUNT);
        if self.vgpr.len() != count {
            self.vgpr.resize(count, [0; WAVE_SIZE]);
        }
    }

    /// Records that VGPR rows below `end` may be accessed (see [`Wave::reset`]).
    #[inline(always)]
    pub(crate) fn note_vgpr_use(&self, end: usize) {
        if end > self.vgpr_used.get() {
            self.vgpr_used.set(end);
        }
    }

    /// EXEC (wave32: EXEC_LO).
    pub fn exec(&self) -> u32 {
        self.sgpr[usize::from(EXEC_LO)]
    }

    /// VCC (wave32: VCC_LO).
    pub fn vcc(&self) -> u32 {
        self.sgpr[usize::from(VCC_LO)]
    }

    /// Reads a 32-bit scalar source.
    pub fn read_scalar(&self, operand: Operand) -> Result<u32, FaultKind> {
        if let Some(slot) = operand.scalar_slot() {
            return Ok(if slot == NULL {
                0
            } else {
                self.sgpr[usize::from(slot)]
            });
        }
        match operand {
            Operand::InlineInt(v) => Ok(i32::from(v) as u32),
            Operand::InlineFloat(v) => Ok(v.f32_bits()),
            Operand::Literal(v) => Ok(v),
            Operand::Scc => Ok(u32::from(self.scc)),
            Operand::Vccz => Ok(u32::from(self.vcc() == 0)),
            Operand::Execz => Ok(u32::from(self.exec() == 0)),
            Operand::Aperture(aperture) => Ok((aperture_value(aperture) >> 32) as u32),
            other => Err(illegal(format!("{other} is not a scalar source"))),
        }
    }

    /// Reads a 64-bit scalar source; `float` selects the f64 form of inline constants and
    /// literals (a literal is then the high half).
    pub fn read_scalar64(&self, operand: Operand, float: bool) -> Result<u64, FaultKind> {
        if operand == Operand::Null {
            return Ok(0);
        }
        if operand.scalar_slot().is_some() {
            let lo = self.scalar_range(operand, 2)?.start;
            return Ok(u64::from(self.sgpr[lo]) | (u64::from(self.sgpr[lo + 1]) << 32));
        }
        match operand {
            Operand::InlineInt(v) => Ok(i64::from(v) as u64),
            Operand::InlineFloat(v) => Ok(v.f64_bits()),
            Operand::Literal(v) if float => Ok(u64::from(v) << 32),
            Operand::Literal(v) => Ok(u64::from(v)),
            Operand::Aperture(aperture) => Ok(aperture_value(aperture)),
            other => self.read_scalar(other).map(u64::from),
        }
    }

    /// Writes a 32-bit scalar destination (NULL discards).
    pub fn write_scalar(&mut self, operand: Operand, value: u32) -> Result<(), FaultKind> {
        let slot = operand
            .scalar_slot()
            .ok_or_else(|| illegal(format!("{operand} is not a scalar destination")))?;
        if slot != NULL {
            self.sgpr[usize::from(slot)] = value;
        }
        Ok(())
    }

    /// Writes a 64-bit scalar destination (a register pair).
    pub fn write_scalar64(&mut self, operand: Operand, value: u64) -> Result<(), FaultKind> {
        if operand == Operand::Null {
            return Ok(());
        }
        let lo = self.scalar_range(operand, 2)?.start;
        self.sgpr[lo] = value as u32;
        self.sgpr[lo + 1] = (value >> 32) as u32;
        Ok(())
    }

    /// Scalar register slot range `[first, first + count)` of an operand spanning `count`
    /// registers: an SGPR or TTMP tuple aligned as the ISA requires and inside its file, VCC or
    /// EXEC as a pair, NULL, or any single scalar register.
    pub fn scalar_range(
        &self,
        operand: Operand,
        count: usize,
    ) -> Result<std::ops::Range<usize>, FaultKind> {
        let slot = operand
            .scalar_slot()
            .ok_or_else(|| illegal(format!("{operand} is not a scalar register")))?;
        let first = usize::from(slot);
        let dwords = u32::try_from(count).unwrap_or(u32::MAX);
        if !operand.starts_tuple(dwords) || first + count > SCALAR_SLOTS {
            // Named as encoded: LLVM prints a misaligned tuple as the aligned one below it.
            return Err(illegal(format!(
                "{operand} cannot start {count} consecutive scalar registers (SGPR and TTMP \
                 tuples are {}-aligned and inside their file; of the other registers only VCC \
                 and EXEC form pairs)",
                tuple_alignment(dwords)
            )));
        }
        Ok(first..first + count)
    }

    /// VGPR index range `[first, first + count)`, checked against the register file.
    pub fn vgpr_range(
        &self,
        operand: Operand,
        count: usize,
    ) -> Result<std::ops::Range<usize>, FaultKind> {
        let Operand::Vgpr(first) = operand else {
            return Err(illegal(format!("{operand} is not a vector register")));
        };
        let first = usize::from(first);
        if first + count > self.vgpr.len() {
            return Err(FaultKind::VgprOutOfRange {
                first: first as u32,
                count: count as u32,
                allocated: self.vgpr.len() as u32,
            });
        }
        self.note_vgpr_use(first + count);
        Ok(first..first + count)
    }

    /// Executes one instruction.
    pub fn execute(
        &mut self,
        ctx: &mut ExecContext<'_>,
        inst: &Inst,
        size_bytes: u64,
    ) -> Result<Flow, FaultKind> {
        match inst {
            Inst::Sop1(i) => self.sop1(i),
            Inst::Sop2(i) => self.sop2(i),
            Inst::Sopk(i) => self.sopk(i, size_bytes),
            Inst::Sopc(i) => self.sopc(i),
            Inst::Sopp(i) => self.sopp(i, size_bytes),
            Inst::Smem(i) => self.smem(ctx, i),
            Inst::Vop1(i) if i.valu.is_none() => self.vop1_special(i),
            Inst::Vop1(i) => self.valu_optional(i.valu.as_ref(), i.op.mnemonic()),
            Inst::Vop2(i) if i.valu.is_none() => self.vop2_special(i),
            Inst::Vop2(i) => self.valu_optional(i.valu.as_ref(), i.op.mnemonic()),
            Inst::Vopc(i) => self.valu_optional(i.valu.as_ref(), i.op.mnemonic()),
            Inst::Vop3(i) => self.valu(&i.valu),
            Inst::Vop3sd(i) => self.valu(&i.valu),
            Inst::Vop3p(i) => self.vop3p(i),
            Inst::Vopd(i) => self.vopd(i),
            Inst::Ds(i) => self.ds(ctx, i),
            Inst::Flat(i) => self.flat(ctx, i),
            Inst::Buffer(i) => self.buffer(ctx, i),
            Inst::Other(i) => Err(unimplemented(i.mnemonic)),
        }
    }
}

/// The 64-bit value of an aperture register.
pub fn aperture_value(aperture: Aperture) -> u64 {
    match aperture {
        Aperture::SharedBase => SHARED_APERTURE_BASE,
        Aperture::SharedLimit => SHARED_APERTURE_BASE + APERTURE_SIZE - 1,
        Aperture::PrivateBase => PRIVATE_APERTURE_BASE,
        Aperture::PrivateLimit => PRIVATE_APERTURE_BASE + APERTURE_SIZE - 1,
    }
}
