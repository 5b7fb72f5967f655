//! Decoding of the vector ALU encodings (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOP3P, VOPD) and
//! their lowering to the canonical [`ValuInst`].

use super::{
    field, llvm_decodes, require_llvm_operands, DecodeError, Decoded, Inst, Reader, Vop1, Vop2,
    Vop3, Vop3p, Vop3sd, Vopc, Vopd,
};
use crate::isa::*;
use crate::operand::{Operand, SRC_DPP16, SRC_DPP8, SRC_DPP8_FI, SRC_LITERAL};

/// Data-parallel primitives control: how source 0 is fetched from other lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dpp {
    /// DPP16: row-based permutations/shifts.
    Dpp16 {
        /// The 9-bit DPP_CTRL (quad_perm, row_shl, row_shr, row_ror, row_mirror, ...).
        ctrl: u16,
        /// Rows (of 16 lanes) that write results.
        row_mask: u8,
        /// Banks (of 4 lanes within a row) that write results.
        bank_mask: u8,
        /// Out-of-range source lanes read 0 (instead of disabling the lane).
        bound_ctrl: bool,
        /// Fetch from inactive lanes.
        fetch_inactive: bool,
    },
    /// DPP8: arbitrary permutation within each group of 8 lanes.
    Dpp8 {
        /// Source lane (0..8) for each lane of a group.
        selects: [u8; 8],
        /// Fetch from inactive lanes.
        fetch_inactive: bool,
    },
}

/// A vector ALU operation in canonical form: what the executor runs for every VALU encoding.
#[derive(Clone, Debug, PartialEq)]
pub struct ValuInst {
    /// The operation (VOP3 / VOP3SD numbering).
    pub op: ValuOpcode,
    /// Destination: a VGPR, or a scalar register for compares / lane reads.
    pub dst: Operand,
    /// Scalar carry/flag destination of VOP3SD operations (`Null` otherwise).
    pub sdst: Operand,
    /// Sources; unused ones are `Null`.
    pub src: [Operand; 3],
    /// Width in bits of each source (16, 32, 64; 0 if unused).
    pub src_bits: [u8; 3],
    /// Whether each source is a float (chooses inline-constant and literal encoding).
    pub src_float: [bool; 3],
    /// Width of the destination.
    pub dst_bits: u8,
    /// Whether the destination is a float (clamp and output modifiers apply).
    pub dst_float: bool,
    /// For compares: the condition and operand type, parsed from the mnemonic.
    pub compare: Option<Compare>,
    /// Absolute-value modifier bits.
    pub abs: u8,
    /// Negate modifier bits.
    pub neg: u8,
    /// Operand-select bits.
    pub opsel: u8,
    /// Output modifier.
    pub omod: u8,
    /// Clamp.
    pub clamp: bool,
    /// DPP control applied to source 0.
    pub dpp: Option<Dpp>,
}

/// Condition of a vector compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareCondition {
    /// Always false.
    False,
    /// `<`
    Lt,
    /// `==`
    Eq,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `<>` (floats: ordered and not equal; integers: not equal)
    Lg,
    /// `>=`
    Ge,
    /// Ordered (neither is NaN).
    O,
    /// Unordered (either is NaN).
    U,
    /// not `>=`
    Nge,
    /// not `<>`
    Nlg,
    /// not `>`
    Ngt,
    /// not `<=`
    Nle,
    /// not `==`
    Neq,
    /// not `<`
    Nlt,
    /// Always true.
    True,
    /// Float class test against a mask of classes.
    Class,
}

/// Operand type of a vector compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareType {
    /// half
    F16,
    /// float
    F32,
    /// double
    F64,
    /// signed 16-bit
    I16,
    /// unsigned 16-bit
    U16,
    /// signed 32-bit
    I32,
    /// unsigned 32-bit
    U32,
    /// signed 64-bit
    I64,
    /// unsigned 64-bit
    U64,
}

/// A vector compare (`v_cmp_*` / `v_cmpx_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compare {
    /// Condition.
    pub condition: CompareCondition,
    /// Operand type.
    pub ty: CompareType,
    /// `v_cmpx_*`: the result is written to EXEC.
    pub writes_exec: bool,
}

