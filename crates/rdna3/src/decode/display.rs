//! LLVM-style assembly text for decoded instructions (`v_add_f32_e32 v1, v2, v3`).

use std::fmt::{self, Write as _};

use super::*;

fn dwords(specs: &'static [OperandSpec], name: &str) -> u32 {
    operand_spec(specs, name).map_or(1, |spec| (u32::from(spec.bits) / 32).max(1))
}

fn has(specs: &'static [OperandSpec], name: &str) -> bool {
    operand_spec(specs, name).is_some()
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
    let mut text = operand.display_wide(dwords).to_string();
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
                    list.push(i.sdst.display_wide(dwords(specs, "sdst")))?;
                }
                if has(specs, "ssrc0") {
                    list.push(i.ssrc0.display_wide(dwords(specs, "ssrc0")))?;
                }
                Ok(())
            }
            Inst::Sop2(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                list.push(i.sdst.display_wide(dwords(specs, "sdst")))?;
                list.push(i.ssrc0.display_wide(dwords(specs, "ssrc0")))?;
                list.push(i.ssrc1.display_wide(dwords(specs, "ssrc1")))
            }
            Inst::Sopk(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                if has(specs, "sdst") {
                    list.push(i.sdst.display_wide(dwords(specs, "sdst")))?;
                }
                list.push(format_args!("{:#x}", i.simm16))?;
                if let Some(literal) = i.literal {
                    list.push(format_args!("{literal:#x}"))?;
                }
                Ok(())
            }
            Inst::Sopc(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                list.push(i.ssrc0.display_wide(dwords(specs, "ssrc0")))?;
                list.push(i.ssrc1.display_wide(dwords(specs, "ssrc1")))
            }
            Inst::Sopp(i) => {
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                match i.op {
                    SoppOp::S_ENDPGM
                    | SoppOp::S_BARRIER
                    | SoppOp::S_ICACHE_INV
                    | SoppOp::S_CODE_END
                        if i.simm16 == 0 =>
                    {
                        Ok(())
                    }
                    SoppOp::S_NOP
                    | SoppOp::S_BRANCH
                    | SoppOp::S_CBRANCH_SCC0
                    | SoppOp::S_CBRANCH_SCC1
                    | SoppOp::S_CBRANCH_VCCZ
                    | SoppOp::S_CBRANCH_VCCNZ
                    | SoppOp::S_CBRANCH_EXECZ
                    | SoppOp::S_CBRANCH_EXECNZ
                    | SoppOp::S_SLEEP => list.push(i.simm16),
                    SoppOp::S_WAITCNT => {
                        // gfx11 layout: vmcnt 15:10, lgkmcnt 9:4, expcnt 2:0; fields at their
                        // maximum (no wait) are omitted.
                        let (vm, lgkm, exp) = (
                            (i.simm16 >> 10) & 0x3f,
                            (i.simm16 >> 4) & 0x3f,
                            i.simm16 & 7,
                        );
                        let mut parts = Vec::new();
                        if vm != 0x3f {
                            parts.push(format!("vmcnt({vm})"));
                        }
                        if exp != 7 {
                            parts.push(format!("expcnt({exp})"));
                        }
                        if lgkm != 0x3f {
                            parts.push(format!("lgkmcnt({lgkm})"));
                        }
                        if parts.is_empty() {
                            list.push(format_args!("{:#x}", i.simm16))
                        } else {
                            list.push(parts.join(" "))
                        }
                    }
                    _ => list.push(format_args!("{:#x}", i.simm16)),
                }
            }
            Inst::Smem(i) => {
                let specs = i.op.operands();
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                if has(specs, "sdata") {
                    list.push(i.sdata.display_wide(dwords(specs, "sdata")))?;
                }
                if has(specs, "sbase") {
                    list.push(i.sbase.display_wide(dwords(specs, "sbase")))?;
                }
                if i.soffset != Operand::Null {
                    list.push(i.soffset)?;
                    if i.offset != 0 {
                        list.suffix(format_args!("offset:{:#x}", i.offset))?;
                    }
                } else if i.offset != 0 {
                    list.push(format_args!("{:#x}", i.offset))?;
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
                if i.op != Vop1Op::V_NOP_E32 {
                    list.push(i.vdst.display_wide(dst_words))?;
                    list.push(i.src0.display_wide(src_words))?;
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
                list.push(i.src0)?;
                if i.op == Vop2Op::V_FMAMK_F32_E32 || i.op == Vop2Op::V_FMAMK_F16_E32 {
                    list.push(format_args!("{:#x}", i.constant.unwrap_or(0)))?;
                }
                list.push(i.vsrc1)?;
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
                let name = short_valu_mnemonic(i.op.mnemonic(), true, i.dpp.is_some());
                let mut list = OperandList::new(f, &name)?;
                let src_words = i
                    .valu
                    .as_ref()
                    .map_or(1, |v| (u32::from(v.src_bits[0]) / 32).max(1));
                if !i.op.mnemonic().starts_with("v_cmpx_") {
                    list.push("vcc_lo")?;
                }
                list.push(i.src0.display_wide(src_words))?;
                list.push(i.vsrc1.display_wide(src_words))?;
                if let Some(dpp) = &i.dpp {
                    list.suffix(dpp_suffix(dpp))?;
                }
                Ok(())
            }
            Inst::Vop3(i) => {
                let name = match i.dpp {
                    Some(_) => format!(
                        "{}_dpp",
                        i.op.mnemonic()
                            .strip_suffix("_e64")
                            .unwrap_or(i.op.mnemonic())
                    ),
                    None => i.op.mnemonic().to_string(),
                };
                let mut list = OperandList::new(f, &name)?;
                let v = &i.valu;
                if !i.op.mnemonic().starts_with("v_cmpx_") && has(i.op.operands(), "vdst") {
                    list.push(i.vdst.display_wide((u32::from(v.dst_bits) / 32).max(1)))?;
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
                let mut list = OperandList::new(f, i.op.mnemonic())?;
                let v = &i.valu;
                list.push(i.vdst.display_wide((u32::from(v.dst_bits) / 32).max(1)))?;
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
                list.push(i.vdst.display_wide(dwords(specs, "vdst")))?;
                let mut count = 0;
                for (n, name) in ["src0", "src1", "src2"].iter().enumerate() {
                    if has(specs, name) {
                        count += 1;
                        list.push(with_modifiers(
                            i.src[n],
                            dwords(specs, name),
                            (i.neg >> n) & 1 != 0,
                            false,
                        ))?;
                    }
                }
                let bits = |mask: u8| {
                    (0..count)
                        .map(|n| ((mask >> n) & 1).to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                if i.opsel != 0 {
                    list.suffix(format_args!("op_sel:[{}]", bits(i.opsel)))?;
                }
                let default_hi = (1u8 << count) - 1;
                if i.opsel_hi & default_hi != default_hi {
                    list.suffix(format_args!("op_sel_hi:[{}]", bits(i.opsel_hi)))?;
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
                    list.push(i.vdst.display_wide(dwords(specs, "vdst")))?;
                }
                if has(specs, "addr") {
                    list.push(i.addr)?;
                }
                if has(specs, "data0") {
                    list.push(i.data0.display_wide(dwords(specs, "data0")))?;
                }
                if has(specs, "data1") {
                    list.push(i.data1.display_wide(dwords(specs, "data1")))?;
                }
                if i.op.mnemonic().contains("2addr") {
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
                        dwords(specs, "data") / 2
                    } else {
                        dwords(specs, "vdst")
                    };
                    list.push(i.vdst.display_wide(returned.max(1)))?;
                }
                let uses_saddr = i.segment != FlatSegment::Flat && i.saddr != Operand::Null;
                match i.segment {
                    FlatSegment::Scratch if !i.sve => list.push("off")?,
                    FlatSegment::Scratch => list.push(i.addr)?,
                    _ if uses_saddr => list.push(i.addr)?,
                    _ => list.push(i.addr.display_wide(2))?,
                }
                if has(specs, "data") {
                    list.push(i.data.display_wide(dwords(specs, "data")))?;
                }
                match i.segment {
                    FlatSegment::Flat => {}
                    FlatSegment::Global if uses_saddr => list.push(i.saddr.display_wide(2))?,
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
        VopdOp::V_DUAL_CNDMASK_B32 => {
            list.push(src[1])?;
            list.push("vcc_lo")
        }
        _ => list.push(src[1]),
    }
}
