//! What a compiled block inlines: each instruction the block compiler turns into host code,
//! in the operand forms it takes, as a plan the emitters (`vector.rs`, `scalar.rs`,
//! `memory.rs`) follow. Anything without a plan runs in the interpreter. Every plan computes
//! what the interpreter computes for that instruction (`exec/`); `tests/jit.rs` holds them to
//! it.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};

use crate::decode::{CompareCondition, CompareType, Inst, ValuInst};
use crate::exec::f32_unit;
use crate::isa::{ValuOpcode, Vop3Op, Vop3sdOp};
use crate::operand::{Operand, EXEC_LO, NULL};

/// A 32-bit operand the same for every lane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Uniform {
    Const(u32),
    Sgpr(u8),
}

/// A 32-bit source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Src {
    Row(u8),
    Uniform(Uniform),
}

/// A lane-wise operation writing one VGPR row under EXEC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum RowOp {
    Mov,
    AddF,
    SubF,
    MulF,
    Fma,
    /// `dst = a * b + dst`.
    Fmac,
    Add,
    Sub,
    Add3,
    MulLo,
    /// The low 32 bits of the product of the low 24 bits of `a` and `b`, unsigned or signed,
    /// plus `c` for the multiply-adds.
    MulU24,
    MulI24,
    MadU24,
    MadI24,
    And,
    Or,
    Xor,
    /// `b << (a & 31)`, `a` uniform.
    ShlRev,
    ShrRev,
    AshrRev,
    /// `(a << (b & 31)) + c`, `b` uniform.
    ShlAdd,
    ShlOr,
    MinI,
    MaxI,
    MinU,
    MaxU,
    /// IEEE minNum / maxNum as `exec/float.rs` defines them (a NaN loses; -0 < +0).
    MinF,
    MaxF,
    /// `v_sqrt_f32`: the input's denormals flushed (to zero of their sign) whatever MODE says;
    /// no result of a flushed input is denormal.
    SqrtF,
    /// `(a >> (b & 31)) & ((1 << (c & 31)) - 1)`, `b` and `c` uniform.
    BfeU,
    /// Lane bit of the uniform set: `b`, else `a`.
    Cndmask(Uniform),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Cond {
    Int(IntCC),
    Float(FloatCC),
    /// Ordered and not equal (`x < y || x > y`; Cranelift has no vector form of it).
    FloatLg,
    /// `v_cmp_class_f32`: whether the float's class is one of the mask's (bit 0 signalling
    /// NaN, 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal,
    /// 9 +inf), denormals seen as such whatever MODE says.
    Class,
}

/// One inlined VALU operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Plan {
    Row {
        op: RowOp,
        dst: u8,
        src: [Src; 3],
        /// Sign-bit input modifiers: bit n of `abs` clears, then bit n of `neg` flips, the
        /// sign of source n.
        abs: u8,
        neg: u8,
    },
    /// A compare: the lane mask, under EXEC, to a scalar slot (NULL discards).
    Compare {
        cond: Cond,
        src: [Src; 2],
        dst: u8,
        abs: u8,
        neg: u8,
    },
    /// An f32 transcendental-unit operation (`exec::f32_unit`): sources gathered into a row
    /// on the stack, the row computed by [`unit_row`], the result written under EXEC.
    Unit {
        op: Vop3Op,
        src: Src,
        dst: u8,
        abs: u8,
        neg: u8,
    },
    /// `v_lshlrev_b64` by a uniform amount: the VGPR pair at `src` shifted into the pair at
    /// `dst`.
    Shl64 { amount: Uniform, src: u8, dst: u8 },
    /// `v_add_co_u32` and relatives: a row and a carry (or borrow) mask.
    Carry {
        subtract: bool,
        src: [Src; 2],
        carry_in: Option<Uniform>,
        dst: u8,
        carry: u8,
    },
}

impl RowOp {
    /// Which of the three sources the lane computation reads (the others may be set up as
    /// uniforms, or unused).
    pub(super) fn reads(self) -> [bool; 3] {
        use RowOp::*;
        match self {
            Mov | SqrtF | BfeU => [true, false, false],
            ShlRev | ShrRev | AshrRev => [false, true, false],
            ShlAdd | ShlOr => [true, false, true],
            Fma | Add3 | MadU24 | MadI24 => [true, true, true],
            AddF | SubF | MulF | Fmac | Add | Sub | MulLo | MulU24 | MulI24 | And | Or | Xor
            | MinI | MaxI | MinU | MaxU | MinF | MaxF | Cndmask(_) => [true, true, false],
        }
    }
}