impl Compare {
    /// Parses `v_cmp[x]_<cond>_<type>[_e32|_e64]`.
    pub fn parse(mnemonic: &str) -> Option<Compare> {
        let (rest, writes_exec) = if let Some(rest) = mnemonic.strip_prefix("v_cmpx_") {
            (rest, true)
        } else {
            (mnemonic.strip_prefix("v_cmp_")?, false)
        };
        let rest = rest
            .strip_suffix("_e64")
            .or_else(|| rest.strip_suffix("_e32"))
            .unwrap_or(rest);
        let (condition, ty) = rest.split_once('_')?;
        let condition = match condition {
            "f" => CompareCondition::False,
            "lt" => CompareCondition::Lt,
            "eq" => CompareCondition::Eq,
            "le" => CompareCondition::Le,
            "gt" => CompareCondition::Gt,
            "lg" | "ne" => CompareCondition::Lg,
            "ge" => CompareCondition::Ge,
            "o" => CompareCondition::O,
            "u" => CompareCondition::U,
            "nge" => CompareCondition::Nge,
            "nlg" => CompareCondition::Nlg,
            "ngt" => CompareCondition::Ngt,
            "nle" => CompareCondition::Nle,
            "neq" => CompareCondition::Neq,
            "nlt" => CompareCondition::Nlt,
            "t" => CompareCondition::True,
            "class" => CompareCondition::Class,
            _ => return None,
        };
        let ty = match ty {
            "f16" => CompareType::F16,
            "f32" => CompareType::F32,
            "f64" => CompareType::F64,
            "i16" => CompareType::I16,
            "u16" => CompareType::U16,
            "i32" => CompareType::I32,
            "u32" => CompareType::U32,
            "i64" => CompareType::I64,
            "u64" => CompareType::U64,
            _ => return None,
        };
        Some(Compare {
            condition,
            ty,
            writes_exec,
        })
    }
}

/// Source modifiers of a VALU instruction.
#[derive(Clone, Copy, Default)]
struct Modifiers {
    abs: u8,
    neg: u8,
    opsel: u8,
    omod: u8,
    clamp: bool,
}

fn spec_bits(specs: &'static [OperandSpec], name: &str) -> (u8, bool) {
    match operand_spec(specs, name) {
        Some(spec) => {
            // Lane masks (`num_m64`) are one SGPR in wave32.
            let bits = if spec.format == "num_m64" {
                32
            } else {
                spec.bits.min(255) as u8
            };
            (bits, spec.is_float())
        }
        None => (0, false),
    }
}

fn build(
    op: ValuOpcode,
    dst: Operand,
    sdst: Operand,
    src: [Operand; 3],
    mods: Modifiers,
    dpp: Option<Dpp>,
) -> ValuInst {
    let specs = op.operands();
    let mut src_bits = [0u8; 3];
    let mut src_float = [false; 3];
    for (i, name) in ["src0", "src1", "src2"].iter().enumerate() {
        // One-source VOP3 forms name their source `vsrc0` in the ISA data.
        let (bits, float) = match spec_bits(specs, name) {
            (0, _) if i == 0 => spec_bits(specs, "vsrc0"),
            found => found,
        };
        src_bits[i] = bits;
        src_float[i] = float;
    }
    let (dst_bits, dst_float) = spec_bits(specs, "vdst");
    ValuInst {
        op,
        dst_float,
        compare: Compare::parse(op.mnemonic()),
        dst,
        sdst,
        src,
        src_bits,
        src_float,
        dst_bits,
        abs: mods.abs,
        neg: mods.neg,
        opsel: mods.opsel,
        omod: mods.omod,
        clamp: mods.clamp,
        dpp,
    }
}

/// Whether the VOP3 opcode's destination field names a scalar register.
fn scalar_destination(op: ValuOpcode) -> bool {
    operand_spec(op.operands(), "vdst").is_some_and(|spec| matches!(spec.kind, "sreg" | "sdst"))
}

fn is_cmpx(op: ValuOpcode) -> bool {
    op.mnemonic().starts_with("v_cmpx_")
}

