//! Instruction decoding: raw dwords → [`Inst`], one struct per encoding with named opcodes.
//!
//! The encoding of a word is identified by the generated [`identify_encoding`] (fixed bits,
//! longest match). Literal dwords (source value 255, FMAAK/FMAMK constants) and DPP dwords are
//! consumed here, so each decoded instruction knows its full length. Vector ALU instructions of
//! every encoding are additionally lowered to a canonical [`ValuInst`] (VOP3 numbering) that the
//! executor runs.

mod buffer_format;
mod display;
mod symbolic;
mod valu;

pub use buffer_format::{BufferFormat, NumberFormat, DEFAULT_FORMAT};
pub use valu::{Compare, CompareCondition, CompareType, Dpp, ValuInst};

use crate::isa::*;
use crate::operand::{Operand, SGPR_COUNT, TTMP_COUNT};

/// Largest instruction: a 64-bit encoding plus a literal or DPP dword.
pub const MAX_INST_WORDS: usize = 3;

/// Why a word sequence could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No encoding matches the first dword, or the opcode number is not defined.
    Undecodable {
        /// The first dword.
        word: u32,
    },
    /// The instruction needs more dwords than were available.
    Truncated {
        /// Dwords the instruction needs.
        needed: usize,
    },
}

/// A decoded instruction with its length.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The instruction.
    pub inst: Inst,
    /// Number of dwords it occupies (1..=3).
    pub words: usize,
}

/// A decoded instruction, one variant per encoding family.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// Scalar ALU, one source.
    Sop1(Sop1),
    /// Scalar ALU, two sources.
    Sop2(Sop2),
    /// Scalar ALU with a 16-bit immediate.
    Sopk(Sopk),
    /// Scalar compare.
    Sopc(Sopc),
    /// Scalar program control.
    Sopp(Sopp),
    /// Scalar memory load.
    Smem(Smem),
    /// Vector ALU, one source (32-bit encoding).
    Vop1(Vop1),
    /// Vector ALU, two sources (32-bit encoding).
    Vop2(Vop2),
    /// Vector compare (32-bit encoding).
    Vopc(Vopc),
    /// Vector ALU, 64-bit encoding.
    Vop3(Vop3),
    /// Vector ALU, 64-bit encoding with a scalar destination (carry out).
    Vop3sd(Vop3sd),
    /// Packed vector ALU.
    Vop3p(Vop3p),
    /// Dual-issue vector ALU.
    Vopd(Vopd),
    /// LDS/GDS access.
    Ds(Ds),
    /// FLAT, GLOBAL or SCRATCH memory access.
    Flat(Flat),
    /// MUBUF or MTBUF access through a buffer resource descriptor.
    Buffer(Buffer),
    /// A recognised encoding this decoder does not break down (MIMG, EXP, ...).
    Other(OtherInst),
}

/// SOP1: `sdst = op(ssrc0)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sop1 {
    /// Opcode.
    pub op: Sop1Op,
    /// Destination.
    pub sdst: Operand,
    /// Source.
    pub ssrc0: Operand,
}

/// SOP2: `sdst = op(ssrc0, ssrc1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sop2 {
    /// Opcode.
    pub op: Sop2Op,
    /// Destination.
    pub sdst: Operand,
    /// First source.
    pub ssrc0: Operand,
    /// Second source.
    pub ssrc1: Operand,
}

/// SOPK: scalar op with a 16-bit immediate.
#[derive(Clone, Debug, PartialEq)]
pub struct Sopk {
    /// Opcode.
    pub op: SopkOp,
    /// Destination (or source for compares).
    pub sdst: Operand,
    /// The 16-bit immediate.
    pub simm16: u16,
    /// Literal dword (`s_setreg_imm32_b32`).
    pub literal: Option<u32>,
}

/// SOPC: scalar compare setting SCC.
#[derive(Clone, Debug, PartialEq)]
pub struct Sopc {
    /// Opcode.
    pub op: SopcOp,
    /// First source.
    pub ssrc0: Operand,
    /// Second source.
    pub ssrc1: Operand,
}

/// SOPP: program control with a 16-bit immediate.
#[derive(Clone, Debug, PartialEq)]
pub struct Sopp {
    /// Opcode.
    pub op: SoppOp,
    /// The immediate (branch offset in dwords, wait counts, ...).
    pub simm16: u16,
}

/// SMEM: scalar memory load of 1..16 dwords.
#[derive(Clone, Debug, PartialEq)]
pub struct Smem {
    /// Opcode.
    pub op: SmemOp,
    /// First destination SGPR slot.
    pub sdata: Operand,
    /// Base address register pair (or buffer descriptor quad).
    pub sbase: Operand,
    /// Signed 21-bit byte offset.
    pub offset: i32,
    /// Register offset added to the address (`Null` for none).
    pub soffset: Operand,
    /// GLC bit.
    pub glc: bool,
    /// DLC bit.
    pub dlc: bool,
}