impl Plan {
    pub(super) fn writes_row(&self) -> Option<u8> {
        match *self {
            Plan::Row { dst, .. }
            | Plan::Carry { dst, .. }
            | Plan::Shl64 { dst, .. }
            | Plan::Unit { dst, .. } => Some(dst),
            Plan::Compare { .. } => None,
        }
    }

    pub(super) fn sources(&self) -> Vec<Src> {
        match *self {
            Plan::Row { src, .. } => src.to_vec(),
            Plan::Compare { src, .. } | Plan::Carry { src, .. } => src.to_vec(),
            Plan::Shl64 { src, .. } => vec![Src::Row(src), Src::Row(src.saturating_add(1))],
            Plan::Unit { src, .. } => vec![src],
        }
    }

    /// Whether the plan can share a loop over the lane groups with its neighbours
    /// (`Emitter::emit_fused`): a lane-wise operation writing rows, and lane sets other than
    /// EXEC (which the loop reads once).
    pub(super) fn is_fusable(&self) -> bool {
        match *self {
            Plan::Row { .. } | Plan::Shl64 { .. } => true,
            Plan::Compare { dst, .. } => dst != EXEC_LO,
            Plan::Carry { carry, .. } => carry != EXEC_LO,
            Plan::Unit { .. } => false,
        }
    }

    /// The scalar register the plan writes a lane set to, if any.
    pub(super) fn writes_lane_set(&self) -> Option<u8> {
        match *self {
            Plan::Compare { dst: slot, .. } | Plan::Carry { carry: slot, .. } => {
                (slot != NULL).then_some(slot)
            }
            _ => None,
        }
    }

    /// The scalar registers the plan reads: as 32-bit values (sources, shift amounts), or as
    /// lane sets (a select's, a carry-in), `true`.
    pub(super) fn scalar_reads(&self) -> Vec<(u8, bool)> {
        let mut reads: Vec<(u8, bool)> = self
            .sources()
            .iter()
            .filter_map(|s| match s {
                Src::Uniform(Uniform::Sgpr(slot)) => Some((*slot, false)),
                _ => None,
            })
            .collect();
        match *self {
            Plan::Row {
                op: RowOp::Cndmask(Uniform::Sgpr(slot)),
                ..
            }
            | Plan::Carry {
                carry_in: Some(Uniform::Sgpr(slot)),
                ..
            } => reads.push((slot, true)),
            Plan::Shl64 {
                amount: Uniform::Sgpr(slot),
                ..
            } => reads.push((slot, false)),
            _ => {}
        }
        reads
    }

    pub(super) fn is_float(&self) -> bool {
        matches!(
            self,
            Plan::Row {
                op: RowOp::AddF
                    | RowOp::SubF
                    | RowOp::MulF
                    | RowOp::Fma
                    | RowOp::Fmac
                    | RowOp::MinF
                    | RowOp::MaxF,
                ..
            } | Plan::Compare {
                cond: Cond::Float(_) | Cond::FloatLg,
                ..
            }
        )
    }

    /// Highest VGPR row touched, plus one.
    pub(super) fn rows(&self) -> usize {
        let written = match self {
            Plan::Shl64 { .. } => 2,
            _ => 1,
        };
        let mut end = self.writes_row().map_or(0, |r| usize::from(r) + written);
        for src in self.sources() {
            if let Src::Row(r) = src {
                end = end.max(usize::from(r) + 1);
            }
        }
        end
    }
}

fn uniform(operand: Operand) -> Option<Uniform> {
    if let Some(slot) = operand.scalar_slot() {
        return Some(if slot == NULL {
            Uniform::Const(0)
        } else {
            Uniform::Sgpr(slot)
        });
    }
    match operand {
        Operand::InlineInt(v) => Some(Uniform::Const(i32::from(v) as u32)),
        Operand::InlineFloat(v) => Some(Uniform::Const(v.f32_bits())),
        Operand::Literal(v) => Some(Uniform::Const(v)),
        _ => None,
    }
}