/// Decodes the DPP dword that follows a VALU encoding; returns the control and the VGPR that
/// replaces source 0, plus DPP16's source-0/1 neg/abs bits (as `(neg, abs)` masks).
fn decode_dpp(marker: u16, word: u32) -> (Dpp, Operand, u8, u8) {
    let raw = u64::from(word);
    let vsrc0 = Operand::Vgpr(field(raw, 7, 0) as u8);
    if marker == SRC_DPP16 {
        let dpp = Dpp::Dpp16 {
            ctrl: field(raw, 16, 8) as u16,
            fetch_inactive: field(raw, 18, 18) != 0,
            bound_ctrl: field(raw, 19, 19) != 0,
            bank_mask: field(raw, 27, 24) as u8,
            row_mask: field(raw, 31, 28) as u8,
        };
        let neg = (field(raw, 20, 20) | (field(raw, 22, 22) << 1)) as u8;
        let abs = (field(raw, 21, 21) | (field(raw, 23, 23) << 1)) as u8;
        (dpp, vsrc0, neg, abs)
    } else {
        let mut selects = [0u8; 8];
        for (i, select) in selects.iter_mut().enumerate() {
            let lo = 8 + 3 * i as u32;
            *select = field(raw, lo + 2, lo) as u8;
        }
        (
            Dpp::Dpp8 {
                selects,
                fetch_inactive: marker == SRC_DPP8_FI,
            },
            vsrc0,
            0,
            0,
        )
    }
}

fn is_dpp_marker(src: u16) -> bool {
    matches!(src, SRC_DPP16 | SRC_DPP8 | SRC_DPP8_FI)
}

