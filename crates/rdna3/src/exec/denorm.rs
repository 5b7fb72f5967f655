//! Denormal handling of the vector ALU: the MODE register's FP_DENORM field and the
//! instructions whose hardware ignores it.
//!
//! # What the documents say
//!
//! * MODE register layout — RDNA3 ISA §3.4.2 "Mode register" (Table 6) and §7.2.4
//!   "Denormalized and Rounding Modes" (Table 28): FP_ROUND is bits 3:0, FP_DENORM bits 7:4,
//!   `[5:4]` for single precision and `[7:6]` for double precision *and* FP16; each pair is
//!   `{allow_output_denorms, allow_input_denorms}` (0 flushes both, 3 keeps both). "Denorm
//!   mode affects float ops in: VALU, LDS, and VMEM atomics." §7.2.4 also says the mode is
//!   set with S_SETREG or, preferably, S_ROUND_MODE / S_DENORM_MODE, and: "DOT2_F16_F16
//!   supports denorms, and DOT2_BF16_BF16 disables all denorms."
//! * Initial value — LLVM AMDGPUUsage, COMPUTE_PGM_RSRC1: FLOAT_ROUND_MODE_32 (13:12),
//!   FLOAT_ROUND_MODE_16_64 (15:14), FLOAT_DENORM_MODE_32 (17:16), FLOAT_DENORM_MODE_16_64
//!   (19:18) with 0 = flush source and destination … 3 = flush none; ENABLE_DX10_CLAMP (21)
//!   and ENABLE_IEEE_MODE (23) on GFX6-GFX11. The 8-bit FLOAT_MODE field is MODE[7:0]
//!   verbatim (LLVM's default-fp-mode tests: FloatMode 240 = everything kept, 192 = f32
//!   flushed). "Denormal flushing is sign respecting" (a flushed value keeps its sign).
//! * Per instruction — the "Notes" of each opcode in the RDNA3.5 ISA §16.8 "VOP1
//!   Instructions" (gfx11 family, the same opcodes as gfx1100; the RDNA3 guide's notes could
//!   not be consulted here):
//!   - V_EXP_F32, V_LOG_F32, V_RSQ_F32, V_SQRT_F32: "1ULP accuracy, denormals are flushed."
//!   - V_RCP_F32: "… Denormals are flushed." V_RCP_IFLAG_F32: silent.
//!   - V_SIN_F32, V_COS_F32, V_SIN_F16, V_COS_F16: "Denormals are supported."
//!   - V_RCP_F64, V_RSQ_F64, V_SQRT_F64: "(2**29)ULP accuracy and supports denormals."
//!   - V_SQRT_F16, V_RSQ_F16, V_LOG_F16, V_EXP_F16: "0.51ULP accuracy, denormals are
//!     supported." V_RCP_F16: "0.51ULP accuracy" only.
//!   - V_CVT_F16_F32: "Flush denorms on output if specified based on DP denorm mode";
//!     V_CVT_F32_F16: "Flush denorms on input if specified based on DP denorm mode".
//! * RDNA4 ISA §7.2.4 (the next generation of the same units) adds a list: "These opcodes
//!   flush input and output denorms: FMA_DX9_ZERO_F32, CUBExx_F32, EXP_F32, LOG_F32,
//!   RCP_F32, RCP_IFLAG_F32, RSQ_F32, SQRT_F32, COS_F32."
//! * LLVM's AMDGPU backend agrees for the f32 unit: AMDGPUCodeGenPrepare.cpp "v_rcp_f32 and
//!   v_rsq_f32 do not support denormals … v_rcp_f16 and v_rsq_f16 DO support denormals";
//!   AMDGPUISelLowering.cpp LowerFLOG2/lowerFEXP2 "v_log_f32 / v_exp_f32 is good enough for
//!   OpenCL, except it doesn't handle denormals" (it pre-scales log inputs below the
//!   smallest normal and exp inputs below -126, whose results would be denormal);
//!   AMDGPUInstCombineIntrinsic.cpp "f32 instruction doesn't handle denormals, f16 does".
//!
//! # What the interpreter does, and why where the sources are thin
//!
//! * [`DenormRule::Flush`] (inputs and outputs flushed whatever MODE says): the f32 RCP,
//!   RCP_IFLAG, RSQ, SQRT, LOG and EXP — every source agrees (RCP_IFLAG: RDNA4 list, and it is
//!   the RCP unit). FMA_DX9_ZERO_F32 / FMAC_DX9_ZERO_F32 and the CUBE* ops: the RDNA3 guides
//!   are silent, the RDNA4 list is AMD's only statement, so it is followed.
//! * V_COS_F32 is listed as flushing by RDNA4 and as supporting denormals by the RDNA3.5
//!   notes. It follows the mode here, like V_SIN_F32; the choice cannot be observed: the
//!   cosine of a denormal (or of zero) rounds to 1, and no f32 input has a denormal cosine.
//! * [`DenormRule::Keep`] (never flushed): V_DOT2_F16_F16 ("supports denorms"), and
//!   V_CMP_CLASS_* — it reports the encoding's class, and LLVM lowers `llvm.is.fpclass`,
//!   which must see denormals in every mode, to it. V_DOT2_BF16_BF16 ("disables all
//!   denorms") flushes its bf16 values itself. Untyped moves and selects (B32/B16 operands)
//!   are never float operations.
//! * [`DenormRule::Mode`]: every other VALU operation with float operands — add, mul, fma and
//!   mac, min/max/med3, compares, conversions (the f32↔f16 ones by the f16/f64 bits, as the
//!   notes say), ldexp/frexp/fract/rounding, the division helpers, and the f16/f64
//!   transcendentals. Float sources are flushed when the input bit of their precision is
//!   clear, float results when the output bit is clear. "Float" is the operand's data format
//!   in the ISA data (`num_f16/f32/f64`), so this also covers V_PACK_B32_F16 (f16 sources),
//!   which no document discusses. Packed f16 (VOP3P, V_PK_FMAC_F16) and V_FMA_MIX* follow
//!   the same rule per operand; the f32-accumulating dot products and WMMA are left as they
//!   were (no document gives their rules).