fn source(v: &ValuInst, n: usize) -> Option<Src> {
    match v.src_bits[n] {
        0 => Some(Src::Uniform(Uniform::Const(0))),
        // The 24-bit multiplies' factors are fetched as 32-bit values (the operation takes
        // their low 24 bits).
        24 | 32 => match v.src[n] {
            Operand::Vgpr(r) => Some(Src::Row(r)),
            other => uniform(other).map(Src::Uniform),
        },
        _ => None,
    }
}

fn uniform_source(v: &ValuInst, n: usize) -> Option<Uniform> {
    match source(v, n)? {
        Src::Uniform(u) => Some(u),
        Src::Row(_) => None,
    }
}

/// The inlined form of `v`, if it has one (the forms `Wave::valu_fast` takes).
fn plan_valu(v: &ValuInst, fma: bool) -> Option<Plan> {
    if v.dpp.is_some() || v.opsel | v.omod != 0 || v.clamp {
        return None;
    }
    let modifiers = v.abs | v.neg != 0;
    if let Some(compare) = v.compare {
        if v.src_bits[0] != 32 || v.src_bits[1] != 32 {
            return None;
        }
        let to_exec = compare.writes_exec || v.dst == Operand::ExecLo;
        let dst = if to_exec {
            EXEC_LO
        } else {
            v.dst.scalar_slot()?
        };
        use CompareCondition as C;
        let cond = match compare.ty {
            CompareType::I32 | CompareType::U32 if !modifiers => {
                let signed = compare.ty == CompareType::I32;
                Cond::Int(match compare.condition {
                    C::Lt if signed => IntCC::SignedLessThan,
                    C::Lt => IntCC::UnsignedLessThan,
                    C::Le if signed => IntCC::SignedLessThanOrEqual,
                    C::Le => IntCC::UnsignedLessThanOrEqual,
                    C::Gt if signed => IntCC::SignedGreaterThan,
                    C::Gt => IntCC::UnsignedGreaterThan,
                    C::Ge if signed => IntCC::SignedGreaterThanOrEqual,
                    C::Ge => IntCC::UnsignedGreaterThanOrEqual,
                    C::Eq => IntCC::Equal,
                    C::Lg => IntCC::NotEqual,
                    _ => return None,
                })
            }
            CompareType::F32 if compare.condition == C::Lg => Cond::FloatLg,
            CompareType::F32 if compare.condition == C::Class => Cond::Class,
            CompareType::F32 => Cond::Float(match compare.condition {
                C::Lt => FloatCC::LessThan,
                C::Eq => FloatCC::Equal,
                C::Le => FloatCC::LessThanOrEqual,
                C::Gt => FloatCC::GreaterThan,
                C::Ge => FloatCC::GreaterThanOrEqual,
                C::Neq => FloatCC::NotEqual,
                C::Nlt => FloatCC::UnorderedOrGreaterThanOrEqual,
                C::Nge => FloatCC::UnorderedOrLessThan,
                C::Ngt => FloatCC::UnorderedOrLessThanOrEqual,
                C::Nle => FloatCC::UnorderedOrGreaterThan,
                _ => return None,
            }),
            _ => return None,
        };
        return Some(Plan::Compare {
            cond,
            src: [source(v, 0)?, source(v, 1)?],
            dst,
            abs: v.abs,
            neg: v.neg,
        });
    }
    let Operand::Vgpr(dst) = v.dst else {
        return None;
    };
    if v.op == ValuOpcode::Vop3(Vop3Op::V_LSHLREV_B64) {
        let (Operand::Vgpr(src), [32, 64, 0], 64, false) =
            (v.src[1], v.src_bits, v.dst_bits, modifiers)
        else {
            return None;
        };
        return Some(Plan::Shl64 {
            amount: uniform_source(v, 0)?,
            src,
            dst,
        });
    }
    if v.dst_bits != 32 {
        return None;
    }
    if let ValuOpcode::Vop3(op) = v.op {
        if op != Vop3Op::V_SQRT_F32_E64 && f32_unit(op).is_some() {
            return Some(Plan::Unit {
                op,
                src: source(v, 0)?,
                dst,
                abs: v.abs,
                neg: v.neg,
            });
        }
    }
    let src = [source(v, 0)?, source(v, 1)?, source(v, 2)?];
    match v.op {
        ValuOpcode::Vop3(op) => {
            use Vop3Op::*;
            let op = match op {
                V_MOV_B32_E64 => RowOp::Mov,
                V_ADD_F32_E64 => RowOp::AddF,
                V_SUB_F32_E64 => RowOp::SubF,
                V_MUL_F32_E64 => RowOp::MulF,
                V_FMA_F32 if fma => RowOp::Fma,
                V_FMAC_F32_E64 if fma => RowOp::Fmac,
                V_ADD_NC_U32_E64 => RowOp::Add,
                V_SUB_NC_U32_E64 => RowOp::Sub,
                V_ADD3_U32 => RowOp::Add3,
                V_MUL_LO_U32 => RowOp::MulLo,
                V_MUL_U32_U24_E64 => RowOp::MulU24,
                V_MUL_I32_I24_E64 => RowOp::MulI24,
                V_MAD_U32_U24 => RowOp::MadU24,
                V_MAD_I32_I24 => RowOp::MadI24,
                V_AND_B32_E64 => RowOp::And,
                V_OR_B32_E64 => RowOp::Or,
                V_XOR_B32_E64 => RowOp::Xor,
                V_LSHLREV_B32_E64 if uniform_source(v, 0).is_some() => RowOp::ShlRev,
                V_LSHRREV_B32_E64 if uniform_source(v, 0).is_some() => RowOp::ShrRev,
                V_ASHRREV_I32_E64 if uniform_source(v, 0).is_some() => RowOp::AshrRev,
                V_LSHL_ADD_U32 if uniform_source(v, 1).is_some() => RowOp::ShlAdd,
                V_LSHL_OR_B32 if uniform_source(v, 1).is_some() => RowOp::ShlOr,
                V_MIN_I32_E64 => RowOp::MinI,
                V_MAX_I32_E64 => RowOp::MaxI,
                V_MIN_U32_E64 => RowOp::MinU,
                V_MAX_U32_E64 => RowOp::MaxU,
                V_BFE_U32 if uniform_source(v, 1).is_some() && uniform_source(v, 2).is_some() => {
                    RowOp::BfeU
                }
                V_CNDMASK_B32_E64 => RowOp::Cndmask(uniform(v.src[2])?),
                V_MIN_F32_E64 => RowOp::MinF,
                V_SQRT_F32_E64 => RowOp::SqrtF,
                V_MAX_F32_E64 => RowOp::MaxF,
                _ => return None,
            };
            // Sign-bit modifiers on float operations and on the untyped select, as the
            // interpreter applies them to the fetched sources (the accumulator of an FMAC is
            // not a fetched source).
            let modifiers_allowed = match op {
                RowOp::AddF
                | RowOp::SubF
                | RowOp::MulF
                | RowOp::Fma
                | RowOp::MinF
                | RowOp::MaxF
                | RowOp::SqrtF => true,
                RowOp::Fmac | RowOp::Cndmask(_) => (v.abs | v.neg) & 0b100 == 0,
                _ => false,
            };
            if modifiers && !modifiers_allowed {
                return None;
            }
            let src = match op {
                // The mask is not a lane source.
                RowOp::Cndmask(_) => [src[0], src[1], Src::Uniform(Uniform::Const(0))],
                _ => src,
            };
            Some(Plan::Row {
                op,
                dst,
                src,
                abs: v.abs,
                neg: v.neg,
            })
        }
        ValuOpcode::Vop3sd(op) => {
            use Vop3sdOp::*;
            let (subtract, swap, carry_in) = match op {
                V_ADD_CO_U32 => (false, false, None),
                V_SUB_CO_U32 => (true, false, None),
                V_SUBREV_CO_U32 => (true, true, None),
                V_ADD_CO_CI_U32 => (false, false, Some(uniform(v.src[2])?)),
                V_SUB_CO_CI_U32 => (true, false, Some(uniform(v.src[2])?)),
                V_SUBREV_CO_CI_U32 => (true, true, Some(uniform(v.src[2])?)),
                _ => return None,
            };
            if modifiers {
                return None;
            }
            let carry = v.sdst.scalar_slot()?;
            let src = if swap {
                [src[1], src[0]]
            } else {
                [src[0], src[1]]
            };
            Some(Plan::Carry {
                subtract,
                src,
                carry_in,
                dst,
                carry,
            })
        }
    }
}

