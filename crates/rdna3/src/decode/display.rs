//! LLVM-style assembly text for decoded instructions (`v_add_f32_e32 v1, v2, v3`).

use std::fmt::{self, Write as _};

use super::symbolic;
use super::*;
use crate::operand::InlineFloat;

fn has(specs: &'static [OperandSpec], name: &str) -> bool {
    operand_spec(specs, name).is_some()
}

/// An operand as LLVM prints it, spanning `dwords` registers. Differs from the operand's own
/// `Display` where LLVM's printer depends on the operand position: literals of 64-bit operands
/// are zero-extended (`0xffffffff`, never `-1`), 1/(2π) of a 64-bit operand has a double's
/// digits, and SCC as a source is `src_scc`.
struct Src(Operand, u32);

impl fmt::Display for Src {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Operand::Scc => f.write_str("src_scc"),
            Operand::InlineFloat(InlineFloat::InvTwoPi) if self.1 >= 2 => {
                f.write_str("0.15915494309189532")
            }
            Operand::Literal(v) if self.1 >= 2 && v > 64 => write!(f, "{v:#x}"),
            other => other.display_wide(self.1).fmt(f),
        }
    }
}

fn wide(operand: Operand, dwords: u32) -> Src {
    Src(operand, dwords)
}

/// DPP16 source modifiers `(neg, abs)` of a 32-bit VALU encoding (kept in its canonical form).
fn dpp_modifiers(valu: Option<&ValuInst>) -> (u8, u8) {
    valu.filter(|v| v.dpp.is_some())
        .map_or((0, 0), |v| (v.neg, v.abs))
}

/// A 16-bit register half in true16 syntax: VGPR field bit 7 selects the high half (`v1.h`).
fn half_register(operand: Operand) -> String {
    match operand {
        Operand::Vgpr(n) if n >= 128 => format!("v{}.h", n - 128),
        Operand::Vgpr(n) => format!("v{n}.l"),
        other => wide(other, 1).to_string(),
    }
}

/// `0x10` / `-0x10`.
fn signed_hex(value: i32) -> String {
    if value < 0 {
        format!("-{:#x}", value.unsigned_abs())
    } else {
        format!("{value:#x}")
    }
}

/// Writes a comma-separated operand list after the mnemonic.
struct OperandList<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    first: bool,
}

impl<'a, 'b> OperandList<'a, 'b> {
    fn new(f: &'a mut fmt::Formatter<'b>, mnemonic: &str) -> Result<Self, fmt::Error> {
        f.write_str(mnemonic)?;
        Ok(Self { f, first: true })
    }
    fn push(&mut self, item: impl fmt::Display) -> fmt::Result {
        let separator = if self.first { " " } else { ", " };
        self.first = false;
        write!(self.f, "{separator}{item}")
    }
    fn suffix(&mut self, text: impl fmt::Display) -> fmt::Result {
        write!(self.f, " {text}")
    }
}

/// Mnemonic of a 32-bit VALU encoding as LLVM prints it: `_e32` only where a VOP3 form exists,
/// `_dpp` for DPP forms.
fn short_valu_mnemonic(name: &'static str, promoted: bool, dpp: bool) -> String {
    let base = name.strip_suffix("_e32").unwrap_or(name);
    if dpp {
        format!("{base}_dpp")
    } else if promoted && base != "v_readfirstlane_b32" && base != "v_nop" {
        name.to_string()
    } else {
        base.to_string()
    }
}

/// Formats a source with VOP3 modifiers.
fn with_modifiers(operand: Operand, dwords: u32, neg: bool, abs: bool) -> String {
    let mut text = wide(operand, dwords).to_string();
    if abs {
        text = format!("|{text}|");
    }
    if neg {
        text = format!("-{text}");
    }
    text
}