use crate::isa::{ValuOpcode, Vop3Op};

/// MODE register value of a wave created without a dispatch ([`super::Wave::new`]):
/// denormals kept for every precision, round to nearest even — the IEEE behaviour and what
/// clang emits for HIP kernels by default.
pub const DEFAULT_MODE: u32 = 0xf0;

/// MODE bits 7:4.
const FP_DENORM_SHIFT: u32 = 4;

/// The MODE register a wave starts with, from COMPUTE_PGM_RSRC1: FLOAT_MODE (bits 19:12) is
/// `MODE[7:0]`, DX10_CLAMP (bit 21) `MODE[8]`, IEEE_MODE (bit 23) `MODE[9]`.
pub fn mode_from_rsrc1(rsrc1: u32) -> u32 {
    let r = hcq_amd_sys::regs::PgmRsrc1(rsrc1);
    r.float_mode() | (r.dx10_clamp() << 8) | (r.ieee_mode() << 9)
}

/// MODE with FP_DENORM replaced by `denorm` (the S_DENORM_MODE immediate's low 4 bits:
/// `[1:0]` f32, `[3:2]` f64/f16).
pub fn with_denorm_mode(mode: u32, denorm: u32) -> u32 {
    (mode & !(0xf << FP_DENORM_SHIFT)) | ((denorm & 0xf) << FP_DENORM_SHIFT)
}

/// MODE with FP_ROUND replaced (S_ROUND_MODE). Rounding itself is not modelled (every
/// operation rounds to nearest even); the bits are kept so that S_GETREG reads them back.
pub fn with_round_mode(mode: u32, round: u32) -> u32 {
    (mode & !0xf) | (round & 0xf)
}

/// Width of a float operand, for choosing its denormal bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    /// f16 (MODE bits 7:6).
    Half,
    /// f32 (MODE bits 5:4).
    Single,
    /// f64 (MODE bits 7:6).
    Double,
    /// Two f16 values in one dword (MODE bits 7:6).
    PackedHalf,
}

impl Precision {
    /// The precision of a float operand of `bits` bits.
    pub(crate) fn of_bits(bits: u8) -> Option<Precision> {
        match bits {
            16 => Some(Precision::Half),
            32 => Some(Precision::Single),
            64 => Some(Precision::Double),
            _ => None,
        }
    }
}

/// How an instruction treats denormals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DenormRule {
    /// As MODE.FP_DENORM says.
    Mode,
    /// Inputs and outputs flushed regardless of MODE.
    Flush,
    /// Never flushed.
    Keep,
}

/// The rule of a VALU opcode (see the module documentation for the sources). V_CMP_CLASS,
/// which keeps denormals, is told apart by its decoded compare condition, not here.
pub(crate) fn rule(op: ValuOpcode) -> DenormRule {
    use Vop3Op::*;
    let ValuOpcode::Vop3(op) = op else {
        return DenormRule::Mode;
    };
    match op {
        V_RCP_F32_E64
        | V_RCP_IFLAG_F32_E64
        | V_RSQ_F32_E64
        | V_SQRT_F32_E64
        | V_LOG_F32_E64
        | V_EXP_F32_E64
        | V_FMA_DX9_ZERO_F32
        | V_FMAC_DX9_ZERO_F32_E64
        | V_CUBEID_F32
        | V_CUBESC_F32
        | V_CUBETC_F32
        | V_CUBEMA_F32 => DenormRule::Flush,
        V_DOT2_F16_F16 | V_DOT2_BF16_BF16 => DenormRule::Keep,
        _ => DenormRule::Mode,
    }
}

/// Which denormals an instruction keeps, per precision and direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Denormals {
    /// Keep f32 denormal inputs.
    pub keep_in_32: bool,
    /// Keep f32 denormal results.
    pub keep_out_32: bool,
    /// Keep f16/f64 denormal inputs.
    pub keep_in_16_64: bool,
    /// Keep f16/f64 denormal results.
    pub keep_out_16_64: bool,
}

impl Denormals {
    /// Everything kept.
    pub const KEEP: Denormals = Denormals {
        keep_in_32: true,
        keep_out_32: true,
        keep_in_16_64: true,
        keep_out_16_64: true,
    };