/// A scalar ALU operation on 32-bit registers or constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum ScalarOp {
    Mov,
    /// SCC = carry out.
    AddU,
    /// SCC = borrow.
    SubU,
    /// SCC = signed overflow.
    AddI,
    SubI,
    /// `a + b + SCC`, SCC = carry out.
    AddcU,
    /// SCC = whether `a` was chosen (strictly).
    MinI,
    MinU,
    MaxI,
    MaxU,
    /// `SCC ? a : b`, SCC kept.
    Cselect,
    /// Bitwise and shifts (by `b & 31`): SCC = result nonzero.
    And,
    Or,
    Xor,
    Lshl,
    Lshr,
    Ashr,
    /// SCC kept.
    MulI,
    /// `(a << n) + b` in 64 bits, SCC = carry out of 32.
    LshlAdd(u8),
    /// SCC = the comparison, no destination.
    Cmp(IntCC),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ScalarPlan {
    pub(super) op: ScalarOp,
    /// Destination slot (NULL discards; ignored by compares).
    pub(super) dst: u8,
    pub(super) a: Uniform,
    pub(super) b: Uniform,
}

/// The inlined form of a scalar instruction, if it has one: 32-bit operations whose sources
/// are registers or constants (as `exec/salu.rs` computes them).
pub(super) fn plan_scalar(inst: &Inst) -> Option<ScalarPlan> {
    use crate::isa::{Sop1Op, Sop2Op, SopcOp};
    let (op, dst, a, b) = match inst {
        Inst::Sop1(i) if i.op == Sop1Op::S_MOV_B32 => (
            ScalarOp::Mov,
            i.sdst.scalar_slot()?,
            uniform(i.ssrc0)?,
            Uniform::Const(0),
        ),
        Inst::Sop2(i) => {
            use Sop2Op::*;
            let op = match i.op {
                S_ADD_U32 => ScalarOp::AddU,
                S_SUB_U32 => ScalarOp::SubU,
                S_ADD_I32 => ScalarOp::AddI,
                S_SUB_I32 => ScalarOp::SubI,
                S_ADDC_U32 => ScalarOp::AddcU,
                S_MIN_I32 => ScalarOp::MinI,
                S_MIN_U32 => ScalarOp::MinU,
                S_MAX_I32 => ScalarOp::MaxI,
                S_MAX_U32 => ScalarOp::MaxU,
                S_CSELECT_B32 => ScalarOp::Cselect,
                S_AND_B32 => ScalarOp::And,
                S_OR_B32 => ScalarOp::Or,
                S_XOR_B32 => ScalarOp::Xor,
                S_LSHL_B32 => ScalarOp::Lshl,
                S_LSHR_B32 => ScalarOp::Lshr,
                S_ASHR_I32 => ScalarOp::Ashr,
                S_MUL_I32 => ScalarOp::MulI,
                S_LSHL1_ADD_U32 => ScalarOp::LshlAdd(1),
                S_LSHL2_ADD_U32 => ScalarOp::LshlAdd(2),
                S_LSHL3_ADD_U32 => ScalarOp::LshlAdd(3),
                S_LSHL4_ADD_U32 => ScalarOp::LshlAdd(4),
                _ => return None,
            };
            (
                op,
                i.sdst.scalar_slot()?,
                uniform(i.ssrc0)?,
                uniform(i.ssrc1)?,
            )
        }
        Inst::Sopc(i) => {
            use SopcOp::*;
            let cc = match i.op {
                S_CMP_EQ_I32 | S_CMP_EQ_U32 => IntCC::Equal,
                S_CMP_LG_I32 | S_CMP_LG_U32 => IntCC::NotEqual,
                S_CMP_GT_I32 => IntCC::SignedGreaterThan,
                S_CMP_GE_I32 => IntCC::SignedGreaterThanOrEqual,
                S_CMP_LT_I32 => IntCC::SignedLessThan,
                S_CMP_LE_I32 => IntCC::SignedLessThanOrEqual,
                S_CMP_GT_U32 => IntCC::UnsignedGreaterThan,
                S_CMP_GE_U32 => IntCC::UnsignedGreaterThanOrEqual,
                S_CMP_LT_U32 => IntCC::UnsignedLessThan,
                S_CMP_LE_U32 => IntCC::UnsignedLessThanOrEqual,
                _ => return None,
            };
            (
                ScalarOp::Cmp(cc),
                NULL,
                uniform(i.ssrc0)?,
                uniform(i.ssrc1)?,
            )
        }
        _ => return None,
    };
    Some(ScalarPlan { op, dst, a, b })
}