/// VOP1: `vdst = op(src0)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Vop1 {
    /// Opcode.
    pub op: Vop1Op,
    /// Destination (a VGPR; an SGPR for `v_readfirstlane_b32`).
    pub vdst: Operand,
    /// Source.
    pub src0: Operand,
    /// DPP control, if this is a DPP form.
    pub dpp: Option<Dpp>,
    /// Canonical form the executor runs (None: no VOP3 equivalent).
    pub valu: Option<ValuInst>,
}

/// VOP2: `vdst = op(src0, vsrc1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Vop2 {
    /// Opcode.
    pub op: Vop2Op,
    /// Destination VGPR.
    pub vdst: Operand,
    /// First source (any).
    pub src0: Operand,
    /// Second source (a VGPR).
    pub vsrc1: Operand,
    /// Constant of `v_fmaak`/`v_fmamk`.
    pub constant: Option<u32>,
    /// DPP control, if this is a DPP form.
    pub dpp: Option<Dpp>,
    /// Canonical form the executor runs.
    pub valu: Option<ValuInst>,
}

/// VOPC: compare writing VCC (or EXEC for `v_cmpx_*`).
#[derive(Clone, Debug, PartialEq)]
pub struct Vopc {
    /// Opcode.
    pub op: VopcOp,
    /// First source (any).
    pub src0: Operand,
    /// Second source (a VGPR).
    pub vsrc1: Operand,
    /// DPP control, if this is a DPP form.
    pub dpp: Option<Dpp>,
    /// Canonical form the executor runs.
    pub valu: Option<ValuInst>,
}

/// VOP3: the 64-bit vector ALU encoding with modifiers.
#[derive(Clone, Debug, PartialEq)]
pub struct Vop3 {
    /// Opcode.
    pub op: Vop3Op,
    /// Destination (VGPR, or SGPR for compares and `v_readlane_b32`).
    pub vdst: Operand,
    /// Sources.
    pub src: [Operand; 3],
    /// Absolute-value modifier per source (bit i = source i).
    pub abs: u8,
    /// Negate modifier per source.
    pub neg: u8,
    /// Operand-select bits (16-bit halves; bit 3 = destination).
    pub opsel: u8,
    /// Output modifier (0 none, 1 ×2, 2 ×4, 3 ÷2).
    pub omod: u8,
    /// Clamp.
    pub clamp: bool,
    /// DPP control, if this is a DPP form.
    pub dpp: Option<Dpp>,
    /// Canonical form the executor runs.
    pub valu: ValuInst,
}

/// VOP3SD: VOP3 with a scalar carry/flag destination.
#[derive(Clone, Debug, PartialEq)]
pub struct Vop3sd {
    /// Opcode.
    pub op: Vop3sdOp,
    /// Vector destination.
    pub vdst: Operand,
    /// Scalar destination (carry out / VCC flag).
    pub sdst: Operand,
    /// Sources.
    pub src: [Operand; 3],
    /// Negate modifier per source.
    pub neg: u8,
    /// Output modifier.
    pub omod: u8,
    /// Clamp.
    pub clamp: bool,
    /// DPP control, if this is a DPP form.
    pub dpp: Option<Dpp>,
    /// Canonical form the executor runs.
    pub valu: ValuInst,
}

/// VOP3P: packed 16-bit math, dot products, mixed-precision FMA.
#[derive(Clone, Debug, PartialEq)]
pub struct Vop3p {
    /// Opcode.
    pub op: Vop3pOp,
    /// Destination VGPR.
    pub vdst: Operand,
    /// Sources.
    pub src: [Operand; 3],
    /// Negate of the low halves (or of whole sources for mixed ops).
    pub neg: u8,
    /// Negate of the high halves.
    pub neg_hi: u8,
    /// Selects the half for the low result lane per source.
    pub opsel: u8,
    /// Selects the half for the high result lane per source.
    pub opsel_hi: u8,
    /// Clamp.
    pub clamp: bool,
    /// DPP control, if this is a DPP form.
    pub dpp: Option<Dpp>,
}

/// VOPD: two independent VALU operations issued together.
#[derive(Clone, Debug, PartialEq)]
pub struct Vopd {
    /// X opcode.
    pub opx: VopdOp,
    /// Y opcode.
    pub opy: VopdOp,
    /// X destination.
    pub vdstx: Operand,
    /// Y destination.
    pub vdsty: Operand,
    /// X sources (src0, vsrc1).
    pub srcx: [Operand; 2],
    /// Y sources (src0, vsrc1).
    pub srcy: [Operand; 2],
    /// The literal (used by FMAAK/FMAMK halves and literal sources).
    pub literal: Option<u32>,
    /// Canonical X operation.
    pub x: Option<ValuInst>,
    /// Canonical Y operation.
    pub y: Option<ValuInst>,
}

