//! One block of decoded instructions → one Cranelift function.
//!
//! The function is `extern "C" fn(frame: *mut Frame, helper: usize) -> u32`. Plain VALU
//! operations (the forms `exec/fast.rs` computes) become 128-bit vector code over the VGPR
//! rows, four lanes per vector; every other instruction becomes a call of `helper(frame,
//! index)`, which runs the interpreter on it. A helper answering nonzero ends the block with
//! that answer. Wave state stays in memory (the `Wave`'s register files) between instructions,
//! so the interpreter and the compiled code always see the same registers.
//!
//! What an inlined operation computes is defined by the interpreter: each is inlined only in
//! the operand forms where `Wave::valu_fast` would take it, and computes the same bits.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, Function, InstBuilder, MemFlags, SigRef, Signature, StackSlotData,
    StackSlotKind, UserFuncName, Value,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{control::ControlPlane, Context};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use crate::decode::{CompareCondition, CompareType, Inst, ValuInst};
use crate::exec::{f32_unit, flush_f32, timing_only, WAVE_SIZE};
use crate::isa::{SoppOp, ValuOpcode, Vop3Op, Vop3sdOp};
use crate::operand::{Operand, EXEC_LO, NULL, VCC_LO};

/// Byte offsets of the register-file pointers in `Frame` (`#[repr(C)]`, pointers first).
pub(super) const FRAME_SGPR: i32 = 0;
pub(super) const FRAME_VGPR: i32 = 8;
pub(super) const FRAME_SCC: i32 = 16;

/// What a compiled block answers: it ran to its end, or a helper stopped it (the frame says
/// why), or its last instruction branched to its target, or ended the wave.
pub(super) const FELL_THROUGH: u32 = 0;
pub(super) const STOPPED: u32 = 1;
pub(super) const BRANCHED: u32 = 2;
pub(super) const ENDED: u32 = 3;

const ROW_BYTES: i32 = (WAVE_SIZE * 4) as i32;
const GROUPS: usize = WAVE_SIZE / 4;

/// The vector of lane masks for each 4-bit nibble of EXEC: entry `n` has lane `k` all ones if
/// bit `k` of `n` is set. Read by compiled code at its address.
#[repr(C, align(16))]
pub(super) struct NibbleMasks(pub(super) [[u32; 4]; 16]);

pub(super) static NIBBLE_MASKS: NibbleMasks = {
    let mut table = [[0u32; 4]; 16];
    let mut n = 0;
    while n < 16 {
        let mut k = 0;
        while k < 4 {
            if n >> k & 1 != 0 {
                table[n][k] = u32::MAX;
            }
            k += 1;
        }
        n += 1;
    }
    NibbleMasks(table)
};

/// A 32-bit operand the same for every lane.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Uniform {
    Const(u32),
    Sgpr(u8),
}

/// A 32-bit source.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Src {
    Row(u8),
    Uniform(Uniform),
}

/// A lane-wise operation writing one VGPR row under EXEC.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RowOp {
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
enum Cond {
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
enum Plan {
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

impl Plan {
    fn writes_row(&self) -> Option<u8> {
        match *self {
            Plan::Row { dst, .. }
            | Plan::Carry { dst, .. }
            | Plan::Shl64 { dst, .. }
            | Plan::Unit { dst, .. } => Some(dst),
            Plan::Compare { .. } => None,
        }
    }

    fn sources(&self) -> Vec<Src> {
        match *self {
            Plan::Row { src, .. } => src.to_vec(),
            Plan::Compare { src, .. } | Plan::Carry { src, .. } => src.to_vec(),
            Plan::Shl64 { src, .. } => vec![Src::Row(src), Src::Row(src.saturating_add(1))],
            Plan::Unit { src, .. } => vec![src],
        }
    }