    /// What an instruction with `rule` keeps under MODE `mode`.
    pub(crate) fn of(mode: u32, rule: DenormRule) -> Denormals {
        let bits = mode >> FP_DENORM_SHIFT;
        match rule {
            DenormRule::Keep => Denormals::KEEP,
            DenormRule::Flush => Denormals {
                keep_in_32: false,
                keep_out_32: false,
                keep_in_16_64: false,
                keep_out_16_64: false,
            },
            DenormRule::Mode => Denormals {
                keep_in_32: bits & 1 != 0,
                keep_out_32: bits & 2 != 0,
                keep_in_16_64: bits & 4 != 0,
                keep_out_16_64: bits & 8 != 0,
            },
        }
    }

    /// Whether nothing is flushed.
    pub(crate) fn keeps_all(self) -> bool {
        self == Denormals::KEEP
    }

    fn keeps(self, precision: Precision, input: bool) -> bool {
        match (precision, input) {
            (Precision::Single, true) => self.keep_in_32,
            (Precision::Single, false) => self.keep_out_32,
            (_, true) => self.keep_in_16_64,
            (_, false) => self.keep_out_16_64,
        }
    }

    /// A source value (operand bits in the low bits) with denormals flushed if inputs of
    /// its precision are.
    #[inline]
    pub(crate) fn input(self, precision: Precision, bits: u64) -> u64 {
        if self.keeps(precision, true) {
            bits
        } else {
            flush(precision, bits)
        }
    }

    /// A result value with denormals flushed if results of its precision are.
    #[inline]
    pub(crate) fn output(self, precision: Precision, bits: u64) -> u64 {
        if self.keeps(precision, false) {
            bits
        } else {
            flush(precision, bits)
        }
    }
}

/// `bits` with a denormal replaced by the zero of the same sign (bits above the operand's
/// width are kept: a 16-bit operand may sit in a wider word).
pub(crate) fn flush(precision: Precision, bits: u64) -> u64 {
    match precision {
        Precision::Half => flush_f16(bits as u16) as u64 | (bits & !0xffff),
        Precision::PackedHalf => {
            let low = u64::from(flush_f16(bits as u16));
            let high = u64::from(flush_f16((bits >> 16) as u16));
            low | (high << 16) | (bits & !0xffff_ffff)
        }
        Precision::Single => u64::from(flush_f32(bits as u32)) | (bits & !0xffff_ffff),
        Precision::Double => flush_f64(bits),
    }
}

/// f16 bits with a denormal replaced by a signed zero.
pub(crate) fn flush_f16(bits: u16) -> u16 {
    if bits & 0x7c00 == 0 {
        bits & 0x8000
    } else {
        bits
    }
}

/// f32 bits with a denormal replaced by a signed zero.
pub(crate) fn flush_f32(bits: u32) -> u32 {
    if bits & 0x7f80_0000 == 0 {
        bits & 0x8000_0000
    } else {
        bits
    }
}

/// f64 bits with a denormal replaced by a signed zero.
pub(crate) fn flush_f64(bits: u64) -> u64 {
    if bits & 0x7ff0_0000_0000_0000 == 0 {
        bits & 0x8000_0000_0000_0000
    } else {
        bits
    }
}

/// bf16 bits with a denormal replaced by a signed zero.
pub(crate) fn flush_bf16(bits: u16) -> u16 {
    if bits & 0x7f80 == 0 {
        bits & 0x8000
    } else {
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushing_keeps_the_sign_and_leaves_normals_alone() {
        assert_eq!(flush_f32(0x007f_ffff), 0);
        assert_eq!(flush_f32(0x807f_ffff), 0x8000_0000);
        assert_eq!(flush_f32(0x0080_0000), 0x0080_0000);
        assert_eq!(flush_f16(0x83ff), 0x8000);
        assert_eq!(flush_f16(0x0400), 0x0400);
        assert_eq!(flush_f64(0x000f_ffff_ffff_ffff), 0);
        assert_eq!(flush_f64(0x8000_0000_0000_0001), 0x8000_0000_0000_0000);
        assert_eq!(flush_bf16(0x807f), 0x8000);
        assert_eq!(flush(Precision::PackedHalf, 0x83ff_0001), 0x8000_0000);
    }

    #[test]
    fn mode_bits_come_from_rsrc1_float_mode() {
        // LLVM's usual gfx11 compute rsrc1: FLOAT_MODE 0xf0, DX10_CLAMP, IEEE_MODE.
        assert_eq!(mode_from_rsrc1(0x60af_0080), 0x3f0);
        assert_eq!(mode_from_rsrc1(0x000c_0000), 0xc0);
        let only_f64 = Denormals::of(0xc0, DenormRule::Mode);
        assert!(!only_f64.keep_in_32 && !only_f64.keep_out_32);
        assert!(only_f64.keep_in_16_64 && only_f64.keep_out_16_64);
        assert_eq!(with_denorm_mode(0x3ff, 0x1), 0x31f);
        assert_eq!(with_round_mode(0x3f0, 0x13), 0x3f3);
    }
}