/// DS: LDS (or GDS) access.
#[derive(Clone, Debug, PartialEq)]
pub struct Ds {
    /// Opcode.
    pub op: DsOp,
    /// Destination VGPR(s) for returning ops.
    pub vdst: Operand,
    /// Address VGPR.
    pub addr: Operand,
    /// First data VGPR(s).
    pub data0: Operand,
    /// Second data VGPR(s).
    pub data1: Operand,
    /// First offset byte (the low byte of a 16-bit offset for single-address ops).
    pub offset0: u8,
    /// Second offset byte.
    pub offset1: u8,
    /// GDS instead of LDS.
    pub gds: bool,
}

impl Ds {
    /// The combined 16-bit offset of single-address ops.
    pub fn offset16(&self) -> u32 {
        u32::from(self.offset0) | (u32::from(self.offset1) << 8)
    }
}

/// The address space segment of a FLAT-family instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlatSegment {
    /// Generic address (global, LDS or private by aperture).
    Flat,
    /// Global memory.
    Global,
    /// Per-lane private memory.
    Scratch,
}

/// The opcode of a FLAT-family instruction, in its own opcode space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlatOpcode {
    /// FLAT
    Flat(FlatOp),
    /// GLOBAL
    Global(GlobalOp),
    /// SCRATCH
    Scratch(ScratchOp),
}

impl FlatOpcode {
    /// LLVM mnemonic.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Self::Flat(op) => op.mnemonic(),
            Self::Global(op) => op.mnemonic(),
            Self::Scratch(op) => op.mnemonic(),
        }
    }

    /// Operand specs.
    pub const fn operands(self) -> &'static [OperandSpec] {
        match self {
            Self::Flat(op) => op.operands(),
            Self::Global(op) => op.operands(),
            Self::Scratch(op) => op.operands(),
        }
    }
}

/// FLAT / GLOBAL / SCRATCH memory access.
#[derive(Clone, Debug, PartialEq)]
pub struct Flat {
    /// Segment.
    pub segment: FlatSegment,
    /// Opcode.
    pub op: FlatOpcode,
    /// Destination VGPR(s) (loads, returning atomics).
    pub vdst: Operand,
    /// Address VGPR(s): 64-bit address, or 32-bit offset when `saddr` is used.
    pub addr: Operand,
    /// Data VGPR(s) (stores, atomics).
    pub data: Operand,
    /// Scalar base address (`Null` = off).
    pub saddr: Operand,
    /// Signed 13-bit byte offset (12-bit unsigned... as the field encodes, sign-extended).
    pub offset: i32,
    /// GLC (atomics: return the pre-op value).
    pub glc: bool,
    /// SLC.
    pub slc: bool,
    /// DLC.
    pub dlc: bool,
    /// SCRATCH: the VGPR address is used (`sve`).
    pub sve: bool,
    /// What the instruction does to memory (None: not modelled, e.g. `global_load_lds_*`).
    pub access: Option<MemAccess>,
}

/// Where a 16-bit (d16) load puts its result in the destination VGPR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum D16 {
    /// A full-register load (sub-dword values are extended to 32 bits).
    Full,
    /// Low half; the high half is preserved.
    Low,
    /// High half; the low half is preserved.
    High,
}

/// Read-modify-write operations of memory atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Exchange.
    Swap,
    /// Compare and exchange (data = {new, compare}).
    CmpSwap,
    /// Integer add.
    Add,
    /// Integer subtract.
    Sub,
    /// Subtract clamped at 0.
    Csub,
    /// Signed minimum.
    Smin,
    /// Unsigned minimum.
    Umin,
    /// Signed maximum.
    Smax,
    /// Unsigned maximum.
    Umax,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise xor.
    Xor,
    /// Increment wrapping at the data value.
    Inc,
    /// Decrement wrapping at the data value.
    Dec,
    /// Float add.
    AddF,
    /// Float minimum.
    MinF,
    /// Float maximum.
    MaxF,
    /// Float compare and exchange.
    CmpSwapF,
    /// Masked or: `(old & !data) | data2` (LDS only).
    MaskOr,
    /// Wrapping step: `old >= data ? old - data : old + data2` (LDS only).
    Wrap,
}

