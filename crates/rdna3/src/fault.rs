//! Errors a dispatch can end with. Every failure of untrusted code is one of these.

use std::fmt;

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// No encoding or opcode matches the instruction word.
    Undecodable {
        /// The first dword of the instruction.
        word: u32,
    },
    /// The instruction decodes but the interpreter does not implement it.
    Unimplemented {
        /// LLVM mnemonic.
        mnemonic: String,
    },
    /// An operand is not valid in its position (register range past the register file, ...).
    IllegalOperand {
        /// What is wrong.
        detail: String,
    },
    /// An instruction names VGPRs beyond the wave's allocation (COMPUTE_PGM_RSRC1.VGPRS):
    /// the hardware has no such registers for this wave.
    VgprOutOfRange {
        /// First VGPR of the operand.
        first: u32,
        /// Consecutive VGPRs the operand spans.
        count: u32,
        /// VGPRs the wave has (v0 up to but not including this).
        allocated: u32,
    },
    /// A memory access outside the GPU's mapped ranges.
    VmFault {
        /// First byte address of the access.
        addr: u64,
        /// Whether the access was a write.
        write: bool,
    },
    /// An LDS access outside the workgroup's allocation.
    LdsOutOfRange {
        /// The LDS byte address.
        addr: u64,
    },
    /// The wave executed more instructions than the dispatch's budget.
    StepBudgetExceeded {
        /// The budget that was exhausted.
        steps: u64,
    },
    /// The dispatch asks for something this model does not support (wave64, ...).
    Unsupported(String),
    /// The dispatch was cancelled from outside (its queue was destroyed).
    Aborted,
    /// `s_trap` or another explicit abort.
    Trap {
        /// The trap id.
        id: u16,
    },
}

/// A fault with where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What went wrong.
    pub kind: FaultKind,
    /// Byte address of the faulting instruction (0 for dispatch-level faults).
    pub pc: u64,
    /// The faulting instruction as assembly text, if it decoded.
    pub instruction: Option<String>,
    /// The workgroup that faulted.
    pub workgroup: [u32; 3],
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKind::Undecodable { word } => {
                write!(f, "undecodable instruction word {word:#010x}")
            }
            FaultKind::Unimplemented { mnemonic } => {
                write!(f, "unimplemented instruction {mnemonic}")
            }
            FaultKind::IllegalOperand { detail } => write!(f, "illegal operand ({detail})"),
            FaultKind::VgprOutOfRange {
                first,
                count,
                allocated,
            } => {
                let last = first.saturating_add((*count).max(1) - 1);
                if last == *first {
                    write!(f, "v{first}")?;
                } else {
                    write!(f, "v[{first}:{last}]")?;
                }
                write!(
                    f,
                    " beyond the wave's {allocated} allocated VGPRs (v0..v{}, COMPUTE_PGM_RSRC1.VGPRS)",
                    allocated.saturating_sub(1)
                )
            }
            FaultKind::VmFault { addr, write } => {
                let access = if *write { "write" } else { "read" };
                write!(f, "VM fault: {access} of unmapped address {addr:#x}")
            }
            FaultKind::LdsOutOfRange { addr } => write!(f, "LDS access out of range at {addr:#x}"),
            FaultKind::StepBudgetExceeded { steps } => {
                write!(f, "step budget of {steps} instructions exceeded")
            }
            FaultKind::Unsupported(what) => write!(f, "unsupported: {what}"),
            FaultKind::Aborted => write!(f, "dispatch aborted"),
            FaultKind::Trap { id } => write!(f, "s_trap {id}"),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at pc {:#x}", self.kind, self.pc)?;
        if let Some(text) = &self.instruction {
            if !matches!(self.kind, FaultKind::Unimplemented { .. }) {
                write!(f, " ({text})")?;
            }
        }
        let [x, y, z] = self.workgroup;
        write!(f, " (workgroup {x},{y},{z})")
    }
}

impl std::error::Error for Fault {}