/// Decodes VOP1, VOP2 and VOPC (32-bit encodings, optionally followed by a literal or DPP dword).
pub(super) fn decode_short(
    reader: &Reader<'_>,
    encoding: Encoding,
) -> Result<Decoded, DecodeError> {
    let first = reader.word(0)?;
    let raw = u64::from(first);
    let undecodable = DecodeError::Undecodable { word: first };
    let src0_field = field(raw, 8, 0) as u16;
    let always_literal = |op: Vop2Op| {
        matches!(
            op,
            Vop2Op::V_FMAAK_F32_E32
                | Vop2Op::V_FMAMK_F32_E32
                | Vop2Op::V_FMAAK_F16_E32
                | Vop2Op::V_FMAMK_F16_E32
        )
    };
    let vop2_op = if encoding == Encoding::Vop2 {
        Some(Vop2Op::from_u32(field(raw, 30, 25)).ok_or(undecodable)?)
    } else {
        None
    };
    let needs_literal = src0_field == SRC_LITERAL || vop2_op.is_some_and(always_literal);
    let (literal, dpp_word, words) = if is_dpp_marker(src0_field) {
        (None, Some(reader.word(1)?), 2)
    } else if needs_literal {
        (Some(reader.word(1)?), None, 2)
    } else {
        (None, None, 1)
    };
    let mut mods = Modifiers::default();
    let (src0, dpp) = match dpp_word {
        Some(word) => {
            let (dpp, vsrc0, neg, abs) = decode_dpp(src0_field, word);
            mods.neg = neg;
            mods.abs = abs;
            (vsrc0, Some(dpp))
        }
        None => (Operand::from_src(src0_field, literal), None),
    };
    let vsrc1 = Operand::Vgpr(field(raw, 16, 9) as u8);
    let vdst_field = field(raw, 24, 17) as u8;
    let inst = match encoding {
        Encoding::Vop1 => {
            let op = Vop1Op::from_u32(field(raw, 16, 9)).ok_or(undecodable)?;
            let promoted = op.promoted();
            let vdst = match promoted {
                Some(p) if scalar_destination(p) => Operand::from_sreg(vdst_field),
                _ => Operand::Vgpr(vdst_field),
            };
            let valu = promoted.map(|p| {
                build(
                    p,
                    vdst,
                    Operand::Null,
                    [src0, Operand::Null, Operand::Null],
                    mods,
                    dpp,
                )
            });
            Inst::Vop1(Vop1 {
                op,
                vdst,
                src0,
                dpp,
                valu,
            })
        }
        Encoding::Vop2 => {
            let op = vop2_op.ok_or(undecodable)?;
            let vdst = Operand::Vgpr(vdst_field);
            let constant = if always_literal(op) { literal } else { None };
            let k = Operand::Literal(constant.unwrap_or(0));
            let none = Operand::Null;
            let valu = match op {
                Vop2Op::V_FMAAK_F32_E32 => Some(build(
                    ValuOpcode::Vop3(Vop3Op::V_FMA_F32),
                    vdst,
                    none,
                    [src0, vsrc1, k],
                    mods,
                    dpp,
                )),
                Vop2Op::V_FMAMK_F32_E32 => Some(build(
                    ValuOpcode::Vop3(Vop3Op::V_FMA_F32),
                    vdst,
                    none,
                    [src0, k, vsrc1],
                    mods,
                    dpp,
                )),
                Vop2Op::V_FMAAK_F16_E32 => Some(build(
                    ValuOpcode::Vop3(Vop3Op::V_FMA_F16),
                    vdst,
                    none,
                    [src0, vsrc1, k],
                    mods,
                    dpp,
                )),
                Vop2Op::V_FMAMK_F16_E32 => Some(build(
                    ValuOpcode::Vop3(Vop3Op::V_FMA_F16),
                    vdst,
                    none,
                    [src0, k, vsrc1],
                    mods,
                    dpp,
                )),
                _ => op.promoted().map(|p| {
                    // Implicit VCC operands of the 32-bit encoding become explicit.
                    let uses_vcc_in = matches!(
                        op,
                        Vop2Op::V_CNDMASK_B32_E32
                            | Vop2Op::V_ADD_CO_CI_U32_E32
                            | Vop2Op::V_SUB_CO_CI_U32_E32
                            | Vop2Op::V_SUBREV_CO_CI_U32_E32
                    );
                    let src2 = if uses_vcc_in { Operand::VccLo } else { none };
                    let sdst = if matches!(p, ValuOpcode::Vop3sd(_)) {
                        Operand::VccLo
                    } else {
                        none
                    };
                    build(p, vdst, sdst, [src0, vsrc1, src2], mods, dpp)
                }),
            };
            Inst::Vop2(Vop2 {
                op,
                vdst,
                src0,
                vsrc1,
                constant,
                dpp,
                valu,
            })
        }
        _ => {
            let op = VopcOp::from_u32(field(raw, 24, 17)).ok_or(undecodable)?;
            let valu = op.promoted().map(|p| {
                let dst = if is_cmpx(p) {
                    Operand::ExecLo
                } else {
                    Operand::VccLo
                };
                build(
                    p,
                    dst,
                    Operand::Null,
                    [src0, vsrc1, Operand::Null],
                    mods,
                    dpp,
                )
            });
            Inst::Vopc(Vopc {
                op,
                src0,
                vsrc1,
                dpp,
                valu,
            })
        }
    };
    let valu = match &inst {
        Inst::Vop1(i) => i.valu.as_ref(),
        Inst::Vop2(i) => i.valu.as_ref(),
        Inst::Vopc(i) => i.valu.as_ref(),
        _ => None,
    };
    let sources_decode = match valu {
        Some(valu) => llvm_decodes_valu(valu),
        None => llvm_decodes(src0, 1),
    };
    if !sources_decode {
        return Err(undecodable);
    }
    Ok(Decoded { inst, words })
}

/// Whether LLVM decodes `valu`: its destination, every source it reads at the width it reads
/// it, and no DPP form of an operation with a 64-bit operand (gfx11 has DPP for 32-bit and
/// narrower data only).
fn llvm_decodes_valu(valu: &ValuInst) -> bool {
    let used = || {
        valu.src
            .iter()
            .zip(valu.src_bits)
            .filter(|&(_, bits)| bits > 0)
    };
    let wide = valu.dst_bits >= 64 || used().any(|(_, bits)| bits >= 64);
    !(valu.dpp.is_some() && wide)
        && llvm_decodes(valu.dst, 1)
        && used().all(|(&src, bits)| llvm_decodes(src, (u32::from(bits) / 32).max(1)))
}