/// The memory semantics of a FLAT/GLOBAL/SCRATCH opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemAccess {
    /// Load `bytes` bytes.
    Load {
        /// Bytes per lane (1, 2, 4, 8, 12, 16).
        bytes: u8,
        /// Sign-extend sub-dword values.
        signed: bool,
        /// Placement of 16-bit results.
        d16: D16,
    },
    /// Store `bytes` bytes.
    Store {
        /// Bytes per lane.
        bytes: u8,
        /// Store the high half of the data VGPR (`*_d16_hi_*`).
        high_half: bool,
    },
    /// Atomic read-modify-write.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// 64-bit operands.
        wide: bool,
    },
}

impl MemAccess {
    /// Classifies a FLAT/GLOBAL/SCRATCH mnemonic (`global_load_b32`, `flat_atomic_add_f32`).
    pub fn classify(mnemonic: &str) -> Option<MemAccess> {
        let (_, rest) = mnemonic.split_once('_')?;
        if let Some(kind) = rest.strip_prefix("load_") {
            let (bytes, signed, d16) = match kind {
                "b32" => (4, false, D16::Full),
                "b64" => (8, false, D16::Full),
                "b96" => (12, false, D16::Full),
                "b128" => (16, false, D16::Full),
                "u8" => (1, false, D16::Full),
                "i8" => (1, true, D16::Full),
                "u16" => (2, false, D16::Full),
                "i16" => (2, true, D16::Full),
                "d16_u8" => (1, false, D16::Low),
                "d16_i8" => (1, true, D16::Low),
                "d16_b16" => (2, false, D16::Low),
                "d16_hi_u8" => (1, false, D16::High),
                "d16_hi_i8" => (1, true, D16::High),
                "d16_hi_b16" => (2, false, D16::High),
                _ => return None,
            };
            return Some(MemAccess::Load { bytes, signed, d16 });
        }
        if let Some(kind) = rest.strip_prefix("store_") {
            let (bytes, high_half) = match kind {
                "b8" => (1, false),
                "b16" => (2, false),
                "b32" => (4, false),
                "b64" => (8, false),
                "b96" => (12, false),
                "b128" => (16, false),
                "d16_hi_b8" => (1, true),
                "d16_hi_b16" => (2, true),
                _ => return None,
            };
            return Some(MemAccess::Store { bytes, high_half });
        }
        let kind = rest.strip_prefix("atomic_")?;
        let (name, ty) = kind.rsplit_once('_')?;
        let wide = ty.ends_with("64");
        let float = ty.starts_with('f');
        let op = match (name, float) {
            ("swap", _) => AtomicOp::Swap,
            ("cmpswap", false) => AtomicOp::CmpSwap,
            ("cmpswap", true) => AtomicOp::CmpSwapF,
            ("add", false) => AtomicOp::Add,
            ("add", true) => AtomicOp::AddF,
            ("sub", _) => AtomicOp::Sub,
            ("csub", _) => AtomicOp::Csub,
            ("smin", _) => AtomicOp::Smin,
            ("umin", _) => AtomicOp::Umin,
            ("smax", _) => AtomicOp::Smax,
            ("umax", _) => AtomicOp::Umax,
            ("and", _) => AtomicOp::And,
            ("or", _) => AtomicOp::Or,
            ("xor", _) => AtomicOp::Xor,
            ("inc", _) => AtomicOp::Inc,
            ("dec", _) => AtomicOp::Dec,
            ("min", true) => AtomicOp::MinF,
            ("max", true) => AtomicOp::MaxF,
            _ => return None,
        };
        Some(MemAccess::Atomic { op, wide })
    }
}

/// An instruction of an encoding this decoder recognises but does not break down.
#[derive(Clone, Debug, PartialEq)]
pub struct OtherInst {
    /// The encoding.
    pub encoding: Encoding,
    /// Mnemonic if the opcode is known.
    pub mnemonic: &'static str,
}

/// The opcode of a buffer instruction: untyped (MUBUF) or typed (MTBUF, format in the
/// instruction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferOpcode {
    /// MUBUF
    Mubuf(MubufOp),
    /// MTBUF
    Mtbuf(MtbufOp),
}

impl BufferOpcode {
    /// LLVM mnemonic.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Self::Mubuf(op) => op.mnemonic(),
            Self::Mtbuf(op) => op.mnemonic(),
        }
    }

    /// Operand specs.
    pub const fn operands(self) -> &'static [OperandSpec] {
        match self {
            Self::Mubuf(op) => op.operands(),
            Self::Mtbuf(op) => op.operands(),
        }
    }
}

