//! The symbolic immediates LLVM's AMDGPU printer uses for gfx11 (`s_delay_alu instid0(...)`,
//! `s_waitcnt vmcnt(0)`, `sendmsg(...)`, `hwreg(...)`, `swizzle(...)`, ...), reproduced from
//! what `llvm-objdump-19 --mcpu=gfx1100` prints.

use std::fmt::Write as _;

use crate::operand::{Aperture, InlineFloat, Operand};

/// A 16-bit immediate as LLVM prints plain integer operands: decimal in the inline-constant
/// range 0..=64, hexadecimal otherwise.
pub(super) fn imm16(value: u16) -> String {
    if value <= 64 {
        value.to_string()
    } else {
        format!("{value:#x}")
    }
}

/// `s_delay_alu`: instid0 (bits 3:0), instskip (6:4), instid1 (10:7).
pub(super) fn delay_alu(simm16: u16) -> String {
    const ID: [&str; 12] = [
        "NO_DEP",
        "VALU_DEP_1",
        "VALU_DEP_2",
        "VALU_DEP_3",
        "VALU_DEP_4",
        "TRANS32_DEP_1",
        "TRANS32_DEP_2",
        "TRANS32_DEP_3",
        "FMA_ACCUM_CYCLE_1",
        "SALU_CYCLE_1",
        "SALU_CYCLE_2",
        "SALU_CYCLE_3",
    ];
    const SKIP: [&str; 6] = ["SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4"];
    let id = |v: u16| {
        ID.get(usize::from(v))
            .copied()
            .unwrap_or("/* invalid instid value */")
    };
    let (id0, skip, id1) = (simm16 & 0xf, (simm16 >> 4) & 7, (simm16 >> 7) & 0xf);
    let mut parts = Vec::new();
    if id0 != 0 {
        parts.push(format!("instid0({})", id(id0)));
    }
    if skip != 0 {
        let name = SKIP
            .get(usize::from(skip))
            .copied()
            .unwrap_or("/* invalid instskip value */");
        parts.push(format!("instskip({name})"));
    }
    if id1 != 0 {
        parts.push(format!("instid1({})", id(id1)));
    }
    if parts.is_empty() {
        "0".to_string()
    } else {
        parts.join(" | ")
    }
}

/// `s_waitcnt` (gfx11: vmcnt 15:10, lgkmcnt 9:4, expcnt 2:0). Counters at their maximum (no
/// wait) are omitted unless all are.
pub(super) fn waitcnt(simm16: u16) -> String {
    let (vm, lgkm, exp) = ((simm16 >> 10) & 0x3f, (simm16 >> 4) & 0x3f, simm16 & 7);
    let all_default = vm == 0x3f && lgkm == 0x3f && exp == 7;
    let mut parts = Vec::new();
    if vm != 0x3f || all_default {
        parts.push(format!("vmcnt({vm})"));
    }
    if exp != 7 || all_default {
        parts.push(format!("expcnt({exp})"));
    }
    if lgkm != 0x3f || all_default {
        parts.push(format!("lgkmcnt({lgkm})"));
    }
    parts.join(" ")
}