    fn is_float(&self) -> bool {
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
    fn rows(&self) -> usize {
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
        32 => match v.src[n] {
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
enum ScalarOp {
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
struct ScalarPlan {
    op: ScalarOp,
    /// Destination slot (NULL discards; ignored by compares).
    dst: u8,
    a: Uniform,
    b: Uniform,
}

/// The inlined form of a scalar instruction, if it has one: 32-bit operations whose sources
/// are registers or constants (as `exec/salu.rs` computes them).
fn plan_scalar(inst: &Inst) -> Option<ScalarPlan> {
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

/// The inlined form of a whole instruction: one plan, or a VOPD's two (both read before
/// either writes).
fn plan(inst: &Inst, fma: bool) -> Option<Vec<Plan>> {
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

/// What a compiled block needs from the wave it runs on.
pub(super) struct Compiled {
    /// Machine code (position independent, no relocations).
    pub(super) code: Vec<u8>,
    /// VGPR rows the inlined code touches: the wave must have at least this many.
    pub(super) vgpr_rows: usize,
    /// Whether inlined f32 arithmetic assumes MODE keeps f32 denormals.
    pub(super) needs_f32_denormals: bool,
}

/// The host code generator.
pub(super) struct Translator {
    isa: OwnedTargetIsa,
    fma: bool,
}

impl Translator {
    /// A translator for this host, if Cranelift supports it with the vector instructions the
    /// compiled code uses (SSE4.1).
    pub(super) fn for_host() -> Option<Self> {
        if !std::arch::is_x86_feature_detected!("sse4.1") {
            return None;
        }
        let mut flags = settings::builder();
        flags.set("opt_level", "speed").ok()?;
        let isa = cranelift_native::builder()
            .ok()?
            .finish(settings::Flags::new(flags))
            .ok()?;
        Some(Self {
            isa,
            fma: std::arch::is_x86_feature_detected!("fma"),
        })
    }

    /// Compiles a block; `None` if Cranelift refuses it (the block is then interpreted).
    pub(super) fn compile(&self, insts: &[&Inst]) -> Option<Compiled> {
        let pointer = self.isa.pointer_type();
        let mut sig = Signature::new(self.isa.default_call_conv());
        sig.params.push(AbiParam::new(pointer));
        sig.params.push(AbiParam::new(pointer));
        sig.returns.push(AbiParam::new(types::I32));
        let mut func = Function::with_name_signature(UserFuncName::user(0, 0), sig);
        let mut builder_context = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut builder_context);

        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let frame = b.block_params(entry)[0];
        let helper = b.block_params(entry)[1];
        let exit = b.create_block();
        b.append_block_param(exit, types::I32);

        let mut helper_sig = Signature::new(self.isa.default_call_conv());
        helper_sig.params.push(AbiParam::new(pointer));
        helper_sig.params.push(AbiParam::new(types::I32));
        helper_sig.returns.push(AbiParam::new(types::I32));
        let helper_sig = b.import_signature(helper_sig);

        let mut e = Emitter {
            b,
            call_conv: self.isa.default_call_conv(),
            frame,
            helper,
            helper_sig,
            exit,
            sgpr: frame,
            vgpr: frame,
            scc: frame,
            exec_masks: None,
        };
        e.load_register_files();
        let mut vgpr_rows = 0;
        let mut needs_f32_denormals = false;
        for (index, inst) in insts.iter().enumerate() {
            if let Inst::Sopp(i) = inst {
                if timing_only(i.op) {
                    continue;
                }
                if index + 1 == insts.len() && e.block_exit(i.op) {
                    continue;
                }
            }
            if let Some(p) = plan_scalar(inst) {
                e.emit_scalar(p);
                continue;
            }
            match plan(inst, self.fma) {
                Some(plans) => {
                    for p in &plans {
                        vgpr_rows = vgpr_rows.max(p.rows());
                        needs_f32_denormals |= p.is_float();
                    }
                    e.emit(&plans);
                }
                None => e.call_helper(index as u32),
            }
        }
        e.leave(FELL_THROUGH);
        e.b.switch_to_block(e.exit);
        let result = e.b.block_params(e.exit)[0];
        e.b.ins().return_(&[result]);
        e.b.seal_all_blocks();
        e.b.finalize();

        let mut context = Context::for_function(func);
        let compiled = context
            .compile(&*self.isa, &mut ControlPlane::default())
            .ok()?;
        // The code is copied to wherever memory is free: anything it would need patched there
        // (a call to a symbol, an absolute address) makes it unusable.
        if !compiled.buffer.relocs().is_empty() {
            return None;
        }
        Some(Compiled {
            code: compiled.code_buffer().to_vec(),
            vgpr_rows,
            needs_f32_denormals,
        })
    }
}

struct Emitter<'f> {
    b: FunctionBuilder<'f>,
    call_conv: cranelift_codegen::isa::CallConv,
    frame: Value,
    helper: Value,
    helper_sig: SigRef,
    exit: Block,
    /// `*mut u32` to the scalar register file (reloaded after every helper call).
    sgpr: Value,
    /// `*mut u32` to VGPR row 0.
    vgpr: Value,
    /// `*mut bool`: SCC.
    scc: Value,
    /// EXEC as eight lane-mask vectors, while no instruction since has written EXEC.
    exec_masks: Option<[Value; GROUPS]>,
}

fn flags() -> MemFlags {
    MemFlags::trusted()
}

impl Emitter<'_> {
    fn load_register_files(&mut self) {
        let pointer = types::I64;
        self.sgpr = self.b.ins().load(pointer, flags(), self.frame, FRAME_SGPR);
        self.vgpr = self.b.ins().load(pointer, flags(), self.frame, FRAME_VGPR);
        self.scc = self.b.ins().load(pointer, flags(), self.frame, FRAME_SCC);
    }

    /// Returns `answer` from the block.
    fn leave(&mut self, answer: u32) {
        let answer = self.b.ins().iconst(types::I32, i64::from(answer));
        self.b.ins().jump(self.exit, &[answer.into()]);
    }

    /// The block's last instruction as its exit, if it is a branch or `s_endpgm` (anything
    /// else answers `false` and is left to the interpreter).
    fn block_exit(&mut self, op: SoppOp) -> bool {
        use SoppOp::*;
        let taken = match op {
            S_BRANCH | S_ENDPGM => {
                self.leave(if op == S_BRANCH { BRANCHED } else { ENDED });
                // Whatever follows is unreachable; it goes in a block of its own.
                let rest = self.b.create_block();
                self.b.switch_to_block(rest);
                return true;
            }
            S_CBRANCH_SCC0 | S_CBRANCH_SCC1 => {
                let scc = self.b.ins().load(types::I8, flags(), self.scc, 0);
                let cc = if op == S_CBRANCH_SCC1 {
                    IntCC::NotEqual
                } else {
                    IntCC::Equal
                };
                self.b.ins().icmp_imm(cc, scc, 0)
            }
            S_CBRANCH_VCCZ | S_CBRANCH_VCCNZ | S_CBRANCH_EXECZ | S_CBRANCH_EXECNZ => {
                let slot = if matches!(op, S_CBRANCH_VCCZ | S_CBRANCH_VCCNZ) {
                    VCC_LO
                } else {
                    EXEC_LO
                };
                let value = self.scalar(Uniform::Sgpr(slot));
                let cc = if matches!(op, S_CBRANCH_VCCZ | S_CBRANCH_EXECZ) {
                    IntCC::Equal
                } else {
                    IntCC::NotEqual
                };
                self.b.ins().icmp_imm(cc, value, 0)
            }
            _ => return false,
        };
        let branched = self.b.ins().iconst(types::I32, i64::from(BRANCHED));
        let next = self.b.create_block();
        self.b
            .ins()
            .brif(taken, self.exit, &[branched.into()], next, &[]);
        self.b.switch_to_block(next);
        true
    }

    fn emit_scalar(&mut self, p: ScalarPlan) {
        use ScalarOp::*;
        let a = self.scalar(p.a);
        let b = self.scalar(p.b);
        let (value, scc) = match p.op {
            Mov => (Some(a), None),
            AddU => {
                let r = self.b.ins().iadd(a, b);
                (
                    Some(r),
                    Some(self.b.ins().icmp(IntCC::UnsignedLessThan, r, a)),
                )
            }
            SubU => {
                let r = self.b.ins().isub(a, b);
                (
                    Some(r),
                    Some(self.b.ins().icmp(IntCC::UnsignedLessThan, a, b)),
                )
            }
            AddI | SubI => {
                let r = if p.op == AddI {
                    self.b.ins().iadd(a, b)
                } else {
                    self.b.ins().isub(a, b)
                };
                // Signed overflow: the result's sign differs from what the operands' signs
                // allow (for a sum, from both; for a difference, from the minuend's when the
                // operands' signs differ).
                let ra = self.b.ins().bxor(r, a);
                let other = if p.op == AddI {
                    self.b.ins().bxor(r, b)
                } else {
                    self.b.ins().bxor(a, b)
                };
                let both = self.b.ins().band(ra, other);
                (
                    Some(r),
                    Some(self.b.ins().icmp_imm(IntCC::SignedLessThan, both, 0)),
                )
            }
            AddcU | LshlAdd(_) => {
                let x = self.b.ins().uextend(types::I64, a);
                let y = self.b.ins().uextend(types::I64, b);
                let sum = match p.op {
                    LshlAdd(n) => {
                        let shifted = self.b.ins().ishl_imm(x, i64::from(n));
                        self.b.ins().iadd(shifted, y)
                    }
                    _ => {
                        let carry = self.b.ins().load(types::I8, flags(), self.scc, 0);
                        let carry = self.b.ins().uextend(types::I64, carry);
                        let partial = self.b.ins().iadd(x, y);
                        self.b.ins().iadd(partial, carry)
                    }
                };
                let r = self.b.ins().ireduce(types::I32, sum);
                let high = self.b.ins().ushr_imm(sum, 32);
                (
                    Some(r),
                    Some(self.b.ins().icmp_imm(IntCC::NotEqual, high, 0)),
                )
            }
            MinI | MinU | MaxI | MaxU => {
                let cc = match p.op {
                    MinI => IntCC::SignedLessThan,
                    MinU => IntCC::UnsignedLessThan,
                    MaxI => IntCC::SignedGreaterThan,
                    _ => IntCC::UnsignedGreaterThan,
                };
                let chosen = self.b.ins().icmp(cc, a, b);
                (Some(self.b.ins().select(chosen, a, b)), Some(chosen))
            }
            Cselect => {
                let scc = self.b.ins().load(types::I8, flags(), self.scc, 0);
                (Some(self.b.ins().select(scc, a, b)), None)
            }
            And | Or | Xor | Lshl | Lshr | Ashr => {
                let r = match p.op {
                    And => self.b.ins().band(a, b),
                    Or => self.b.ins().bor(a, b),
                    Xor => self.b.ins().bxor(a, b),
                    _ => {
                        let amount = self.b.ins().band_imm(b, 31);
                        match p.op {
                            Lshl => self.b.ins().ishl(a, amount),
                            Lshr => self.b.ins().ushr(a, amount),
                            _ => self.b.ins().sshr(a, amount),
                        }
                    }
                };
                (Some(r), Some(self.b.ins().icmp_imm(IntCC::NotEqual, r, 0)))
            }
            MulI => (Some(self.b.ins().imul(a, b)), None),
            Cmp(cc) => (None, Some(self.b.ins().icmp(cc, a, b))),
        };
        if let Some(value) = value {
            if p.dst != NULL {
                self.store_scalar(p.dst, value);
            }
        }
        if let Some(scc) = scc {
            self.b.ins().store(flags(), scc, self.scc, 0);
        }
    }

    /// `helper(frame, index)`; leaves the block with its answer if nonzero.
    fn call_helper(&mut self, index: u32) {
        let index = self.b.ins().iconst(types::I32, i64::from(index));
        let call = self
            .b
            .ins()
            .call_indirect(self.helper_sig, self.helper, &[self.frame, index]);
        let answer = self.b.inst_results(call)[0];
        let next = self.b.create_block();
        self.b
            .ins()
            .brif(answer, self.exit, &[answer.into()], next, &[]);
        self.b.switch_to_block(next);
        self.load_register_files();
        self.exec_masks = None;
    }

    fn scalar(&mut self, u: Uniform) -> Value {
        match u {
            Uniform::Const(c) => self.b.ins().iconst(types::I32, i64::from(c as i32)),
            Uniform::Sgpr(slot) => {
                self.b
                    .ins()
                    .load(types::I32, flags(), self.sgpr, i32::from(slot) * 4)
            }
        }
    }

    fn store_scalar(&mut self, slot: u8, value: Value) {
        self.b
            .ins()
            .store(flags(), value, self.sgpr, i32::from(slot) * 4);
        if slot == EXEC_LO {
            self.exec_masks = None;
        }
    }

    fn row_offset(row: u8, group: usize) -> i32 {
        i32::from(row) * ROW_BYTES + group as i32 * 16
    }

    fn load_group(&mut self, row: u8, group: usize) -> Value {
        self.b.ins().load(
            types::I32X4,
            flags(),
            self.vgpr,
            Self::row_offset(row, group),
        )
    }

    /// Lane-mask vectors of a 32-bit lane set, one per group of four lanes.
    fn lane_masks(&mut self, set: Value) -> [Value; GROUPS] {
        let table = self
            .b
            .ins()
            .iconst(types::I64, &NIBBLE_MASKS as *const NibbleMasks as i64);
        let wide = self.b.ins().uextend(types::I64, set);
        std::array::from_fn(|g| {
            let shifted = self.b.ins().ushr_imm(wide, (g * 4) as i64);
            let nibble = self.b.ins().band_imm(shifted, 15);
            let offset = self.b.ins().ishl_imm(nibble, 4);
            let at = self.b.ins().iadd(table, offset);
            self.b.ins().load(types::I32X4, flags(), at, 0)
        })
    }

    fn exec_masks(&mut self) -> [Value; GROUPS] {
        if let Some(masks) = self.exec_masks {
            return masks;
        }
        let exec = self
            .b
            .ins()
            .load(types::I32, flags(), self.sgpr, i32::from(EXEC_LO) * 4);
        let masks = self.lane_masks(exec);
        self.exec_masks = Some(masks);
        masks
    }

    fn exec(&mut self) -> Value {
        self.b
            .ins()
            .load(types::I32, flags(), self.sgpr, i32::from(EXEC_LO) * 4)
    }

    /// Per source: the scalar splatted once, with its input modifiers (uniform sources), or
    /// `None` (rows).
    fn splats(&mut self, src: &[Src], modifiers: (u8, u8)) -> Vec<Option<Value>> {
        src.iter()
            .enumerate()
            .map(|(n, s)| match *s {
                Src::Uniform(u) => {
                    let x = self.scalar(u);
                    let x = self.b.ins().splat(types::I32X4, x);
                    Some(self.modify(x, n, modifiers))
                }
                Src::Row(_) => None,
            })
            .collect()
    }

    /// Source `n`'s input modifiers (abs, then neg) applied to its lanes.
    fn modify(&mut self, mut x: Value, n: usize, (abs, neg): (u8, u8)) -> Value {
        if abs >> n & 1 != 0 {
            let magnitude = self.b.ins().iconst(types::I32, 0x7fff_ffff);
            let magnitude = self.b.ins().splat(types::I32X4, magnitude);
            x = self.b.ins().band(x, magnitude);
        }
        if neg >> n & 1 != 0 {
            let sign = self.b.ins().iconst(types::I32, i64::from(i32::MIN));
            let sign = self.b.ins().splat(types::I32X4, sign);
            x = self.b.ins().bxor(x, sign);
        }
        x
    }

    fn group_of(
        &mut self,
        src: Src,
        splat: Option<Value>,
        group: usize,
        n: usize,
        modifiers: (u8, u8),
    ) -> Value {
        match (src, splat) {
            (_, Some(v)) => v,
            (Src::Row(r), None) => {
                let x = self.load_group(r, group);
                self.modify(x, n, modifiers)
            }
            (Src::Uniform(_), None) => unreachable!("uniform sources are splatted"),
        }
    }

    fn float(&mut self, v: Value) -> Value {
        self.b.ins().bitcast(types::F32X4, MemFlags::new(), v)
    }

    fn int(&mut self, v: Value) -> Value {
        self.b.ins().bitcast(types::I32X4, MemFlags::new(), v)
    }

    /// Setup an operation needs once per instruction (uniform scalars).
    fn row_setup(&mut self, op: RowOp, src: &[Src; 3]) -> RowSetup {
        let scalar_of = |s: Src| match s {
            Src::Uniform(u) => u,
            Src::Row(_) => Uniform::Const(0),
        };
        match op {
            RowOp::ShlRev | RowOp::ShrRev | RowOp::AshrRev => {
                let amount = self.scalar(scalar_of(src[0]));
                RowSetup::Amount(self.b.ins().band_imm(amount, 31))
            }
            RowOp::ShlAdd | RowOp::ShlOr => {
                let amount = self.scalar(scalar_of(src[1]));
                RowSetup::Amount(self.b.ins().band_imm(amount, 31))
            }
            RowOp::BfeU => {
                let offset = self.scalar(scalar_of(src[1]));
                let offset = self.b.ins().band_imm(offset, 31);
                let width = self.scalar(scalar_of(src[2]));
                let width = self.b.ins().band_imm(width, 31);
                // (1 << width) - 1 is also right for width 0.
                let one = self.b.ins().iconst(types::I32, 1);
                let bit = self.b.ins().ishl(one, width);
                let mask = self.b.ins().iadd_imm(bit, -1);
                let mask = self.b.ins().splat(types::I32X4, mask);
                RowSetup::Field(offset, mask)
            }
            RowOp::Cndmask(set) => {
                let set = self.scalar(set);
                RowSetup::Masks(self.lane_masks(set))
            }
            _ => RowSetup::None,
        }
    }

    /// One group of `op`'s lanes from its sources' groups and the destination's old group.
    fn row_compute(
        &mut self,
        op: RowOp,
        setup: &RowSetup,
        [a, b, c, dst]: [Value; 4],
        group: usize,
    ) -> Value {
        match op {
            RowOp::Mov => a,
            RowOp::AddF | RowOp::SubF | RowOp::MulF | RowOp::Fma | RowOp::Fmac => {
                let (x, y) = (self.float(a), self.float(b));
                let r = match op {
                    RowOp::AddF => self.b.ins().fadd(x, y),
                    RowOp::SubF => self.b.ins().fsub(x, y),
                    RowOp::MulF => self.b.ins().fmul(x, y),
                    RowOp::Fma => {
                        let z = self.float(c);
                        self.b.ins().fma(x, y, z)
                    }
                    _ => {
                        let z = self.float(dst);
                        self.b.ins().fma(x, y, z)
                    }
                };
                self.int(r)
            }
            RowOp::MinF | RowOp::MaxF => {
                let (x, y) = (self.float(a), self.float(b));
                let (wins, tie) = if op == RowOp::MaxF {
                    let wins = self.b.ins().fcmp(FloatCC::GreaterThan, x, y);
                    // Equal values differ at most in the sign of zero: +0 beats -0.
                    (wins, self.b.ins().band(a, b))
                } else {
                    let wins = self.b.ins().fcmp(FloatCC::LessThan, x, y);
                    (wins, self.b.ins().bor(a, b))
                };
                let equal = self.b.ins().fcmp(FloatCC::Equal, x, y);
                let x_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
                let y_nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
                let r = self.b.ins().bitselect(wins, a, b);
                let r = self.b.ins().bitselect(equal, tie, r);
                let r = self.b.ins().bitselect(y_nan, a, r);
                self.b.ins().bitselect(x_nan, b, r)
            }
            RowOp::SqrtF => {
                let exponent = self.b.ins().iconst(types::I32, 0x7f80_0000);
                let exponent = self.b.ins().splat(types::I32X4, exponent);
                let exponent = self.b.ins().band(a, exponent);
                let zero = self.b.ins().iconst(types::I32, 0);
                let zero = self.b.ins().splat(types::I32X4, zero);
                let tiny = self.b.ins().icmp(IntCC::Equal, exponent, zero);
                let sign = self.b.ins().iconst(types::I32, i64::from(i32::MIN));
                let sign = self.b.ins().splat(types::I32X4, sign);
                let signed_zero = self.b.ins().band(a, sign);
                let flushed = self.b.ins().bitselect(tiny, signed_zero, a);
                let x = self.float(flushed);
                let r = self.b.ins().sqrt(x);
                self.int(r)
            }
            RowOp::Add => self.b.ins().iadd(a, b),
            RowOp::Sub => self.b.ins().isub(a, b),
            RowOp::Add3 => {
                let s = self.b.ins().iadd(a, b);
                self.b.ins().iadd(s, c)
            }
            RowOp::MulLo => self.b.ins().imul(a, b),
            RowOp::And => self.b.ins().band(a, b),
            RowOp::Or => self.b.ins().bor(a, b),
            RowOp::Xor => self.b.ins().bxor(a, b),
            RowOp::MinI => self.b.ins().smin(a, b),
            RowOp::MaxI => self.b.ins().smax(a, b),
            RowOp::MinU => self.b.ins().umin(a, b),
            RowOp::MaxU => self.b.ins().umax(a, b),
            RowOp::ShlRev | RowOp::ShrRev | RowOp::AshrRev | RowOp::ShlAdd | RowOp::ShlOr => {
                let RowSetup::Amount(amount) = *setup else {
                    unreachable!("shifts are set up with their amount")
                };
                match op {
                    RowOp::ShlRev => self.b.ins().ishl(b, amount),
                    RowOp::ShrRev => self.b.ins().ushr(b, amount),
                    RowOp::AshrRev => self.b.ins().sshr(b, amount),
                    RowOp::ShlAdd => {
                        let s = self.b.ins().ishl(a, amount);
                        self.b.ins().iadd(s, c)
                    }
                    _ => {
                        let s = self.b.ins().ishl(a, amount);
                        self.b.ins().bor(s, c)
                    }
                }
            }
            RowOp::BfeU => {
                let RowSetup::Field(offset, mask) = *setup else {
                    unreachable!("bfe is set up with its field")
                };
                let s = self.b.ins().ushr(a, offset);
                self.b.ins().band(s, mask)
            }
            RowOp::Cndmask(_) => {
                let RowSetup::Masks(masks) = *setup else {
                    unreachable!("cndmask is set up with its lane masks")
                };
                self.b.ins().bitselect(masks[group], b, a)
            }
        }
    }

    fn emit(&mut self, plans: &[Plan]) {
        match plans {
            [Plan::Compare {
                cond,
                src,
                dst,
                abs,
                neg,
            }] => self.emit_compare(*cond, *src, *dst, (*abs, *neg)),
            [Plan::Carry {
                subtract,
                src,
                carry_in,
                dst,
                carry,
            }] => self.emit_carry(*subtract, *src, *carry_in, *dst, *carry),
            [Plan::Shl64 { amount, src, dst }] => self.emit_shl64(*amount, *src, *dst),
            [Plan::Unit {
                op,
                src,
                dst,
                abs,
                neg,
            }] => self.emit_unit(*op, *src, *dst, (*abs, *neg)),
            _ => self.emit_rows(plans),
        }
    }

    fn emit_unit(&mut self, op: Vop3Op, src: Src, dst: u8, modifiers: (u8, u8)) {
        let row = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            ROW_BYTES as u32,
            4,
        ));
        let splat = self.splats(&[src], modifiers)[0];
        for g in 0..GROUPS {
            let lanes = self.group_of(src, splat, g, 0, modifiers);
            self.b.ins().stack_store(lanes, row, g as i32 * 16);
        }
        let mut sig = Signature::new(self.call_conv);
        sig.params.push(AbiParam::new(types::I32));
        sig.params.push(AbiParam::new(types::I64));
        let sig = self.b.import_signature(sig);
        let function = self.b.ins().iconst(
            types::I64,
            unit_row as unsafe extern "C" fn(u32, *mut u32) as usize as i64,
        );
        let code = self.b.ins().iconst(types::I32, i64::from(op.code()));
        let at = self.b.ins().stack_addr(types::I64, row, 0);
        self.b.ins().call_indirect(sig, function, &[code, at]);
        let masks = self.exec_masks();
        for (g, &mask) in masks.iter().enumerate() {
            let value = self.b.ins().stack_load(types::I32X4, row, g as i32 * 16);
            let old = self.load_group(dst, g);
            let merged = self.b.ins().bitselect(mask, value, old);
            let offset = Self::row_offset(dst, g);
            self.b.ins().store(flags(), merged, self.vgpr, offset);
        }
    }

    /// `v_lshlrev_b64`: with `s = amount & 63` and `n = s & 31`, below 32 the low half is
    /// `lo << n` and the high half `hi << n | lo >> (32 - n)` (the carry shifted in two steps,
    /// as vector shifts take their amount modulo 32); from 32 on, 0 and `lo << n`.
    fn emit_shl64(&mut self, amount: Uniform, src: u8, dst: u8) {
        let s = self.scalar(amount);
        let s = self.b.ins().band_imm(s, 63);
        let big = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, s, 32);
        let n = self.b.ins().band_imm(s, 31);
        let thirty_one = self.b.ins().iconst(types::I32, 31);
        let back = self.b.ins().isub(thirty_one, n);
        let zero = self.b.ins().iconst(types::I32, 0);
        let zero = self.b.ins().splat(types::I32X4, zero);
        let masks = self.exec_masks();
        for (g, &mask) in masks.iter().enumerate() {
            let lo = self.load_group(src, g);
            let hi = self.load_group(src + 1, g);
            let lo_shifted = self.b.ins().ishl(lo, n);
            let hi_shifted = self.b.ins().ishl(hi, n);
            let carry = self.b.ins().ushr_imm(lo, 1);
            let carry = self.b.ins().ushr(carry, back);
            let joined = self.b.ins().bor(hi_shifted, carry);
            let new_lo = self.b.ins().select(big, zero, lo_shifted);
            let new_hi = self.b.ins().select(big, lo_shifted, joined);
            let old_lo = self.load_group(dst, g);
            let old_hi = self.load_group(dst + 1, g);
            let new_lo = self.b.ins().bitselect(mask, new_lo, old_lo);
            let new_hi = self.b.ins().bitselect(mask, new_hi, old_hi);
            self.b
                .ins()
                .store(flags(), new_lo, self.vgpr, Self::row_offset(dst, g));
            self.b
                .ins()
                .store(flags(), new_hi, self.vgpr, Self::row_offset(dst + 1, g));
        }
    }

    /// Row operations (one, or a VOPD's two): per group of lanes, every source of every
    /// operation is loaded before any result is stored.
    fn emit_rows(&mut self, plans: &[Plan]) {
        // (operation, destination, sources, (abs, neg)) of each plan.
        type RowPlan = (RowOp, u8, [Src; 3], (u8, u8));
        let rows: Vec<RowPlan> = plans
            .iter()
            .map(|p| match *p {
                Plan::Row {
                    op,
                    dst,
                    src,
                    abs,
                    neg,
                } => (op, dst, src, (abs, neg)),
                _ => unreachable!("only row plans are paired"),
            })
            .collect();
        let setups: Vec<RowSetup> = rows
            .iter()
            .map(|(op, _, src, _)| self.row_setup(*op, src))
            .collect();
        let splats: Vec<Vec<Option<Value>>> = rows
            .iter()
            .map(|(_, _, s, modifiers)| self.splats(s, *modifiers))
            .collect();
        let masks = self.exec_masks();
        for (group, &mask) in masks.iter().enumerate() {
            let mut results = Vec::with_capacity(rows.len());
            for (k, (op, dst, src, modifiers)) in rows.iter().enumerate() {
                let a = self.group_of(src[0], splats[k][0], group, 0, *modifiers);
                let b = self.group_of(src[1], splats[k][1], group, 1, *modifiers);
                let c = self.group_of(src[2], splats[k][2], group, 2, *modifiers);
                let old = self.load_group(*dst, group);
                let value = self.row_compute(*op, &setups[k], [a, b, c, old], group);
                let merged = self.b.ins().bitselect(mask, value, old);
                results.push((*dst, merged));
            }
            for (dst, merged) in results {
                let offset = Self::row_offset(dst, group);
                self.b.ins().store(flags(), merged, self.vgpr, offset);
            }
        }
    }

    /// The 32-bit mask of lanes whose vector lane is all ones (or has its sign bit set).
    fn mask_bits(&mut self, groups: [Value; GROUPS]) -> Value {
        let mut mask = self.b.ins().iconst(types::I32, 0);
        for (g, v) in groups.into_iter().enumerate() {
            let bits = self.b.ins().vhigh_bits(types::I32, v);
            let bits = self.b.ins().ishl_imm(bits, (g * 4) as i64);
            mask = self.b.ins().bor(mask, bits);
        }
        mask
    }

    fn emit_compare(&mut self, cond: Cond, src: [Src; 2], dst: u8, modifiers: (u8, u8)) {
        let splats = self.splats(&src, modifiers);
        let lanes: [Value; GROUPS] = std::array::from_fn(|g| {
            let a = self.group_of(src[0], splats[0], g, 0, modifiers);
            let b = self.group_of(src[1], splats[1], g, 1, modifiers);
            match cond {
                Cond::Int(cc) => self.b.ins().icmp(cc, a, b),
                Cond::Float(cc) => {
                    let (x, y) = (self.float(a), self.float(b));
                    self.b.ins().fcmp(cc, x, y)
                }
                Cond::FloatLg => {
                    let (x, y) = (self.float(a), self.float(b));
                    let below = self.b.ins().fcmp(FloatCC::LessThan, x, y);
                    let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, y);
                    self.b.ins().bor(below, above)
                }
                Cond::Class => self.class_test(a, b),
            }
        });
        let mask = self.mask_bits(lanes);
        let exec = self.exec();
        let mask = self.b.ins().band(mask, exec);
        if dst != NULL {
            self.store_scalar(dst, mask);
        }
    }