/// MUBUF / MTBUF: a vector memory access addressed through a 128-bit buffer resource (V#).
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// Opcode.
    pub op: BufferOpcode,
    /// Data VGPR(s): the source of stores and atomics, the destination of loads and
    /// returning atomics.
    pub vdata: Operand,
    /// Address VGPR(s): the index (`idxen`), then the offset (`offen`).
    pub vaddr: Operand,
    /// First of the four SGPRs holding the resource descriptor.
    pub srsrc: Operand,
    /// Scalar byte offset added to the address.
    pub soffset: Operand,
    /// Unsigned 12-bit byte offset.
    pub offset: u16,
    /// VADDR supplies a byte offset.
    pub offen: bool,
    /// VADDR supplies a record index.
    pub idxen: bool,
    /// GLC (atomics: return the pre-op value).
    pub glc: bool,
    /// SLC.
    pub slc: bool,
    /// DLC.
    pub dlc: bool,
    /// Texture-fail enable: one more VDATA register receives a fetch status.
    pub tfe: bool,
    /// MTBUF: the data format (`BufferFormat` number); `None` for MUBUF.
    pub format: Option<u8>,
    /// What the instruction does to memory (None: not modelled, e.g. `buffer_load_lds_*`).
    pub access: Option<BufferAccess>,
}

impl Buffer {
    /// VGPRs of VADDR: one per enabled address component.
    pub fn vaddr_dwords(&self) -> usize {
        usize::from(self.offen) + usize::from(self.idxen)
    }
}

/// The memory semantics of a buffer opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferAccess {
    /// Untyped load/store/atomic, as for FLAT.
    Raw(MemAccess),
    /// Load of `components` elements converted from a data format (the instruction's for
    /// MTBUF, the descriptor's for MUBUF).
    LoadFormat {
        /// Elements (1..=4).
        components: u8,
        /// Elements are packed 16-bit values; placement of a single one.
        d16: Option<D16>,
    },
    /// Store of `components` elements converted to a data format.
    StoreFormat {
        /// Elements (1..=4).
        components: u8,
        /// Elements are packed 16-bit values; `Some(High)` takes the one element from the
        /// high half.
        d16: Option<D16>,
    },
    /// Cache invalidation (`buffer_gl0_inv`, `buffer_gl1_inv`): no effect in a functional model.
    Invalidate,
}

impl BufferAccess {
    /// Classifies a MUBUF/MTBUF mnemonic.
    pub fn classify(mnemonic: &str) -> Option<BufferAccess> {
        if matches!(mnemonic, "buffer_gl0_inv" | "buffer_gl1_inv") {
            return Some(BufferAccess::Invalidate);
        }
        let rest = mnemonic
            .strip_prefix("tbuffer_")
            .or_else(|| mnemonic.strip_prefix("buffer_"))?;
        if rest.starts_with("load_lds_") {
            return None;
        }
        let format = rest
            .strip_prefix("load_")
            .map(|kind| (true, kind))
            .or_else(|| rest.strip_prefix("store_").map(|kind| (false, kind)))
            .and_then(|(is_load, kind)| Some((is_load, format_parts(kind)?)));
        if let Some((is_load, (d16, components))) = format {
            // A single 16-bit element goes to the low half, leaving the high half as it was.
            let d16 = match d16 {
                Some(D16::Full) if components == 1 => Some(D16::Low),
                other => other,
            };
            return Some(if is_load {
                BufferAccess::LoadFormat { components, d16 }
            } else {
                BufferAccess::StoreFormat { components, d16 }
            });
        }
        MemAccess::classify(mnemonic)
            .or_else(|| integer_min_max_atomic(mnemonic))
            .map(BufferAccess::Raw)
    }
}

/// `(d16, components)` of a format load/store's name after `load_`/`store_`
/// (`d16_format_xy` → 16-bit elements, 2 of them).
fn format_parts(kind: &str) -> Option<(Option<D16>, u8)> {
    let (d16, components) = if let Some(c) = kind.strip_prefix("format_") {
        (None, c)
    } else if let Some(c) = kind.strip_prefix("d16_format_") {
        (Some(D16::Full), c)
    } else {
        (Some(D16::High), kind.strip_prefix("d16_hi_format_")?)
    };
    let components = match components {
        "x" => 1,
        "xy" => 2,
        "xyz" => 3,
        "xyzw" => 4,
        _ => return None,
    };
    Some((d16, components))
}

/// Atomics named `*_atomic_{min,max}_{i,u}{32,64}` (RDNA3 spelling of smin/umin/smax/umax).
pub fn integer_min_max_atomic(mnemonic: &str) -> Option<MemAccess> {
    let (_, rest) = mnemonic.split_once("_atomic_")?;
    let (name, ty) = rest.split_once('_')?;
    let wide = match ty {
        "i32" | "u32" => false,
        "i64" | "u64" => true,
        _ => return None,
    };
    let signed = ty.starts_with('i');
    let op = match (name, signed) {
        ("min", true) => AtomicOp::Smin,
        ("min", false) => AtomicOp::Umin,
        ("max", true) => AtomicOp::Smax,
        ("max", false) => AtomicOp::Umax,
        _ => return None,
    };
    Some(MemAccess::Atomic { op, wide })
}