/// The first slot of `operand` as a tuple of `count` plain SGPRs (aligned as the hardware
/// wants it, inside the file); anything else is left to the interpreter, which checks it.
fn sgpr_tuple(operand: Operand, count: u8) -> Option<u8> {
    match operand {
        Operand::Sgpr(n)
            if operand.starts_tuple(u32::from(count))
                && usize::from(n) + usize::from(count) <= crate::operand::SGPR_COUNT =>
        {
            Some(n)
        }
        _ => None,
    }
}

/// A 64-bit scalar shift (`s_lshl_b64`, `s_lshr_b64`, `s_ashr_i64`) of a register pair by a
/// 32-bit amount (its low six bits), into a register pair; SCC = result nonzero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Shift64Plan {
    pub(super) op: Shift64,
    pub(super) dst: u8,
    pub(super) src: u8,
    pub(super) amount: Uniform,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Shift64 {
    Left,
    Right,
    RightArithmetic,
}

pub(super) fn plan_shift64(inst: &Inst) -> Option<Shift64Plan> {
    use crate::isa::Sop2Op::*;
    let Inst::Sop2(i) = inst else {
        return None;
    };
    let op = match i.op {
        S_LSHL_B64 => Shift64::Left,
        S_LSHR_B64 => Shift64::Right,
        S_ASHR_I64 => Shift64::RightArithmetic,
        _ => return None,
    };
    Some(Shift64Plan {
        op,
        dst: sgpr_tuple(i.sdst, 2)?,
        src: sgpr_tuple(i.ssrc0, 2)?,
        amount: uniform(i.ssrc1)?,
    })
}