fn dpp_suffix(dpp: &Dpp) -> String {
    match *dpp {
        Dpp::Dpp16 {
            ctrl,
            row_mask,
            bank_mask,
            bound_ctrl,
            fetch_inactive,
        } => {
            let control = match ctrl {
                0x000..=0x0ff => {
                    let sel = |i: u16| (ctrl >> (2 * i)) & 3;
                    format!("quad_perm:[{},{},{},{}]", sel(0), sel(1), sel(2), sel(3))
                }
                0x101..=0x10f => format!("row_shl:{}", ctrl & 0xf),
                0x111..=0x11f => format!("row_shr:{}", ctrl & 0xf),
                0x121..=0x12f => format!("row_ror:{}", ctrl & 0xf),
                0x140 => "row_mirror".to_string(),
                0x141 => "row_half_mirror".to_string(),
                0x150..=0x15f => format!("row_share:{}", ctrl & 0xf),
                0x160..=0x16f => format!("row_xmask:{}", ctrl & 0xf),
                other => format!("dpp_ctrl:{other:#x}"),
            };
            let mut text = format!("{control} row_mask:{row_mask:#x} bank_mask:{bank_mask:#x}");
            if bound_ctrl {
                text.push_str(" bound_ctrl:1");
            }
            if fetch_inactive {
                text.push_str(" fi:1");
            }
            text
        }
        Dpp::Dpp8 {
            selects,
            fetch_inactive,
        } => {
            let mut text = String::from("dpp8:[");
            for (i, s) in selects.iter().enumerate() {
                let _ = write!(text, "{}{s}", if i == 0 { "" } else { "," });
            }
            text.push(']');
            if fetch_inactive {
                text.push_str(" fi:1");
            }
            text
        }
    }
}