fn field(value: u64, hi: u32, lo: u32) -> u32 {
    let width = hi - lo + 1;
    ((value >> lo) & ((1u64 << width) - 1)) as u32
}

fn sign_extend(value: u32, bits: u32) -> i32 {
    let shift = 32 - bits;
    ((value << shift) as i32) >> shift
}

/// Words available for one instruction, with literal/DPP bookkeeping.
struct Reader<'a> {
    words: &'a [u32],
}

impl Reader<'_> {
    fn word(&self, index: usize) -> Result<u32, DecodeError> {
        self.words
            .get(index)
            .copied()
            .ok_or(DecodeError::Truncated { needed: index + 1 })
    }
    fn qword(&self) -> Result<u64, DecodeError> {
        Ok(u64::from(self.word(0)?) | (u64::from(self.word(1)?) << 32))
    }
}

/// Decodes the instruction starting at `words[0]`. `words` may hold more dwords than needed
/// (up to [`MAX_INST_WORDS`] are looked at).
pub fn decode(words: &[u32]) -> Result<Decoded, DecodeError> {
    let reader = Reader { words };
    let first = reader.word(0)?;
    let undecodable = DecodeError::Undecodable { word: first };
    let encoding = identify_encoding(first).ok_or(undecodable)?;
    let raw = u64::from(first);
    match encoding {
        Encoding::Sop1 => {
            let op = Sop1Op::from_u32(field(raw, 15, 8)).ok_or(undecodable)?;
            let src = field(raw, 7, 0) as u16;
            // The source of s_sendmsg_rtn_* is a message id, never a literal.
            let message = matches!(op, Sop1Op::S_SENDMSG_RTN_B32 | Sop1Op::S_SENDMSG_RTN_B64);
            let (literal, words) = literal_after(&reader, 1, src == 255 && !message)?;
            let inst = Sop1 {
                op,
                sdst: Operand::from_sreg(field(raw, 22, 16) as u8),
                ssrc0: Operand::from_src(src, literal),
            };
            let checked: &[_] = if message {
                &[("sdst", inst.sdst)]
            } else {
                &[("sdst", inst.sdst), ("ssrc0", inst.ssrc0)]
            };
            require_llvm_operands(first, op.operands(), checked)?;
            Ok(Decoded {
                inst: Inst::Sop1(inst),
                words,
            })
        }
        Encoding::Sop2 => {
            let op = Sop2Op::from_u32(field(raw, 29, 23)).ok_or(undecodable)?;
            let (s0, s1) = (field(raw, 7, 0) as u16, field(raw, 15, 8) as u16);
            let (literal, words) = literal_after(&reader, 1, s0 == 255 || s1 == 255)?;
            let inst = Sop2 {
                op,
                sdst: Operand::from_sreg(field(raw, 22, 16) as u8),
                ssrc0: Operand::from_src(s0, literal),
                ssrc1: Operand::from_src(s1, literal),
            };
            require_llvm_operands(
                first,
                op.operands(),
                &[
                    ("sdst", inst.sdst),
                    ("ssrc0", inst.ssrc0),
                    ("ssrc1", inst.ssrc1),
                ],
            )?;
            Ok(Decoded {
                inst: Inst::Sop2(inst),
                words,
            })
        }
        Encoding::Sopk => {
            let op = SopkOp::from_u32(field(raw, 27, 23)).ok_or(undecodable)?;
            let (literal, words) = literal_after(&reader, 1, op == SopkOp::S_SETREG_IMM32_B32)?;
            let inst = Sopk {
                op,
                sdst: Operand::from_sreg(field(raw, 22, 16) as u8),
                simm16: field(raw, 15, 0) as u16,
                literal,
            };
            require_llvm_operands(first, op.operands(), &[("sdst", inst.sdst)])?;
            Ok(Decoded {
                inst: Inst::Sopk(inst),
                words,
            })
        }
        Encoding::Sopc => {
            let op = SopcOp::from_u32(field(raw, 22, 16)).ok_or(undecodable)?;
            let (s0, s1) = (field(raw, 7, 0) as u16, field(raw, 15, 8) as u16);
            let (literal, words) = literal_after(&reader, 1, s0 == 255 || s1 == 255)?;
            let inst = Sopc {
                op,
                ssrc0: Operand::from_src(s0, literal),
                ssrc1: Operand::from_src(s1, literal),
            };
            require_llvm_operands(
                first,
                op.operands(),
                &[("ssrc0", inst.ssrc0), ("ssrc1", inst.ssrc1)],
            )?;
            Ok(Decoded {
                inst: Inst::Sopc(inst),
                words,
            })
        }
        Encoding::Sopp => {
            let op = SoppOp::from_u32(field(raw, 22, 16)).ok_or(undecodable)?;
            Ok(Decoded {
                inst: Inst::Sopp(Sopp {
                    op,
                    simm16: field(raw, 15, 0) as u16,
                }),
                words: 1,
            })
        }
        Encoding::Smem => {
            let raw = reader.qword()?;
            let op = SmemOp::from_u32(field(raw, 25, 18)).ok_or(undecodable)?;
            let inst = Smem {
                op,
                sdata: Operand::from_sreg(field(raw, 12, 6) as u8),
                sbase: Operand::from_sreg((field(raw, 5, 0) << 1) as u8),
                offset: sign_extend(field(raw, 52, 32), 21),
                soffset: Operand::from_sreg(field(raw, 63, 57) as u8),
                glc: field(raw, 14, 14) != 0,
                dlc: field(raw, 13, 13) != 0,
            };
            require_llvm_operands(
                first,
                op.operands(),
                &[
                    ("sdata", inst.sdata),
                    ("sbase", inst.sbase),
                    ("soffset", inst.soffset),
                ],
            )?;
            Ok(Decoded {
                inst: Inst::Smem(inst),
                words: 2,
            })
        }
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc => valu::decode_short(&reader, encoding),
        Encoding::Vop3 => valu::decode_vop3(&reader),
        Encoding::Vop3p => valu::decode_vop3p(&reader),
        Encoding::Vopd => valu::decode_vopd(&reader),
        Encoding::Ds => {
            let raw = reader.qword()?;
            let op = DsOp::from_u32(field(raw, 25, 18)).ok_or(undecodable)?;
            let inst = Ds {
                op,
                vdst: Operand::Vgpr(field(raw, 63, 56) as u8),
                addr: Operand::Vgpr(field(raw, 39, 32) as u8),
                data0: Operand::Vgpr(field(raw, 47, 40) as u8),
                data1: Operand::Vgpr(field(raw, 55, 48) as u8),
                offset0: field(raw, 7, 0) as u8,
                offset1: field(raw, 15, 8) as u8,
                gds: field(raw, 17, 17) != 0,
            };
            Ok(Decoded {
                inst: Inst::Ds(inst),
                words: 2,
            })
        }
        Encoding::Flat | Encoding::Global | Encoding::Scratch => {
            let raw = reader.qword()?;
            let number = field(raw, 24, 18);
            let (segment, op) = match encoding {
                Encoding::Flat => (
                    FlatSegment::Flat,
                    FlatOpcode::Flat(FlatOp::from_u32(number).ok_or(undecodable)?),
                ),
                Encoding::Global => (
                    FlatSegment::Global,
                    FlatOpcode::Global(GlobalOp::from_u32(number).ok_or(undecodable)?),
                ),
                _ => (
                    FlatSegment::Scratch,
                    FlatOpcode::Scratch(ScratchOp::from_u32(number).ok_or(undecodable)?),
                ),
            };
            let inst = Flat {
                segment,
                op,
                vdst: Operand::Vgpr(field(raw, 63, 56) as u8),
                addr: Operand::Vgpr(field(raw, 39, 32) as u8),
                data: Operand::Vgpr(field(raw, 47, 40) as u8),
                saddr: Operand::from_sreg(field(raw, 54, 48) as u8),
                offset: sign_extend(field(raw, 12, 0), 13),
                glc: field(raw, 14, 14) != 0,
                slc: field(raw, 15, 15) != 0,
                dlc: field(raw, 13, 13) != 0,
                sve: field(raw, 55, 55) != 0,
                access: MemAccess::classify(op.mnemonic()),
            };
            // GLOBAL's scalar base is an address (a pair); SCRATCH's an offset. FLAT has none.
            let saddr_dwords = if segment == FlatSegment::Global { 2 } else { 1 };
            if segment != FlatSegment::Flat && !llvm_decodes(inst.saddr, saddr_dwords) {
                return Err(undecodable);
            }
            Ok(Decoded {
                inst: Inst::Flat(inst),
                words: 2,
            })
        }
        Encoding::Mubuf | Encoding::Mtbuf => {
            let raw = reader.qword()?;
            let (op, format) = if encoding == Encoding::Mubuf {
                let op = MubufOp::from_u32(field(raw, 25, 18)).ok_or(undecodable)?;
                (BufferOpcode::Mubuf(op), None)
            } else {
                let op = MtbufOp::from_u32(field(raw, 18, 15)).ok_or(undecodable)?;
                (BufferOpcode::Mtbuf(op), Some(field(raw, 25, 19) as u8))
            };
            let soffset = field(raw, 63, 56) as u16;
            // LLVM reads a literal dword for SOFFSET 255, so the instruction is 3 dwords.
            let (literal, words) = literal_after(&reader, 2, soffset == 255)?;
            let inst = Buffer {
                op,
                vdata: Operand::Vgpr(field(raw, 47, 40) as u8),
                vaddr: Operand::Vgpr(field(raw, 39, 32) as u8),
                srsrc: Operand::from_sreg((field(raw, 52, 48) << 2) as u8),
                soffset: Operand::from_src(soffset, literal),
                offset: field(raw, 11, 0) as u16,
                offen: field(raw, 54, 54) != 0,
                idxen: field(raw, 55, 55) != 0,
                glc: field(raw, 14, 14) != 0,
                slc: field(raw, 12, 12) != 0,
                dlc: field(raw, 13, 13) != 0,
                tfe: field(raw, 53, 53) != 0,
                format,
                access: BufferAccess::classify(op.mnemonic()),
            };
            if !llvm_decodes(inst.srsrc, 4) || !llvm_decodes(inst.soffset, 1) {
                return Err(undecodable);
            }
            Ok(Decoded {
                inst: Inst::Buffer(inst),
                words,
            })
        }
        Encoding::Mimg | Encoding::Exp | Encoding::Vinterp => {
            reader.qword()?;
            let mnemonic = other_mnemonic(encoding, raw).ok_or(undecodable)?;
            Ok(Decoded {
                inst: Inst::Other(OtherInst { encoding, mnemonic }),
                words: 2,
            })
        }
        Encoding::Ldsdir => {
            let mnemonic = other_mnemonic(encoding, raw).ok_or(undecodable)?;
            Ok(Decoded {
                inst: Inst::Other(OtherInst { encoding, mnemonic }),
                words: 1,
            })
        }
    }
}