/// A whole-dword global load or store (`global_load_b32`..`_b128`, `global_store_b32`..
/// `_b128`): addresses computed per lane, the span the active lanes touch translated once
/// through `native::translate_span` (if that fails the interpreter runs the instruction and
/// reports what it finds), then each active lane's dwords moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct MemoryPlan {
    pub(super) store: bool,
    pub(super) dwords: u8,
    /// First data VGPR (destination of a load, source of a store).
    pub(super) data: u8,
    /// Address VGPR: a 64-bit pair, or a 32-bit offset with `saddr`.
    pub(super) addr: u8,
    /// Scalar base (an even SGPR pair), if any.
    pub(super) saddr: Option<u8>,
    pub(super) offset: i32,
}

impl MemoryPlan {
    pub(super) fn rows(&self) -> usize {
        let address_rows = if self.saddr.is_some() { 1 } else { 2 };
        (usize::from(self.data) + usize::from(self.dwords))
            .max(usize::from(self.addr) + address_rows)
    }

    /// Whether this is a load into a register `later` takes its address from.
    pub(super) fn loads_address_of(&self, later: &MemoryPlan) -> bool {
        let address_rows = if later.saddr.is_some() { 1 } else { 2 };
        let loaded = self.data..self.data + self.dwords;
        !self.store && (later.addr..later.addr + address_rows).any(|r| loaded.contains(&r))
    }
}

pub(super) fn plan_memory(inst: &Inst) -> Option<MemoryPlan> {
    use crate::decode::{FlatSegment, MemAccess, D16};
    let Inst::Flat(i) = inst else {
        return None;
    };
    if i.segment != FlatSegment::Global {
        return None;
    }
    let (store, bytes, data) = match i.access? {
        MemAccess::Load {
            bytes,
            d16: D16::Full,
            ..
        } => (false, bytes, i.vdst),
        MemAccess::Store {
            bytes,
            high_half: false,
        } => (true, bytes, i.data),
        _ => return None,
    };
    if !matches!(bytes, 4 | 8 | 12 | 16) {
        return None;
    }
    let (Operand::Vgpr(data), Operand::Vgpr(addr)) = (data, i.addr) else {
        return None;
    };
    let saddr = match i.saddr {
        Operand::Null => None,
        other => Some(sgpr_tuple(other, 2)?),
    };
    Some(MemoryPlan {
        store,
        dwords: bytes / 4,
        data,
        addr,
        saddr,
        offset: i.offset,
    })
}