/// Sources of a VOP3-family instruction, DPP control with its DPP16 (neg, abs) source bits,
/// and the instruction length in dwords.
type Vop3Sources = ([Operand; 3], Option<(Dpp, u8, u8)>, usize);

/// Reads the three 9-bit sources of a VOP3/VOP3SD/VOP3P word pair and the optional literal or
/// DPP dword. Returns sources, DPP info (with src0 replaced) and the instruction length.
fn vop3_sources(reader: &Reader<'_>, raw: u64) -> Result<Vop3Sources, DecodeError> {
    let fields = [
        field(raw, 40, 32) as u16,
        field(raw, 49, 41) as u16,
        field(raw, 58, 50) as u16,
    ];
    if is_dpp_marker(fields[0]) {
        let (dpp, vsrc0, neg, abs) = decode_dpp(fields[0], reader.word(2)?);
        let src = [
            vsrc0,
            Operand::from_src(fields[1], None),
            Operand::from_src(fields[2], None),
        ];
        return Ok((src, Some((dpp, neg, abs)), 3));
    }
    let (literal, words) = if fields.contains(&SRC_LITERAL) {
        (Some(reader.word(2)?), 3)
    } else {
        (None, 2)
    };
    let src = fields.map(|f| Operand::from_src(f, literal));
    Ok((src, None, words))
}

/// Decodes the VOP3 encoding, which also carries VOP3SD opcodes.
pub(super) fn decode_vop3(reader: &Reader<'_>) -> Result<Decoded, DecodeError> {
    let raw = reader.qword()?;
    let number = field(raw, 25, 16);
    let undecodable = DecodeError::Undecodable { word: raw as u32 };
    let (src, dpp_info, words) = vop3_sources(reader, raw)?;
    let dpp = dpp_info.map(|(d, _, _)| d);
    let neg = field(raw, 63, 61) as u8;
    let omod = field(raw, 60, 59) as u8;
    let clamp = field(raw, 15, 15) != 0;
    let vdst_field = field(raw, 7, 0) as u8;
    if let Some(op) = Vop3sdOp::from_u32(number) {
        let vdst = Operand::Vgpr(vdst_field);
        let sdst = Operand::from_sreg(field(raw, 14, 8) as u8);
        let mods = Modifiers {
            neg,
            omod,
            clamp,
            ..Modifiers::default()
        };
        let valu = build(ValuOpcode::Vop3sd(op), vdst, sdst, src, mods, dpp);
        if !llvm_decodes_valu(&valu) {
            return Err(undecodable);
        }
        let inst = Vop3sd {
            op,
            vdst,
            sdst,
            src,
            neg,
            omod,
            clamp,
            dpp,
            valu,
        };
        return Ok(Decoded {
            inst: Inst::Vop3sd(inst),
            words,
        });
    }
    let op = Vop3Op::from_u32(number).ok_or(undecodable)?;
    let canonical = ValuOpcode::Vop3(op);
    let vdst = if is_cmpx(canonical) {
        Operand::ExecLo
    } else if scalar_destination(canonical) {
        Operand::from_src(u16::from(vdst_field), None)
    } else {
        Operand::Vgpr(vdst_field)
    };
    let abs = field(raw, 10, 8) as u8;
    let opsel = field(raw, 14, 11) as u8;
    let mods = Modifiers {
        abs,
        neg,
        opsel,
        omod,
        clamp,
    };
    let valu = build(canonical, vdst, Operand::Null, src, mods, dpp);
    if !llvm_decodes_valu(&valu) {
        return Err(undecodable);
    }
    let inst = Vop3 {
        op,
        vdst,
        src,
        abs,
        neg,
        opsel,
        omod,
        clamp,
        dpp,
        valu,
    };
    Ok(Decoded {
        inst: Inst::Vop3(inst),
        words,
    })
}

