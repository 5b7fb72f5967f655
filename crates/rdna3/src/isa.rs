//! Opcode tables generated from the ISA JSON (`data/rdna3_isa.json`) by `build.rs`.
//!
//! Each opcode space is an enum with the JSON's names as variants (e.g. [`Sop2Op::S_ADD_U32`]),
//! `from_u32`, `mnemonic` and [`OperandSpec`]s. [`identify_encoding`] picks the format of an
//! instruction word by its fixed bits (longest match wins).

/// Width and data format of one operand field of an instruction, as the ISA JSON lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandSpec {
    /// Field name in the encoding (`src0`, `vdst`, `sdata`, ...).
    pub field: &'static str,
    /// Width in bits (64-bit operands occupy register pairs).
    pub bits: u16,
    /// Data format, e.g. `num_f32`, `num_u64`, `num_m64` (a lane mask), `any`.
    pub format: &'static str,
    /// Operand kind, e.g. `src`, `vgpr`, `sreg`, `sdst`.
    pub kind: &'static str,
}

impl OperandSpec {
    /// Whether the operand holds a floating-point value (selects inline-constant encoding).
    pub fn is_float(&self) -> bool {
        self.format.starts_with("num_f") || self.format.starts_with("num_bf")
    }
}

/// Finds the spec of `field` in an opcode's operand list.
pub fn operand_spec(specs: &'static [OperandSpec], field: &str) -> Option<&'static OperandSpec> {
    specs.iter().find(|spec| spec.field == field)
}

/// A vector ALU operation in its canonical (VOP3 or VOP3SD) numbering. The 32-bit encodings
/// (VOP1, VOP2, VOPC, VOPD) are lowered to this at decode time so that one executor serves all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValuOpcode {
    /// An operation of the VOP3 opcode space.
    Vop3(Vop3Op),
    /// An operation of the VOP3SD opcode space (with a scalar carry/flag destination).
    Vop3sd(Vop3sdOp),
}

impl ValuOpcode {
    /// LLVM mnemonic of the VOP3 form.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Self::Vop3(op) => op.mnemonic(),
            Self::Vop3sd(op) => op.mnemonic(),
        }
    }

    /// Operand specs of the VOP3 form.
    pub const fn operands(self) -> &'static [OperandSpec] {
        match self {
            Self::Vop3(op) => op.operands(),
            Self::Vop3sd(op) => op.operands(),
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/isa_tables.rs"));
