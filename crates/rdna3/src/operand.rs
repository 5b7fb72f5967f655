//! Source and destination operands: the 9-bit source encoding shared by scalar and vector
//! instructions, and the register indices of scalar/vector register fields.

use std::fmt;

/// Number of general-purpose SGPRs (s0..s105); VCC follows them.
pub const SGPR_COUNT: usize = 106;
/// Index of VCC_LO in the scalar register file (encoding 106).
pub const VCC_LO: u8 = 106;
/// Index of NULL in the scalar register file (encoding 124): reads 0, writes are dropped.
pub const NULL: u8 = 124;
/// Index of M0 (encoding 125).
pub const M0: u8 = 125;
/// Index of EXEC_LO (encoding 126).
pub const EXEC_LO: u8 = 126;
/// Number of scalar register-file slots addressed by the 7-bit encoding (s0..exec_hi).
pub const SCALAR_SLOTS: usize = 128;
/// Number of trap temporaries (ttmp0..ttmp15).
pub const TTMP_COUNT: usize = 16;

/// The register an SGPR or TTMP tuple of `dwords` registers must start at a multiple of: the
/// ISA requires pairs to be even-aligned and anything wider to be quad-aligned.
pub const fn tuple_alignment(dwords: u32) -> u8 {
    match dwords {
        0..=1 => 1,
        2 => 2,
        _ => 4,
    }
}

/// The float inline constants of the source encoding (values 240..=248).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InlineFloat {
    /// 0.5
    Half,
    /// -0.5
    NegHalf,
    /// 1.0
    One,
    /// -1.0
    NegOne,
    /// 2.0
    Two,
    /// -2.0
    NegTwo,
    /// 4.0
    Four,
    /// -4.0
    NegFour,
    /// 1/(2π)
    InvTwoPi,
}

impl InlineFloat {
    /// IEEE single-precision bits.
    pub const fn f32_bits(self) -> u32 {
        match self {
            Self::Half => 0x3f00_0000,
            Self::NegHalf => 0xbf00_0000,
            Self::One => 0x3f80_0000,
            Self::NegOne => 0xbf80_0000,
            Self::Two => 0x4000_0000,
            Self::NegTwo => 0xc000_0000,
            Self::Four => 0x4080_0000,
            Self::NegFour => 0xc080_0000,
            Self::InvTwoPi => 0x3e22_f983,
        }
    }

    /// IEEE double-precision bits.
    pub const fn f64_bits(self) -> u64 {
        match self {
            Self::Half => 0x3fe0_0000_0000_0000,
            Self::NegHalf => 0xbfe0_0000_0000_0000,
            Self::One => 0x3ff0_0000_0000_0000,
            Self::NegOne => 0xbff0_0000_0000_0000,
            Self::Two => 0x4000_0000_0000_0000,
            Self::NegTwo => 0xc000_0000_0000_0000,
            Self::Four => 0x4010_0000_0000_0000,
            Self::NegFour => 0xc010_0000_0000_0000,
            Self::InvTwoPi => 0x3fc4_5f30_6dc9_c882,
        }
    }

    /// IEEE half-precision bits.
    pub const fn f16_bits(self) -> u16 {
        match self {
            Self::Half => 0x3800,
            Self::NegHalf => 0xb800,
            Self::One => 0x3c00,
            Self::NegOne => 0xbc00,
            Self::Two => 0x4000,
            Self::NegTwo => 0xc000,
            Self::Four => 0x4400,
            Self::NegFour => 0xc400,
            Self::InvTwoPi => 0x3118,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::Half => "0.5",
            Self::NegHalf => "-0.5",
            Self::One => "1.0",
            Self::NegOne => "-1.0",
            Self::Two => "2.0",
            Self::NegTwo => "-2.0",
            Self::Four => "4.0",
            Self::NegFour => "-4.0",
            Self::InvTwoPi => "0.15915494",
        }
    }
}