/// Decodes VOP3P (packed math).
pub(super) fn decode_vop3p(reader: &Reader<'_>) -> Result<Decoded, DecodeError> {
    let raw = reader.qword()?;
    let undecodable = DecodeError::Undecodable { word: raw as u32 };
    let op = Vop3pOp::from_u32(field(raw, 22, 16)).ok_or(undecodable)?;
    let (src, dpp_info, words) = vop3_sources(reader, raw)?;
    require_llvm_operands(
        raw as u32,
        op.operands(),
        &[("src0", src[0]), ("src1", src[1]), ("src2", src[2])],
    )?;
    let inst = Vop3p {
        op,
        vdst: Operand::Vgpr(field(raw, 7, 0) as u8),
        src,
        neg: field(raw, 63, 61) as u8,
        neg_hi: field(raw, 10, 8) as u8,
        opsel: field(raw, 13, 11) as u8,
        opsel_hi: (field(raw, 60, 59) | (field(raw, 14, 14) << 2)) as u8,
        clamp: field(raw, 15, 15) != 0,
        dpp: dpp_info.map(|(d, _, _)| d),
    };
    Ok(Decoded {
        inst: Inst::Vop3p(inst),
        words,
    })
}

/// Lowers one half of a VOPD instruction.
fn lower_dual(
    op: VopdOp,
    dst: Operand,
    src0: Operand,
    vsrc1: Operand,
    literal: Option<u32>,
) -> Option<ValuInst> {
    let none = Operand::Null;
    let mods = Modifiers::default();
    let k = Operand::Literal(literal.unwrap_or(0));
    let fma = ValuOpcode::Vop3(Vop3Op::V_FMA_F32);
    match op {
        VopdOp::V_DUAL_FMAAK_F32 => Some(build(fma, dst, none, [src0, vsrc1, k], mods, None)),
        VopdOp::V_DUAL_FMAMK_F32 => Some(build(fma, dst, none, [src0, k, vsrc1], mods, None)),
        VopdOp::V_DUAL_CNDMASK_B32 => op
            .promoted()
            .map(|p| build(p, dst, none, [src0, vsrc1, Operand::VccLo], mods, None)),
        VopdOp::V_DUAL_MOV_B32 => op
            .promoted()
            .map(|p| build(p, dst, none, [src0, none, none], mods, None)),
        _ => op
            .promoted()
            .map(|p| build(p, dst, none, [src0, vsrc1, none], mods, None)),
    }
}

/// Decodes VOPD (dual issue).
pub(super) fn decode_vopd(reader: &Reader<'_>) -> Result<Decoded, DecodeError> {
    let raw = reader.qword()?;
    let undecodable = DecodeError::Undecodable { word: raw as u32 };
    let opx = VopdOp::from_u32(field(raw, 25, 22)).ok_or(undecodable)?;
    let opy = VopdOp::from_u32(field(raw, 21, 17)).ok_or(undecodable)?;
    let srcx0 = field(raw, 8, 0) as u16;
    let srcy0 = field(raw, 40, 32) as u16;
    let uses_k = |op: VopdOp| matches!(op, VopdOp::V_DUAL_FMAAK_F32 | VopdOp::V_DUAL_FMAMK_F32);
    let needs_literal = srcx0 == SRC_LITERAL || srcy0 == SRC_LITERAL || uses_k(opx) || uses_k(opy);
    let (literal, words) = if needs_literal {
        (Some(reader.word(2)?), 3)
    } else {
        (None, 2)
    };
    let vdstx_field = field(raw, 63, 56) as u8;
    let vdstx = Operand::Vgpr(vdstx_field);
    let vdsty = Operand::Vgpr(((field(raw, 55, 49) << 1) as u8) | ((vdstx_field & 1) ^ 1));
    let srcx = [
        Operand::from_src(srcx0, literal),
        Operand::Vgpr(field(raw, 16, 9) as u8),
    ];
    let srcy = [
        Operand::from_src(srcy0, literal),
        Operand::Vgpr(field(raw, 48, 41) as u8),
    ];
    if !llvm_decodes(srcx[0], 1) || !llvm_decodes(srcy[0], 1) {
        return Err(undecodable);
    }
    let x = lower_dual(opx, vdstx, srcx[0], srcx[1], literal);
    let y = lower_dual(opy, vdsty, srcy[0], srcy[1], literal);
    let inst = Vopd {
        opx,
        opy,
        vdstx,
        vdsty,
        srcx,
        srcy,
        literal,
        x,
        y,
    };
    Ok(Decoded {
        inst: Inst::Vopd(inst),
        words,
    })
}