/// The inlined form of a whole instruction: one plan, or a VOPD's two (both read before
/// either writes).
pub(super) fn plan(inst: &Inst, fma: bool) -> Option<Vec<Plan>> {
    let one = |v: Option<&ValuInst>| Some(vec![plan_valu(v?, fma)?]);
    match inst {
        Inst::Vop1(i) => one(i.valu.as_ref()),
        Inst::Vop2(i) => one(i.valu.as_ref()),
        Inst::Vopc(i) => one(i.valu.as_ref()),
        Inst::Vop3(i) => one(Some(&i.valu)),
        Inst::Vop3sd(i) => one(Some(&i.valu)),
        Inst::Vopd(i) => {
            let x = plan_valu(i.x.as_ref()?, fma)?;
            let y = plan_valu(i.y.as_ref()?, fma)?;
            // Two halves writing one register (or writing scalar state) stay with the
            // interpreter, which defines that case.
            match (x.writes_row(), y.writes_row()) {
                (Some(a), Some(b)) if a != b && matches!(x, Plan::Row { .. }) => {
                    matches!(y, Plan::Row { .. }).then_some(vec![x, y])
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// A whole-dword LDS load or store (`ds_load_b32`..`_b128`, `ds_store_b32`..`_b128`): the
/// highest active lane's address checked against the workgroup's LDS once (if any access
/// would fall outside, the interpreter runs the instruction and faults where it does), then
/// each active lane's dwords moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LdsPlan {
    pub(super) store: bool,
    pub(super) dwords: u8,
    /// First data VGPR (destination of a load, source of a store).
    pub(super) data: u8,
    /// Address VGPR (a byte offset into LDS, added to `offset` in 32 bits).
    pub(super) addr: u8,
    pub(super) offset: u32,
}

impl LdsPlan {
    pub(super) fn rows(&self) -> usize {
        (usize::from(self.data) + usize::from(self.dwords)).max(usize::from(self.addr) + 1)
    }
}

pub(super) fn plan_lds(inst: &Inst) -> Option<LdsPlan> {
    use crate::isa::DsOp::*;
    let Inst::Ds(i) = inst else {
        return None;
    };
    if i.gds {
        return None;
    }
    let (store, dwords) = match i.op {
        DS_LOAD_B32 => (false, 1),
        DS_LOAD_B64 => (false, 2),
        DS_LOAD_B96 => (false, 3),
        DS_LOAD_B128 => (false, 4),
        DS_STORE_B32 => (true, 1),
        DS_STORE_B64 => (true, 2),
        DS_STORE_B96 => (true, 3),
        DS_STORE_B128 => (true, 4),
        _ => return None,
    };
    let data = if store { i.data0 } else { i.vdst };
    let (Operand::Vgpr(data), Operand::Vgpr(addr)) = (data, i.addr) else {
        return None;
    };
    Some(LdsPlan {
        store,
        dwords,
        data,
        addr,
        offset: i.offset16(),
    })
}

/// A scalar load (`s_load_b32`..`_b512`) into scalar registers: the address from a register
/// pair, the offset and an optional offset register, translated once (if that fails the
/// interpreter runs the instruction and reports what it finds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ScalarLoadPlan {
    pub(super) dwords: u8,
    /// First destination slot.
    pub(super) sdata: u8,
    /// Base address pair's first slot.
    pub(super) sbase: u8,
    pub(super) offset: i32,
    pub(super) soffset: Option<u8>,
}

pub(super) fn plan_scalar_load(inst: &Inst) -> Option<ScalarLoadPlan> {
    use crate::isa::SmemOp::*;
    let Inst::Smem(i) = inst else {
        return None;
    };
    let dwords = match i.op {
        S_LOAD_B32 => 1,
        S_LOAD_B64 => 2,
        S_LOAD_B128 => 4,
        S_LOAD_B256 => 8,
        S_LOAD_B512 => 16,
        _ => return None,
    };
    let soffset = match i.soffset {
        Operand::Null => None,
        other => Some(sgpr_tuple(other, 1)?),
    };
    Some(ScalarLoadPlan {
        dwords,
        sdata: sgpr_tuple(i.sdata, dwords)?,
        sbase: sgpr_tuple(i.sbase, 2)?,
        offset: i.offset,
        soffset,
    })
}