    /// Lanes (all ones) whose float `x` is of a class in the mask `classes`.
    fn class_test(&mut self, x: Value, classes: Value) -> Value {
        let splat = |e: &mut Self, c: u32| {
            let c = e.b.ins().iconst(types::I32, i64::from(c as i32));
            e.b.ins().splat(types::I32X4, c)
        };
        let zero = splat(self, 0);
        let magnitude_mask = splat(self, 0x7fff_ffff);
        let magnitude = self.b.ins().band(x, magnitude_mask);
        let infinity = splat(self, 0x7f80_0000);
        let negative = self.b.ins().icmp(IntCC::SignedLessThan, x, zero);
        let positive = self.b.ins().bnot(negative);
        let nan = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, magnitude, infinity);
        let quiet_bit = splat(self, 0x0040_0000);
        let quiet = self.b.ins().band(x, quiet_bit);
        let quiet = self.b.ins().icmp(IntCC::NotEqual, quiet, zero);
        let signalling = self.b.ins().bnot(quiet);
        let inf = self.b.ins().icmp(IntCC::Equal, magnitude, infinity);
        let is_zero = self.b.ins().icmp(IntCC::Equal, magnitude, zero);
        // Denormal: 0 < magnitude < 2^-126, i.e. magnitude - 1 below the largest denormal.
        let one = splat(self, 1);
        let below = self.b.ins().isub(magnitude, one);
        let largest_denormal = splat(self, 0x007f_ffff);
        let denormal = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThan, below, largest_denormal);
        // Normal: 2^-126 <= magnitude < inf.
        let smallest_normal = splat(self, 0x0080_0000);
        let offset = self.b.ins().isub(magnitude, smallest_normal);
        let span = splat(self, 0x7f80_0000 - 0x0080_0000);
        let normal = self.b.ins().icmp(IntCC::UnsignedLessThan, offset, span);
        let cases: [(Value, Value, u32); 10] = [
            (nan, signalling, 0),
            (nan, quiet, 1),
            (inf, negative, 2),
            (normal, negative, 3),
            (denormal, negative, 4),
            (is_zero, negative, 5),
            (is_zero, positive, 6),
            (denormal, positive, 7),
            (normal, positive, 8),
            (inf, positive, 9),
        ];
        let mut result = zero;
        for (class, qualifier, bit) in cases {
            let bit_value = splat(self, 1 << bit);
            let wanted = self.b.ins().band(classes, bit_value);
            let wanted = self.b.ins().icmp(IntCC::NotEqual, wanted, zero);
            let hit = self.b.ins().band(class, wanted);
            let hit = self.b.ins().band(hit, qualifier);
            result = self.b.ins().bor(result, hit);
        }
        result
    }