/// `s_waitcnt_depctr`: named counters when every set bit belongs to one (printing only the
/// non-default ones, or all if none is), else the raw value in hex.
pub(super) fn depctr(simm16: u16) -> String {
    // (name, bit offset, width); the default of each is its maximum.
    const FIELDS: [(&str, u32, u32); 7] = [
        ("depctr_hold_cnt", 7, 1),
        ("depctr_sa_sdst", 0, 1),
        ("depctr_va_vdst", 12, 4),
        ("depctr_va_sdst", 9, 3),
        ("depctr_va_ssrc", 8, 1),
        ("depctr_va_vcc", 1, 1),
        ("depctr_vm_vsrc", 2, 3),
    ];
    let value = u32::from(simm16);
    let mut used = 0u32;
    let mut fields = Vec::new();
    for (name, offset, width) in FIELDS {
        let max = (1u32 << width) - 1;
        used |= max << offset;
        fields.push((name, (value >> offset) & max, max));
    }
    if value & !used != 0 {
        return format!("{simm16:#x}");
    }
    let any_non_default = fields.iter().any(|&(_, v, max)| v != max);
    fields
        .iter()
        .filter(|&&(_, v, max)| v != max || !any_non_default)
        .map(|(name, v, _)| format!("{name}({v})"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `sendmsg(...)` of `s_sendmsg`, `s_sendmsghalt` and `s_sendmsg_rtn_*` (gfx11: message id in
/// bits 7:0, no operation or stream fields).
pub(super) fn sendmsg(simm16: u16) -> String {
    let id = simm16 & 0xff;
    let name = match id {
        1 => "MSG_INTERRUPT",
        2 => "MSG_HS_TESSFACTOR",
        3 => "MSG_DEALLOC_VGPRS",
        5 => "MSG_STALL_WAVE_GEN",
        6 => "MSG_HALT_WAVES",
        9 => "MSG_GS_ALLOC_REQ",
        128 => "MSG_RTN_GET_DOORBELL",
        129 => "MSG_RTN_GET_DDID",
        130 => "MSG_RTN_GET_TMA",
        131 => "MSG_RTN_GET_REALTIME",
        132 => "MSG_RTN_SAVE_WAVE",
        133 => "MSG_RTN_GET_TBA",
        134 => "MSG_RTN_GET_TBA_TO_PC",
        _ if id == simm16 => return format!("sendmsg({id}, 0, 0)"),
        _ => return simm16.to_string(),
    };
    format!("sendmsg({name})")
}

/// `hwreg(REG[, offset, width])` of `s_getreg_b32` / `s_setreg_*`: register id in bits 5:0,
/// bit offset in 10:6, width - 1 in 15:11.
pub(super) fn hwreg(simm16: u16) -> String {
    let id = simm16 & 0x3f;
    let offset = (simm16 >> 6) & 0x1f;
    let width = (simm16 >> 11) + 1;
    let name = match id {
        1 => "HW_REG_MODE",
        2 => "HW_REG_STATUS",
        3 => "HW_REG_TRAPSTS",
        5 => "HW_REG_GPR_ALLOC",
        6 => "HW_REG_LDS_ALLOC",
        7 => "HW_REG_IB_STS",
        15 => "HW_REG_SH_MEM_BASES",
        18 => "HW_REG_PERF_SNAPSHOT_PC_LO",
        19 => "HW_REG_PERF_SNAPSHOT_PC_HI",
        20 => "HW_REG_FLAT_SCR_LO",
        21 => "HW_REG_FLAT_SCR_HI",
        23 => "HW_REG_HW_ID1",
        24 => "HW_REG_HW_ID2",
        27 => "HW_REG_PERF_SNAPSHOT_DATA",
        29 => "HW_REG_SHADER_CYCLES",
        _ => "",
    };
    let mut text = String::from("hwreg(");
    if name.is_empty() {
        let _ = write!(text, "{id}");
    } else {
        text.push_str(name);
    }
    if offset != 0 || width != 32 {
        let _ = write!(text, ", {offset}, {width}");
    }
    text.push(')');
    text
}

/// `s_version`: the microcode version (bits 7:0) with its W64/W32/MDP flag bits.
pub(super) fn version(simm16: u16) -> String {
    const FLAGS: [(u16, &str); 3] = [
        (1 << 13, "UC_VERSION_W64_BIT"),
        (1 << 14, "UC_VERSION_W32_BIT"),
        (1 << 15, "UC_VERSION_MDP_BIT"),
    ];
    if simm16 & 0x1f00 != 0 {
        return format!("{simm16:#x}");
    }
    let mut text = match simm16 & 0xff {
        0 => "UC_VERSION_GFX7".to_string(),
        4 => "UC_VERSION_GFX10".to_string(),
        6 => "UC_VERSION_GFX11".to_string(),
        9 => "UC_VERSION_GFX12".to_string(),
        other => other.to_string(),
    };
    for (bit, name) in FLAGS {
        if simm16 & bit != 0 {
            text = if text.contains('|') {
                format!("({text})|{name}")
            } else {
                format!("{text}|{name}")
            };
        }
    }
    text
}

/// The `offset:...` modifier of `ds_swizzle_b32` (None for 0).
pub(super) fn swizzle(offset: u16) -> Option<String> {
    const MAX: u16 = 0x1f;
    if offset == 0 {
        return None;
    }
    if offset & 0xff00 == 0x8000 {
        let lane = |i: u16| (offset >> (2 * i)) & 3;
        return Some(format!(
            "offset:swizzle(QUAD_PERM,{},{},{},{})",
            lane(0),
            lane(1),
            lane(2),
            lane(3)
        ));
    }
    if offset & 0x8000 != 0 {
        return Some(format!("offset:{offset}"));
    }
    let and = offset & MAX;
    let or = (offset >> 5) & MAX;
    let xor = (offset >> 10) & MAX;
    if and == MAX && or == 0 && xor.count_ones() == 1 {
        return Some(format!("offset:swizzle(SWAP,{xor})"));
    }
    if and == MAX && or == 0 && xor > 0 && (xor + 1).is_power_of_two() {
        return Some(format!("offset:swizzle(REVERSE,{})", xor + 1));
    }
    let group = MAX - and + 1;
    if group > 1 && group.is_power_of_two() && or < group && xor == 0 {
        return Some(format!("offset:swizzle(BROADCAST,{group},{or})"));
    }
    // Per lane-id bit, from the top: what a 0 and a 1 in that bit become.
    let probe0 = or ^ xor;
    let probe1 = (MAX & and | or) ^ xor;
    let mut text = String::from("offset:swizzle(BITMASK_PERM,\"");
    for bit in (0..5).rev() {
        let (p0, p1) = ((probe0 >> bit) & 1, (probe1 >> bit) & 1);
        text.push(match (p0 == p1, p0) {
            (true, 0) => '0',
            (true, _) => '1',
            (false, 0) => 'p',
            (false, _) => 'i',
        });
    }
    text.push_str("\")");
    Some(text)
}

/// The 8- or 9-bit source-field value that decodes to `operand` (the inverse of
/// [`Operand::from_src`]); used where a source field holds an immediate, such as the message
/// id of `s_sendmsg_rtn_b32`.
pub(super) fn source_field(operand: Operand) -> Option<u16> {
    let value = match operand {
        Operand::Sgpr(n) => u16::from(n),
        Operand::VccLo => 106,
        Operand::VccHi => 107,
        Operand::Ttmp(n) => 108 + u16::from(n),
        Operand::Null => 124,
        Operand::M0 => 125,
        Operand::ExecLo => 126,
        Operand::ExecHi => 127,
        Operand::InlineInt(v) if v >= 0 => 128 + v as u16,
        Operand::InlineInt(v) => 192 + u16::from(v.unsigned_abs()),
        Operand::Aperture(Aperture::SharedBase) => 235,
        Operand::Aperture(Aperture::SharedLimit) => 236,
        Operand::Aperture(Aperture::PrivateBase) => 237,
        Operand::Aperture(Aperture::PrivateLimit) => 238,
        Operand::PopsExitingWaveId => 239,
        Operand::InlineFloat(f) => match f {
            InlineFloat::Half => 240,
            InlineFloat::NegHalf => 241,
            InlineFloat::One => 242,
            InlineFloat::NegOne => 243,
            InlineFloat::Two => 244,
            InlineFloat::NegTwo => 245,
            InlineFloat::Four => 246,
            InlineFloat::NegFour => 247,
            InlineFloat::InvTwoPi => 248,
        },
        Operand::Vccz => 251,
        Operand::Execz => 252,
        Operand::Scc => 253,
        Operand::LdsDirect => 254,
        Operand::Vgpr(n) => 256 + u16::from(n),
        Operand::Reserved(v) => v,
        Operand::Literal(_) => return None,
    };
    Some(value)
}