fn vop3_suffixes(
    list: &mut OperandList<'_, '_>,
    opsel: u8,
    clamp: bool,
    omod: u8,
    src_count: usize,
) -> fmt::Result {
    if opsel != 0 {
        let mut text = String::from("op_sel:[");
        for i in 0..src_count {
            let _ = write!(text, "{},", (opsel >> i) & 1);
        }
        let _ = write!(text, "{}]", (opsel >> 3) & 1);
        list.suffix(text)?;
    }
    if clamp {
        list.suffix("clamp")?;
    }
    match omod {
        1 => list.suffix("mul:2"),
        2 => list.suffix("mul:4"),
        3 => list.suffix("div:2"),
        _ => Ok(()),
    }
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Inst::Sop1(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                if has(specs, "sdst") {
                    list.push(wide(i.sdst, spec_dwords(specs, "sdst")))?;
                }
                let message = matches!(i.op, Sop1Op::S_SENDMSG_RTN_B32 | Sop1Op::S_SENDMSG_RTN_B64)
                    .then(|| symbolic::source_field(i.ssrc0))
                    .flatten();
                if let Some(id) = message {
                    list.push(symbolic::sendmsg(id))?;
                } else if has(specs, "ssrc0") {
                    list.push(wide(i.ssrc0, spec_dwords(specs, "ssrc0")))?;
                }
                Ok(())
            }
            Inst::Sop2(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                list.push(wide(i.sdst, spec_dwords(specs, "sdst")))?;
                list.push(wide(i.ssrc0, spec_dwords(specs, "ssrc0")))?;
                list.push(wide(i.ssrc1, spec_dwords(specs, "ssrc1")))
            }
            Inst::Sopk(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                match i.op {
                    SopkOp::S_VERSION => list.push(symbolic::version(i.simm16)),
                    SopkOp::S_SETREG_B32 => {
                        list.push(symbolic::hwreg(i.simm16))?;
                        list.push(wide(i.sdst, 1))
                    }
                    SopkOp::S_SETREG_IMM32_B32 => {
                        list.push(symbolic::hwreg(i.simm16))?;
                        list.push(Operand::Literal(i.literal.unwrap_or(0)))
                    }
                    _ => {
                        let loop_op = matches!(
                            i.op,
                            SopkOp::S_SUBVECTOR_LOOP_BEGIN | SopkOp::S_SUBVECTOR_LOOP_END
                        );
                        if has(specs, "sdst") || loop_op {
                            list.push(wide(i.sdst, spec_dwords(specs, "sdst")))?;
                        }
                        match i.op {
                            SopkOp::S_GETREG_B32 => list.push(symbolic::hwreg(i.simm16)),
                            // Branch-like offsets print as unsigned decimal.
                            SopkOp::S_CALL_B64
                            | SopkOp::S_SUBVECTOR_LOOP_BEGIN
                            | SopkOp::S_SUBVECTOR_LOOP_END => list.push(i.simm16),
                            _ => list.push(format_args!("{:#x}", i.simm16)),
                        }
                    }
                }
            }
            Inst::Sopc(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                list.push(wide(i.ssrc0, spec_dwords(specs, "ssrc0")))?;
                list.push(wide(i.ssrc1, spec_dwords(specs, "ssrc1")))
            }
            Inst::Sopp(i) => {
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                let imm = i.simm16;
                match i.op {
                    SoppOp::S_ENDPGM if imm == 0 => Ok(()),
                    SoppOp::S_ENDPGM_SAVED
                    | SoppOp::S_ENDPGM_ORDERED_PS_DONE
                    | SoppOp::S_WAIT_IDLE
                    | SoppOp::S_WAKEUP
                    | SoppOp::S_TTRACEDATA
                    | SoppOp::S_ICACHE_INV
                    | SoppOp::S_BARRIER
                    | SoppOp::S_CODE_END => Ok(()),
                    // Branch offsets and the s_endpgm code: unsigned decimal.
                    SoppOp::S_ENDPGM
                    | SoppOp::S_BRANCH
                    | SoppOp::S_CBRANCH_SCC0
                    | SoppOp::S_CBRANCH_SCC1
                    | SoppOp::S_CBRANCH_VCCZ
                    | SoppOp::S_CBRANCH_VCCNZ
                    | SoppOp::S_CBRANCH_EXECZ
                    | SoppOp::S_CBRANCH_EXECNZ
                    | SoppOp::S_CBRANCH_CDBGSYS
                    | SoppOp::S_CBRANCH_CDBGUSER
                    | SoppOp::S_CBRANCH_CDBGSYS_OR_USER
                    | SoppOp::S_CBRANCH_CDBGSYS_AND_USER => list.push(imm),
                    SoppOp::S_WAITCNT => list.push(symbolic::waitcnt(imm)),
                    SoppOp::S_WAITCNT_DEPCTR => list.push(symbolic::depctr(imm)),
                    SoppOp::S_DELAY_ALU => list.push(symbolic::delay_alu(imm)),
                    SoppOp::S_SENDMSG | SoppOp::S_SENDMSGHALT => list.push(symbolic::sendmsg(imm)),
                    SoppOp::S_SET_INST_PREFETCH_DISTANCE
                    | SoppOp::S_CLAUSE
                    | SoppOp::S_WAIT_EVENT
                    | SoppOp::S_ROUND_MODE
                    | SoppOp::S_TTRACEDATA_IMM => list.push(format_args!("{imm:#x}")),
                    _ => list.push(symbolic::imm16(imm)),
                }
            }
            Inst::Smem(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                if matches!(i.op, SmemOp::S_GL1_INV | SmemOp::S_DCACHE_INV) {
                    return Ok(());
                }
                if matches!(i.op, SmemOp::S_ATC_PROBE | SmemOp::S_ATC_PROBE_BUFFER) {
                    // The SDATA field holds the probe's mode bits, not a register.
                    list.push(symbolic::source_field(i.sdata).unwrap_or(0))?;
                } else if has(specs, "sdata") {
                    list.push(wide(i.sdata, spec_dwords(specs, "sdata")))?;
                }
                if has(specs, "sbase") {
                    list.push(wide(i.sbase, spec_dwords(specs, "sbase")))?;
                }
                if i.soffset != Operand::Null {
                    list.push(i.soffset)?;
                    if i.offset != 0 {
                        list.suffix(format_args!("offset:{}", signed_hex(i.offset)))?;
                    }
                } else if i.offset != 0 {
                    list.push(signed_hex(i.offset))?;
                } else {
                    list.push("null")?;
                }
                if i.glc {
                    list.suffix("glc")?;
                }
                if i.dlc {
                    list.suffix("dlc")?;
                }
                Ok(())
            }
            Inst::Vop1(i) => {
                let name = short_valu_mnemonic(
                    i.op.mnemonic(),
                    i.op.promoted().is_some(),
                    i.dpp.is_some(),
                );
                let mut list = OperandList::new(f, &name)?;
                let (dst_words, src_words) = match &i.valu {
                    Some(v) => (
                        (u32::from(v.dst_bits) / 32).max(1),
                        (u32::from(v.src_bits[0]) / 32).max(1),
                    ),
                    None => (1, 1),
                };
                if matches!(i.op, Vop1Op::V_MOV_B16_E32 | Vop1Op::V_SWAP_B16_E32) {
                    // True16 syntax (LLVM 19 prints v_mov_b16 so and cannot disassemble
                    // v_swap_b16): VGPR bit 7 selects the half.
                    list.push(half_register(i.vdst))?;
                    list.push(half_register(i.src0))?;
                } else if i.op != Vop1Op::V_NOP_E32 {
                    list.push(wide(i.vdst, dst_words))?;
                    let (neg, abs) = dpp_modifiers(i.valu.as_ref());
                    list.push(with_modifiers(
                        i.src0,
                        src_words,
                        neg & 1 != 0,
                        abs & 1 != 0,
                    ))?;
                }
                if let Some(dpp) = &i.dpp {
                    list.suffix(dpp_suffix(dpp))?;
                }
                Ok(())
            }
            Inst::Vop2(i) => {
                let name = short_valu_mnemonic(
                    i.op.mnemonic(),
                    i.op.promoted().is_some(),
                    i.dpp.is_some(),
                );
                let mut list = OperandList::new(f, &name)?;
                list.push(i.vdst)?;
                let carry = matches!(
                    i.op,
                    Vop2Op::V_ADD_CO_CI_U32_E32
                        | Vop2Op::V_SUB_CO_CI_U32_E32
                        | Vop2Op::V_SUBREV_CO_CI_U32_E32
                );
                if carry {
                    list.push("vcc_lo")?;
                }
                let (neg, abs) = dpp_modifiers(i.valu.as_ref());
                list.push(with_modifiers(i.src0, 1, neg & 1 != 0, abs & 1 != 0))?;
                if i.op == Vop2Op::V_FMAMK_F32_E32 || i.op == Vop2Op::V_FMAMK_F16_E32 {
                    list.push(format_args!("{:#x}", i.constant.unwrap_or(0)))?;
                }
                list.push(with_modifiers(i.vsrc1, 1, neg & 2 != 0, abs & 2 != 0))?;
                if i.op == Vop2Op::V_FMAAK_F32_E32 || i.op == Vop2Op::V_FMAAK_F16_E32 {
                    list.push(format_args!("{:#x}", i.constant.unwrap_or(0)))?;
                }
                if carry || i.op == Vop2Op::V_CNDMASK_B32_E32 {
                    list.push("vcc_lo")?;
                }
                if let Some(dpp) = &i.dpp {
                    list.suffix(dpp_suffix(dpp))?;
                }
                Ok(())
            }
            Inst::Vopc(i) => {
                // LLVM 19 prints DPP compares without a suffix (`v_cmp_lt_f32 vcc_lo, ...`).
                let name = match i.dpp {
                    Some(_) => {
                        i.op.mnemonic()
                            .strip_suffix("_e32")
                            .unwrap_or(i.op.mnemonic())
                            .to_string()
                    }
                    None => short_valu_mnemonic(i.op.mnemonic(), true, false),
                };
                let mut list = OperandList::new(f, &name)?;
                let src_words = |n: usize| {
                    i.valu
                        .as_ref()
                        .map_or(1, |v| (u32::from(v.src_bits[n]) / 32).max(1))
                };
                if !i.op.mnemonic().starts_with("v_cmpx_") {
                    list.push("vcc_lo")?;
                }
                let (neg, abs) = dpp_modifiers(i.valu.as_ref());
                list.push(with_modifiers(
                    i.src0,
                    src_words(0),
                    neg & 1 != 0,
                    abs & 1 != 0,
                ))?;
                list.push(with_modifiers(
                    i.vsrc1,
                    src_words(1),
                    neg & 2 != 0,
                    abs & 2 != 0,
                ))?;
                if let Some(dpp) = &i.dpp {
                    list.suffix(dpp_suffix(dpp))?;
                }
                Ok(())
            }
            Inst::Vop3(i) => {
                let name = match i.dpp {
                    Some(_) => format!(
                        "{}_e64_dpp",
                        i.op.mnemonic()
                            .strip_suffix("_e64")
                            .unwrap_or(i.op.mnemonic())
                    ),
                    None => i.op.mnemonic().to_string(),
                };
                let mut list = OperandList::new(f, &name)?;
                let v = &i.valu;
                if !i.op.mnemonic().starts_with("v_cmpx_") && has(i.op.operands(), "vdst") {
                    list.push(wide(i.vdst, (u32::from(v.dst_bits) / 32).max(1)))?;
                }
                let mut count = 0;
                for (n, src) in i.src.iter().enumerate() {
                    if v.src_bits[n] == 0 {
                        continue;
                    }
                    count += 1;
                    let words = (u32::from(v.src_bits[n]) / 32).max(1);
                    list.push(with_modifiers(
                        *src,
                        words,
                        (i.neg >> n) & 1 != 0,
                        (i.abs >> n) & 1 != 0,
                    ))?;
                }
                vop3_suffixes(&mut list, i.opsel, i.clamp, i.omod, count)?;
                if let Some(dpp) = &i.dpp {
                    list.suffix(dpp_suffix(dpp))?;
                }
                Ok(())
            }
            Inst::Vop3sd(i) => {
                // Carry-in ops also have a VOP2 form, so LLVM names this one `_e64`.
                let name = if matches!(
                    i.op,
                    Vop3sdOp::V_ADD_CO_CI_U32
                        | Vop3sdOp::V_SUB_CO_CI_U32
                        | Vop3sdOp::V_SUBREV_CO_CI_U32
                ) {
                    format!("{}_e64", i.op.mnemonic())
                } else {
                    i.op.mnemonic().to_string()
                };
                let mut list = OperandList::new(f, &name)?;
                let v = &i.valu;
                list.push(wide(i.vdst, (u32::from(v.dst_bits) / 32).max(1)))?;
                list.push(i.sdst)?;
                for (n, src) in i.src.iter().enumerate() {
                    if v.src_bits[n] == 0 {
                        continue;
                    }
                    let words = (u32::from(v.src_bits[n]) / 32).max(1);
                    list.push(with_modifiers(*src, words, (i.neg >> n) & 1 != 0, false))?;
                }
                vop3_suffixes(&mut list, 0, i.clamp, i.omod, 0)
            }
            Inst::Vop3p(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                list.push(wide(i.vdst, spec_dwords(specs, "vdst")))?;
                // Mixed-precision FMAs use neg/neg_hi as per-source neg/abs modifiers and
                // default op_sel_hi to 0; packed and dot ops print them as lists.
                let mix = i.op.mnemonic().starts_with("v_fma_mix");
                let mut count = 0;
                for (n, name) in ["src0", "src1", "src2"].iter().enumerate() {
                    if has(specs, name) {
                        count += 1;
                        let (neg, abs) = if mix {
                            ((i.neg >> n) & 1 != 0, (i.neg_hi >> n) & 1 != 0)
                        } else {
                            (false, false)
                        };
                        list.push(with_modifiers(i.src[n], spec_dwords(specs, name), neg, abs))?;
                    }
                }
                let bits = |mask: u8| {
                    (0..count)
                        .map(|n| ((mask >> n) & 1).to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let all = (1u8 << count) - 1;
                if i.opsel & all != 0 {
                    list.suffix(format_args!("op_sel:[{}]", bits(i.opsel)))?;
                }
                let default_hi = if mix { 0 } else { all };
                if i.opsel_hi & all != default_hi {
                    list.suffix(format_args!("op_sel_hi:[{}]", bits(i.opsel_hi)))?;
                }
                if !mix && i.neg & all != 0 {
                    list.suffix(format_args!("neg_lo:[{}]", bits(i.neg)))?;
                }
                if !mix && i.neg_hi & all != 0 {
                    list.suffix(format_args!("neg_hi:[{}]", bits(i.neg_hi)))?;
                }
                if i.clamp {
                    list.suffix("clamp")?;
                }
                Ok(())
            }
            Inst::Vopd(i) => {
                write_dual_half(f, i.opx, i.vdstx, i.srcx, i.literal)?;
                f.write_str(" :: ")?;
                write_dual_half(f, i.opy, i.vdsty, i.srcy, i.literal)
            }
            Inst::Ds(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                if has(specs, "vdst") {
                    list.push(wide(i.vdst, spec_dwords(specs, "vdst")))?;
                }
                if has(specs, "addr") {
                    list.push(i.addr)?;
                }
                if has(specs, "data0") {
                    list.push(wide(i.data0, spec_dwords(specs, "data0")))?;
                }
                if has(specs, "data1") {
                    list.push(wide(i.data1, spec_dwords(specs, "data1")))?;
                }
                if i.op == DsOp::DS_SWIZZLE_B32 {
                    if let Some(text) =
                        symbolic::swizzle(u16::from(i.offset0) | (u16::from(i.offset1) << 8))
                    {
                        list.suffix(text)?;
                    }
                } else if i.op.mnemonic().contains("2addr") {
                    if i.offset0 != 0 {
                        list.suffix(format_args!("offset0:{}", i.offset0))?;
                    }
                    if i.offset1 != 0 {
                        list.suffix(format_args!("offset1:{}", i.offset1))?;
                    }
                } else if i.offset16() != 0 {
                    list.suffix(format_args!("offset:{}", i.offset16()))?;
                }
                if i.gds {
                    list.suffix("gds")?;
                }
                Ok(())
            }
            Inst::Flat(i) => {
                let specs = i.op.operands();
                let mnemonic = i.op.mnemonic();
                let mut list = OperandList::new(f, mnemonic)?;
                let is_atomic = mnemonic.contains("_atomic_");
                if has(specs, "vdst") && (!is_atomic || i.glc) {
                    // Compare-swap returns one value although its data is a {new, compare} pair.
                    let returned = if mnemonic.contains("_cmpswap_") {
                        spec_dwords(specs, "data") / 2
                    } else {
                        spec_dwords(specs, "vdst")
                    };
                    list.push(wide(i.vdst, returned.max(1)))?;
                }
                let uses_saddr = i.segment != FlatSegment::Flat && i.saddr != Operand::Null;
                match i.segment {
                    // The lane id is the address.
                    _ if mnemonic.contains("_addtid_") => {}
                    FlatSegment::Scratch if !i.sve => list.push("off")?,
                    FlatSegment::Scratch => list.push(i.addr)?,
                    _ if uses_saddr => list.push(i.addr)?,
                    _ => list.push(wide(i.addr, 2))?,
                }
                if has(specs, "data") {
                    list.push(wide(i.data, spec_dwords(specs, "data")))?;
                }
                match i.segment {
                    FlatSegment::Flat => {}
                    FlatSegment::Global if uses_saddr => list.push(wide(i.saddr, 2))?,
                    FlatSegment::Scratch if i.saddr != Operand::Null => list.push(i.saddr)?,
                    _ => list.push("off")?,
                }
                if i.offset != 0 {
                    list.suffix(format_args!("offset:{}", i.offset))?;
                }
                if i.glc {
                    list.suffix("glc")?;
                }
                if i.slc {
                    list.suffix("slc")?;
                }
                if i.dlc {
                    list.suffix("dlc")?;
                }
                Ok(())
            }
            Inst::Buffer(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                if !has(specs, "srsrc") {
                    // Cache invalidations have no operands.
                    return Ok(());
                }
                if has(specs, "vdata") {
                    let status = u32::from(i.tfe);
                    list.push(wide(i.vdata, spec_dwords(specs, "vdata") + status))?;
                }
                match i.vaddr_dwords() {
                    0 => list.push("off")?,
                    n => list.push(wide(i.vaddr, n as u32))?,
                }
                list.push(wide(i.srsrc, 4))?;
                list.push(i.soffset)?;
                if let Some(code) = i.format.filter(|&code| code != DEFAULT_FORMAT) {
                    match BufferFormat::from_code(code) {
                        Some(format) => list.suffix(format_args!("format:[{}]", format.name()))?,
                        None if code == 0 => list.suffix("format:[BUF_FMT_INVALID]")?,
                        None => list.suffix(format_args!("format:{code}"))?,
                    }
                }
                for (set, name) in [(i.idxen, "idxen"), (i.offen, "offen")] {
                    if set {
                        list.suffix(name)?;
                    }
                }
                if i.offset != 0 {
                    list.suffix(format_args!("offset:{}", i.offset))?;
                }
                for (set, name) in [
                    (i.glc, "glc"),
                    (i.slc, "slc"),
                    (i.dlc, "dlc"),
                    (i.tfe, "tfe"),
                ] {
                    if set {
                        list.suffix(name)?;
                    }
                }
                Ok(())
            }
            Inst::Other(i) => f.write_str(i.mnemonic),
        }
    }
}

fn write_dual_half(
    f: &mut fmt::Formatter<'_>,
    op: VopdOp,
    vdst: Operand,
    src: [Operand; 2],
    literal: Option<u32>,
) -> fmt::Result {
    let mut list = OperandList::new(f, op.mnemonic())?;
    list.push(vdst)?;
    list.push(src[0])?;
    let k = format!("{:#x}", literal.unwrap_or(0));
    match op {
        VopdOp::V_DUAL_MOV_B32 => Ok(()),
        VopdOp::V_DUAL_FMAMK_F32 => {
            list.push(&k)?;
            list.push(src[1])
        }
        VopdOp::V_DUAL_FMAAK_F32 => {
            list.push(src[1])?;
            list.push(&k)
        }
        _ => list.push(src[1]),
    }
}