    fn emit_carry(
        &mut self,
        subtract: bool,
        src: [Src; 2],
        carry_in: Option<Uniform>,
        dst: u8,
        carry: u8,
    ) {
        let splats = self.splats(&src, (0, 0));
        let carry_in = carry_in.map(|u| {
            let set = self.scalar(u);
            self.lane_masks(set)
        });
        let masks = self.exec_masks();
        let carries: [Value; GROUPS] = std::array::from_fn(|g| {
            let x = self.group_of(src[0], splats[0], g, 0, (0, 0));
            let y = self.group_of(src[1], splats[1], g, 1, (0, 0));
            // `cin` is all ones (-1) in lanes whose carry-in bit is set.
            let cin = carry_in.map(|masks| masks[g]);
            let (value, out) = if subtract {
                let below = self.b.ins().icmp(IntCC::UnsignedLessThan, x, y);
                let t = self.b.ins().isub(x, y);
                match cin {
                    None => (t, below),
                    Some(cin) => {
                        let zero = self.b.ins().iconst(types::I32, 0);
                        let zero = self.b.ins().splat(types::I32X4, zero);
                        let zero = self.b.ins().icmp(IntCC::Equal, t, zero);
                        let wraps = self.b.ins().band(zero, cin);
                        let value = self.b.ins().iadd(t, cin);
                        (value, self.b.ins().bor(below, wraps))
                    }
                }
            } else {
                let t = self.b.ins().iadd(x, y);
                let wrapped = self.b.ins().icmp(IntCC::UnsignedLessThan, t, x);
                match cin {
                    None => (t, wrapped),
                    Some(cin) => {
                        let value = self.b.ins().isub(t, cin);
                        let again = self.b.ins().icmp(IntCC::UnsignedLessThan, value, t);
                        (value, self.b.ins().bor(wrapped, again))
                    }
                }
            };
            let old = self.load_group(dst, g);
            let merged = self.b.ins().bitselect(masks[g], value, old);
            let offset = Self::row_offset(dst, g);
            self.b.ins().store(flags(), merged, self.vgpr, offset);
            out
        });
        if carry != NULL {
            let bits = self.mask_bits(carries);
            let exec = self.exec();
            let bits = self.b.ins().band(bits, exec);
            self.store_scalar(carry, bits);
        }
    }
}

/// Computes the f32 transcendental-unit operation `code` (a `Vop3Op`) over a row in place,
/// as the interpreter does: input flushed, the operation, result flushed.
///
/// # Safety
/// `lanes` points to 32 writable `u32`s.
unsafe extern "C" fn unit_row(code: u32, lanes: *mut u32) {
    let Some(unit) = Vop3Op::from_u32(code).and_then(f32_unit) else {
        return;
    };
    // SAFETY: the caller's contract; compiled code passes its own stack row.
    let lanes = unsafe { &mut *lanes.cast::<[u32; WAVE_SIZE]>() };
    for lane in lanes.iter_mut() {
        *lane = flush_f32(unit(f32::from_bits(flush_f32(*lane))).to_bits());
    }
}

enum RowSetup {
    None,
    Amount(Value),
    Field(Value, Value),
    Masks([Value; GROUPS]),
}