/// A decoded operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Scalar register s0..s105.
    Sgpr(u8),
    /// VCC_LO (the whole VCC in wave32).
    VccLo,
    /// VCC_HI.
    VccHi,
    /// EXEC_LO (the whole EXEC in wave32).
    ExecLo,
    /// EXEC_HI.
    ExecHi,
    /// M0.
    M0,
    /// NULL: reads 0, writes are discarded.
    Null,
    /// Trap temporary ttmp0..ttmp15.
    Ttmp(u8),
    /// Vector register v0..v255.
    Vgpr(u8),
    /// Inline integer constant -16..=64.
    InlineInt(i8),
    /// Inline float constant.
    InlineFloat(InlineFloat),
    /// 32-bit literal from the dword after the instruction.
    Literal(u32),
    /// SCC as a source (0 or 1).
    Scc,
    /// VCCZ: 1 if VCC is zero.
    Vccz,
    /// EXECZ: 1 if EXEC is zero.
    Execz,
    /// SRC_SHARED_BASE / LIMIT, SRC_PRIVATE_BASE / LIMIT (aperture registers).
    Aperture(Aperture),
    /// SRC_POPS_EXITING_WAVE_ID.
    PopsExitingWaveId,
    /// LDS_DIRECT.
    LdsDirect,
    /// A source value with no meaning in this position (DPP markers outside a DPP form,
    /// reserved encodings); executing an instruction using it is an illegal-operand fault.
    Reserved(u16),
}

/// The aperture source registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Aperture {
    /// SRC_SHARED_BASE
    SharedBase,
    /// SRC_SHARED_LIMIT
    SharedLimit,
    /// SRC_PRIVATE_BASE
    PrivateBase,
    /// SRC_PRIVATE_LIMIT
    PrivateLimit,
}

/// Source-field value selecting a 32-bit literal.
pub const SRC_LITERAL: u16 = 255;
/// Source-field value selecting DPP16 (the VGPR comes from the DPP dword).
pub const SRC_DPP16: u16 = 250;
/// Source-field value selecting DPP8.
pub const SRC_DPP8: u16 = 233;
/// Source-field value selecting DPP8 with fetch-inactive.
pub const SRC_DPP8_FI: u16 = 234;

impl Operand {
    /// Decodes a 9-bit source field. `literal` is the dword after the instruction, if any;
    /// a literal reference without one becomes `Reserved`.
    pub fn from_src(value: u16, literal: Option<u32>) -> Operand {
        match value {
            0..=105 => Operand::Sgpr(value as u8),
            106 => Operand::VccLo,
            107 => Operand::VccHi,
            108..=123 => Operand::Ttmp((value - 108) as u8),
            124 => Operand::Null,
            125 => Operand::M0,
            126 => Operand::ExecLo,
            127 => Operand::ExecHi,
            128..=192 => Operand::InlineInt((value - 128) as i8),
            193..=208 => Operand::InlineInt(-((value - 192) as i8)),
            235 => Operand::Aperture(Aperture::SharedBase),
            236 => Operand::Aperture(Aperture::SharedLimit),
            237 => Operand::Aperture(Aperture::PrivateBase),
            238 => Operand::Aperture(Aperture::PrivateLimit),
            239 => Operand::PopsExitingWaveId,
            240 => Operand::InlineFloat(InlineFloat::Half),
            241 => Operand::InlineFloat(InlineFloat::NegHalf),
            242 => Operand::InlineFloat(InlineFloat::One),
            243 => Operand::InlineFloat(InlineFloat::NegOne),
            244 => Operand::InlineFloat(InlineFloat::Two),
            245 => Operand::InlineFloat(InlineFloat::NegTwo),
            246 => Operand::InlineFloat(InlineFloat::Four),
            247 => Operand::InlineFloat(InlineFloat::NegFour),
            248 => Operand::InlineFloat(InlineFloat::InvTwoPi),
            251 => Operand::Vccz,
            252 => Operand::Execz,
            253 => Operand::Scc,
            254 => Operand::LdsDirect,
            SRC_LITERAL => match literal {
                Some(value) => Operand::Literal(value),
                None => Operand::Reserved(value),
            },
            256..=511 => Operand::Vgpr((value - 256) as u8),
            _ => Operand::Reserved(value),
        }
    }

    /// Decodes a 7-bit scalar register field (SGPR destinations, SMEM/FLAT `saddr`, ...).
    pub fn from_sreg(value: u8) -> Operand {
        Operand::from_src(u16::from(value & 0x7f), None)
    }

    /// The scalar register-file slot (0..128) holding this operand, if it is a scalar register.
    pub fn scalar_slot(self) -> Option<u8> {
        match self {
            Operand::Sgpr(n) => Some(n),
            Operand::VccLo => Some(VCC_LO),
            Operand::VccHi => Some(VCC_LO + 1),
            Operand::Ttmp(n) => Some(108 + n),
            Operand::Null => Some(NULL),
            Operand::M0 => Some(M0),
            Operand::ExecLo => Some(EXEC_LO),
            Operand::ExecHi => Some(EXEC_LO + 1),
            _ => None,
        }
    }