fn other_mnemonic(encoding: Encoding, raw: u64) -> Option<&'static str> {
    match encoding {
        Encoding::Mimg => MimgOp::from_u32(field(raw, 25, 18)).map(MimgOp::mnemonic),
        Encoding::Exp => Some(ExpOp::EXP.mnemonic()),
        Encoding::Vinterp => VinterpOp::from_u32(field(raw, 22, 16)).map(VinterpOp::mnemonic),
        Encoding::Ldsdir => LdsdirOp::from_u32(field(raw, 21, 20)).map(LdsdirOp::mnemonic),
        _ => None,
    }
}

/// Registers an operand field of `specs` spans (64-bit operands occupy register pairs).
pub(crate) fn spec_dwords(specs: &'static [OperandSpec], name: &str) -> u32 {
    operand_spec(specs, name).map_or(1, |spec| (u32::from(spec.bits) / 32).max(1))
}

/// Whether LLVM decodes `operand` in a position of `dwords` scalar registers. It refuses the
/// reserved source values everywhere. As the first register of a wider operand it refuses the
/// registers no tuple starts at (vcc_hi, m0, exec_hi), src_lds_direct, and SGPR or TTMP tuples
/// that run past their file once aligned. A misaligned tuple it accepts, printing the aligned
/// one below it with a warning, and VCC or EXEC as more than a pair too, flagging them as
/// registers of the wrong class: those decode here as well, and the executor refuses them.
pub(crate) fn llvm_decodes(operand: Operand, dwords: u32) -> bool {
    if matches!(operand, Operand::Reserved(_)) {
        return false;
    }
    if dwords <= 1 {
        return true;
    }
    let ends_inside = |n: u8, file: usize| usize::from(n) + dwords as usize <= file;
    match operand.aligned_tuple(dwords) {
        Operand::Sgpr(n) => ends_inside(n, SGPR_COUNT),
        Operand::Ttmp(n) => ends_inside(n, TTMP_COUNT),
        Operand::VccHi | Operand::ExecHi | Operand::M0 | Operand::LdsDirect => false,
        _ => true,
    }
}

/// Refuses the instruction starting with `word` unless LLVM decodes every named operand at the
/// width `specs` gives its field (operands `specs` does not name are not checked).
pub(super) fn require_llvm_operands(
    word: u32,
    specs: &'static [OperandSpec],
    operands: &[(&str, Operand)],
) -> Result<(), DecodeError> {
    let decodes = operands.iter().all(|&(name, operand)| {
        operand_spec(specs, name).is_none() || llvm_decodes(operand, spec_dwords(specs, name))
    });
    if decodes {
        Ok(())
    } else {
        Err(DecodeError::Undecodable { word })
    }
}

/// If `needed`, reads the literal dword after `base_words` dwords.
fn literal_after(
    reader: &Reader<'_>,
    base_words: usize,
    needed: bool,
) -> Result<(Option<u32>, usize), DecodeError> {
    if needed {
        Ok((Some(reader.word(base_words)?), base_words + 1))
    } else {
        Ok((None, base_words))
    }
}