    /// This operand as the first register of a `dwords`-register tuple, with the low index bits
    /// the tuple's alignment leaves no room for cleared: the tuple LLVM prints for a misaligned
    /// encoding (`s1` as a pair is `s[0:1]`). Other operands are returned unchanged.
    pub fn aligned_tuple(self, dwords: u32) -> Operand {
        let aligned = |n: u8| n & !(tuple_alignment(dwords) - 1);
        match self {
            Operand::Sgpr(n) => Operand::Sgpr(aligned(n)),
            Operand::Ttmp(n) => Operand::Ttmp(aligned(n)),
            other => other,
        }
    }

    /// Whether this operand can start `dwords` consecutive scalar registers: an aligned SGPR or
    /// TTMP tuple that ends inside its own file, VCC or EXEC as a pair, NULL; or anything that is
    /// not a register (constants, apertures). The high halves of VCC and EXEC, M0, and VCC or
    /// EXEC as more than a pair start no tuple.
    pub fn starts_tuple(self, dwords: u32) -> bool {
        if dwords <= 1 {
            return true;
        }
        let aligned = self.aligned_tuple(dwords) == self;
        let fits = |n: u8, file: usize| aligned && usize::from(n) + dwords as usize <= file;
        match self {
            Operand::Sgpr(n) => fits(n, SGPR_COUNT),
            Operand::Ttmp(n) => fits(n, TTMP_COUNT),
            Operand::VccLo | Operand::ExecLo => dwords == 2,
            Operand::VccHi | Operand::ExecHi | Operand::M0 => false,
            _ => true,
        }
    }

    /// Whether decoding this source needed the literal dword.
    pub fn is_literal(self) -> bool {
        matches!(self, Operand::Literal(_))
    }

    /// Formats the operand as a register range of `dwords` registers (LLVM syntax).
    pub fn display_wide(self, dwords: u32) -> WideOperand {
        WideOperand {
            operand: self,
            dwords,
        }
    }
}

/// Display helper: an operand spanning `dwords` consecutive registers (`s[0:1]`, `v[2:5]`,
/// `vcc`, `exec`).
#[derive(Clone, Copy, Debug)]
pub struct WideOperand {
    operand: Operand,
    dwords: u32,
}

impl fmt::Display for WideOperand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dwords <= 1 {
            return self.operand.fmt(f);
        }
        let last = self.dwords - 1;
        // As LLVM prints a misaligned tuple (the executor refuses to run one).
        match self.operand.aligned_tuple(self.dwords) {
            Operand::Sgpr(n) => write!(f, "s[{}:{}]", n, u32::from(n) + last),
            Operand::Vgpr(n) => write!(f, "v[{}:{}]", n, u32::from(n) + last),
            Operand::Ttmp(n) => write!(f, "ttmp[{}:{}]", n, u32::from(n) + last),
            Operand::VccLo if self.dwords == 2 => f.write_str("vcc"),
            Operand::ExecLo if self.dwords == 2 => f.write_str("exec"),
            other => other.fmt(f),
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Operand::Sgpr(n) => write!(f, "s{n}"),
            Operand::VccLo => f.write_str("vcc_lo"),
            Operand::VccHi => f.write_str("vcc_hi"),
            Operand::ExecLo => f.write_str("exec_lo"),
            Operand::ExecHi => f.write_str("exec_hi"),
            Operand::M0 => f.write_str("m0"),
            Operand::Null => f.write_str("null"),
            Operand::Ttmp(n) => write!(f, "ttmp{n}"),
            Operand::Vgpr(n) => write!(f, "v{n}"),
            Operand::InlineInt(v) => write!(f, "{v}"),
            Operand::InlineFloat(v) => f.write_str(v.text()),
            // LLVM prints literal values that would fit an inline integer in decimal.
            Operand::Literal(v) if (-16..=64).contains(&(v as i32)) => write!(f, "{}", v as i32),
            Operand::Literal(v) => write!(f, "{v:#x}"),
            Operand::Scc => f.write_str("scc"),
            Operand::Vccz => f.write_str("src_vccz"),
            Operand::Execz => f.write_str("src_execz"),
            Operand::Aperture(Aperture::SharedBase) => f.write_str("src_shared_base"),
            Operand::Aperture(Aperture::SharedLimit) => f.write_str("src_shared_limit"),
            Operand::Aperture(Aperture::PrivateBase) => f.write_str("src_private_base"),
            Operand::Aperture(Aperture::PrivateLimit) => f.write_str("src_private_limit"),
            Operand::PopsExitingWaveId => f.write_str("src_pops_exiting_wave_id"),
            Operand::LdsDirect => f.write_str("src_lds_direct"),
            Operand::Reserved(v) => write!(f, "<reserved {v}>"),
        }
    }
}
