//! SDMA (system DMA, gfx11 / SDMA v6) packets: each packet declared once, with an encoder (the
//! driver builds copy-queue streams) and a decoder (the emulated SDMA engine executes them),
//! plus [`SdmaBuilder`], which emits the exact sequences of the reference runtime.
//!
//! An SDMA packet starts with a header dword holding `op` (bits 0..8) and `sub_op` (bits
//! 8..16); the upper half carries per-packet flags. Unlike PM4, the header does not say how
//! long the packet is: the length follows from `op`/`sub_op` ([`Header::packet_len`]). A zero dword is
//! a one-dword `NOP`, which is how a submitter pads the end of the ring so that no packet
//! straddles it.

use crate::pm4::CompareFunction;

mod builder;

pub use builder::SdmaBuilder;

/// `NOP` ([`Nop`]); a zero dword is a one-dword `NOP`.
pub const OP_NOP: u8 = 0;
/// The copy packets; sub-op [`SUBOP_COPY_LINEAR`] is [`CopyLinear`].
pub const OP_COPY: u8 = 1;
/// The write packets; sub-op [`SUBOP_WRITE_LINEAR`] is [`WriteLinear`].
pub const OP_WRITE: u8 = 2;
/// `INDIRECT`: runs an indirect buffer of SDMA packets, then returns to the ring.
pub const OP_INDIRECT: u8 = 4;
/// `FENCE` ([`Fence`]): a 32-bit write once the packets before it are done.
pub const OP_FENCE: u8 = 5;
/// `TRAP` ([`Trap`]): an interrupt carrying a context id.
pub const OP_TRAP: u8 = 6;
/// `POLL_REGMEM` ([`PollRegmem`]; the HDP flush [`HdpFlush`] is one): wait on a register or memory
/// dword.
pub const OP_POLL_REGMEM: u8 = 8;
/// `ATOMIC` ([`Atomic`]): an atomic operation on memory.
pub const OP_ATOMIC: u8 = 10;
/// `CONST_FILL` ([`ConstFill`]): fill memory with a repeated value.
pub const OP_CONST_FILL: u8 = 11;
/// The timestamp packets: set the engine's counter or write a clock (sub-ops `SUBOP_TIMESTAMP_*`).
pub const OP_TIMESTAMP: u8 = 13;
/// `GCR` ([`Gcr`], sub-op [`SUBOP_USER_GCR`]): write back or invalidate caches over a range.
pub const OP_GCR: u8 = 17;

/// [`OP_COPY`] sub-op: a linear byte copy ([`CopyLinear`]).
pub const SUBOP_COPY_LINEAR: u8 = 0;
/// [`OP_WRITE`] sub-op: the packet's dwords to consecutive memory ([`WriteLinear`]).
pub const SUBOP_WRITE_LINEAR: u8 = 0;
/// [`OP_COPY`] sub-op: a rectangle copy between pitched surfaces (13 dwords; sized here, not
/// decoded).
pub const SUBOP_COPY_LINEAR_RECT: u8 = 4;
/// [`OP_TIMESTAMP`] sub-op: load the engine's own timestamp counter (not modelled).
pub const SUBOP_TIMESTAMP_SET: u8 = 0;
/// [`OP_TIMESTAMP`] sub-op: write the engine's own counter (not modelled).
pub const SUBOP_TIMESTAMP_GET: u8 = 1;
/// [`OP_TIMESTAMP`] sub-op: write the 64-bit global GPU clock ([`Timestamp`]).
pub const SUBOP_TIMESTAMP_GET_GLOBAL: u8 = 2;
/// [`OP_GCR`] sub-op of the cache operation a user queue may issue ([`Gcr`]).
pub const SUBOP_USER_GCR: u8 = 1;

/// The name of an SDMA v6 `op` (and `sub_op` where it changes the packet), for fault reports.
pub fn packet_name(op: u8, sub_op: u8) -> &'static str {
    match (op, sub_op) {
        (0, _) => "NOP",
        (1, 0) => "COPY_LINEAR",
        (1, 1) => "COPY_TILED",
        (1, 3) => "COPY_SOA",
        (1, 4) => "COPY_LINEAR_RECT",
        (1, _) => "COPY (another sub_op)",
        (2, 0) => "WRITE_LINEAR",
        (2, _) => "WRITE (another sub_op)",
        (4, _) => "INDIRECT",
        (5, _) => "FENCE",
        (6, _) => "TRAP",
        (7, _) => "SEM",
        (8, _) => "POLL_REGMEM",
        (9, _) => "COND_EXE",
        (10, _) => "ATOMIC",
        (11, _) => "CONST_FILL",
        (12, _) => "PTEPDE",
        (13, 0) => "TIMESTAMP_SET",
        (13, 1) => "TIMESTAMP_GET",
        (13, 2) => "TIMESTAMP_GET_GLOBAL",
        (13, _) => "TIMESTAMP (another sub_op)",
        (14, _) => "SRBM_WRITE",
        (15, _) => "PRE_EXE",
        (16, _) => "GPUVM_INV",
        (17, _) => "GCR",
        (32, _) => "DUMMY_TRAP",
        _ => "an unknown SDMA op",
    }
}

/// `ATOMIC` operation: 64-bit add (`SDMA_ATOMIC_ADD64`).
pub const ATOMIC_ADD64: u8 = 47;

/// The reference runtime's largest transfer per `COPY_LINEAR` (4 MiB: the count field of
/// older SDMA versions, 22 bits, which the reference definitions also list); the builder
/// splits copies at it so that its words match the reference encodings.
pub const MAX_COPY_SIZE: u64 = 0x40_0000;
/// Largest fill per `CONST_FILL` the builder emits (the same 4 MiB).
pub const MAX_FILL_SIZE: u64 = 0x40_0000;
/// Mask of the `bytes - 1` count fields of `COPY_LINEAR` and `CONST_FILL`: 30 bits on SDMA
/// v6 (`SDMA_PKT_COPY_LINEAR_COUNT_count_mask` 0x3FFFFFFF in the sdma_v6_0 packet header),
/// where tinygrad 0.14 copies up to 1 GiB per packet.
const COUNT_MASK: u32 = (1 << 30) - 1;

/// `COPY_LINEAR` header flags (`extra_info`, header bits 16..32) that change what is copied.
pub mod copy_flags {
    /// Bit 0 (header bit 16): encrypt or decrypt the data on the way (not modelled).
    pub const ENCRYPT: u16 = 1 << 0;
    /// Bit 2 (header bit 18): the access is to trusted (secure) memory (not modelled).
    pub const TMZ: u16 = 1 << 2;
    /// Cache policy valid: no functional effect.
    pub const CPV: u16 = 1 << 3;
    /// Bit 9 (header bit 25): copy from the ends of the ranges toward their starts (not modelled).
    pub const BACKWARDS: u16 = 1 << 9;
    /// Two destinations (a longer packet).
    pub const BROADCAST: u16 = 1 << 11;
}

/// `FENCE` memory type the reference runtime uses (`mtype = 3`: uncached).
pub const FENCE_MTYPE_UC: u8 = 3;

/// The header dword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Bits 0..8: the opcode (an `OP_*` constant).
    pub op: u8,
    /// Bits 8..16: the sub-opcode, which picks the variant of ops such as [`OP_COPY`] and
    /// [`OP_TIMESTAMP`].
    pub sub_op: u8,
    /// Bits 16..32: packet-specific flags.
    pub flags: u16,
}

/// A header dword.
pub const fn header(op: u8, sub_op: u8, flags: u16) -> u32 {
    (op as u32) | ((sub_op as u32) << 8) | ((flags as u32) << 16)
}

impl Header {
    /// Splits a header dword into its fields; every dword parses.
    pub fn parse(word: u32) -> Header {
        Header {
            op: word as u8,
            sub_op: (word >> 8) as u8,
            flags: (word >> 16) as u16,
        }
    }

    /// Whole packet length in dwords, header included, reading the body dword that holds it
    /// through `dword` when the header alone does not say (`WRITE`); `None` when `op`/`sub_op`
    /// is not a packet this module knows the size of, or `dword` has no such dword.
    pub fn packet_len_with(&self, dword: impl FnOnce(usize) -> Option<u32>) -> Option<usize> {
        if (self.op, self.sub_op) == (OP_WRITE, SUBOP_WRITE_LINEAR) {
            let count = dword(WriteLinear::COUNT_DWORD)?;
            return Some(WriteLinear::LEN_BEFORE_DATA + WriteLinear::dwords_of(count));
        }
        self.packet_len()
    }

    /// Whole packet length in dwords, header included, or `None` when `op`/`sub_op` is not a
    /// packet this module knows the size of from its header alone.
    pub fn packet_len(&self) -> Option<usize> {
        Some(match (self.op, self.sub_op) {
            // NOP: bits 16..30 count the extra dwords after the header.
            (OP_NOP, _) => 1 + usize::from(self.flags & 0x3fff),
            // A broadcast copy names a second destination after the first.
            (OP_COPY, SUBOP_COPY_LINEAR) if self.flags & copy_flags::BROADCAST != 0 => {
                CopyLinear::BROADCAST_LEN
            }
            (OP_COPY, SUBOP_COPY_LINEAR) => CopyLinear::LEN,
            (OP_COPY, SUBOP_COPY_LINEAR_RECT) => 13,
            (OP_INDIRECT, _) => Indirect::LEN,
            (OP_FENCE, _) => Fence::LEN,
            (OP_TRAP, _) => Trap::LEN,
            (OP_POLL_REGMEM, _) => PollRegmem::LEN,
            (OP_ATOMIC, _) => Atomic::LEN,
            (OP_CONST_FILL, _) => ConstFill::LEN,
            (OP_TIMESTAMP, SUBOP_TIMESTAMP_SET..=SUBOP_TIMESTAMP_GET_GLOBAL) => Timestamp::LEN,
            (OP_GCR, SUBOP_USER_GCR) => Gcr::LEN,
            _ => return None,
        })
    }
}

/// Why a packet could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer dwords than the packet requires (`have` counts the header too).
    Truncated {
        /// The header's op.
        op: u8,
        /// The header's sub-op.
        sub_op: u8,
        /// Dwords the packet needs, header included.
        need: usize,
        /// Dwords there were.
        have: usize,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated {
                op,
                sub_op,
                need,
                have,
            } => write!(
                f,
                "SDMA packet op {op} sub_op {sub_op} has {have} dwords, needs {need}"
            ),
        }
    }
}

/// Checks that `w` holds at least `n` dwords and returns its header.
fn need(w: &[u32], n: usize) -> Result<Header, DecodeError> {
    let h = Header::parse(w.first().copied().unwrap_or(0));
    if w.len() < n {
        Err(DecodeError::Truncated {
            op: h.op,
            sub_op: h.sub_op,
            need: n,
            have: w.len(),
        })
    } else {
        Ok(h)
    }
}

fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// `NOP`: `count` ignored dwords follow the header. A zero dword is `Nop { count: 0 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Nop {
    /// Header bits 16..30: how many ignored dwords follow the header (14 bits).
    pub count: u16,
}

impl Nop {
    /// Emits the header and `count` zero dwords.
    pub fn encode(&self, out: &mut Vec<u32>) {
        let count = self.count & 0x3fff;
        out.push(header(OP_NOP, 0, count));
        out.resize(out.len() + usize::from(count), 0);
    }
    /// Reads the packet from `w`; fails with [`DecodeError::Truncated`] when `w` is empty or
    /// shorter than the `1 + count` dwords the header announces.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, 1)?;
        let count = h.flags & 0x3fff;
        need(w, 1 + usize::from(count))?;
        Ok(Nop { count })
    }
}

/// `COPY_LINEAR`: copies `count + 1` bytes from `src` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLinear {
    /// Header bits 16..32 (`extra_info`: the [`copy_flags`]; 0 for a plain copy).
    pub extra_info: u16,
    /// Bytes minus one (30 bits).
    pub count: u32,
    /// Dword 2 bits 16..18: byte-swap mode of the writes (0: none; others not modelled).
    pub dst_swap: u8,
    /// Dword 2 bits 24..26: byte-swap mode of the reads (0: none; others not modelled).
    pub src_swap: u8,
    /// Dwords 3 and 4: the source address (any byte alignment).
    pub src: u64,
    /// Dwords 5 and 6: the destination address (any byte alignment).
    pub dst: u64,
}

impl CopyLinear {
    /// Dwords of a copy, header included (without `BROADCAST`).
    pub const LEN: usize = 7;
    /// Length with the `BROADCAST` flag: two more dwords for the second destination.
    pub const BROADCAST_LEN: usize = 9;
    /// Bytes this packet copies.
    pub fn bytes(&self) -> u64 {
        u64::from(self.count & COUNT_MASK) + 1
    }
    /// Appends the seven dwords to `out` (`count` cut to 30 bits; no second destination, even with
    /// `BROADCAST` in `extra_info`).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_COPY, SUBOP_COPY_LINEAR, self.extra_info),
            self.count & COUNT_MASK,
            ((u32::from(self.dst_swap) & 3) << 16) | ((u32::from(self.src_swap) & 3) << 24),
            self.src as u32,
            (self.src >> 32) as u32,
            self.dst as u32,
            (self.dst >> 32) as u32,
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked. A broadcast copy's second destination is not read.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN)?;
        Ok(CopyLinear {
            extra_info: h.flags,
            count: w[1] & COUNT_MASK,
            dst_swap: ((w[2] >> 16) & 3) as u8,
            src_swap: ((w[2] >> 24) & 3) as u8,
            src: join(w[3], w[4]),
            dst: join(w[5], w[6]),
        })
    }
}

/// `WRITE` linear: writes the packet's `data` dwords to consecutive dwords at `address`.
/// The header's upper half (encryption bit 0, TMZ bit 2, cache policy valid bit 12) is kept in
/// `flags`; `swap` is the count dword's byte-swap mode (bits 24..26).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteLinear {
    /// Header bits 16..32 (encryption bit 0, TMZ bit 2, cache policy valid bit 12).
    pub flags: u16,
    /// Count dword bits 24..26: byte-swap mode of the writes (0: none).
    pub swap: u8,
    /// Dwords 1 and 2: where the first data dword goes (dword aligned).
    pub address: u64,
    /// The dwords written, 1 to 2^20; an empty vector still announces one dword.
    pub data: Vec<u32>,
}

impl WriteLinear {
    /// Dwords before the data: header, address low and high, count.
    pub const LEN_BEFORE_DATA: usize = 4;
    /// Which dword holds the count (data dwords minus one, 20 bits).
    pub const COUNT_DWORD: usize = 3;
    const COUNT_MASK: u32 = (1 << 20) - 1;
    /// Data dwords a count field announces.
    pub fn dwords_of(count: u32) -> usize {
        (count & Self::COUNT_MASK) as usize + 1
    }
    /// Appends the header, address, count (`data.len() - 1`, 20 bits) and the data to `out`.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_WRITE, SUBOP_WRITE_LINEAR, self.flags),
            self.address as u32,
            (self.address >> 32) as u32,
            ((self.data.len().max(1) as u32 - 1) & Self::COUNT_MASK)
                | ((u32::from(self.swap) & 3) << 24),
        ]);
        out.extend_from_slice(&self.data);
    }
    /// Reads the packet from `w`; fails with [`DecodeError::Truncated`] when `w` is shorter than
    /// the four fixed dwords or than the data dwords the count announces.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN_BEFORE_DATA)?;
        let n = Self::dwords_of(w[Self::COUNT_DWORD]);
        need(w, Self::LEN_BEFORE_DATA + n)?;
        Ok(WriteLinear {
            flags: h.flags,
            swap: ((w[Self::COUNT_DWORD] >> 24) & 3) as u8,
            address: join(w[1], w[2]),
            data: w[Self::LEN_BEFORE_DATA..Self::LEN_BEFORE_DATA + n].to_vec(),
        })
    }
}

/// `INDIRECT` (SDMA v6): executes `size_dwords` dwords of packets at `address` (32-byte
/// aligned; the low 5 bits are not encoded), then goes on after this packet. `csa` is the
/// context save area of preemptible IBs (0: none). The header carries the VMID in bits 16..20.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indirect {
    /// Header bits 16..20: the VMID the buffer's packets run under (ignored by the emulator).
    pub vmid: u8,
    /// Dwords 1 and 2: the buffer's address, [`Self::ALIGN`]-byte aligned.
    pub address: u64,
    /// Dword 3: the buffer's length in dwords.
    pub size_dwords: u32,
    /// Dwords 4 and 5: the context save area of a preemptible buffer, or 0 for none.
    pub csa: u64,
}

impl Indirect {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 6;
    /// Required alignment of `address`, in bytes.
    pub const ALIGN: u64 = 32;
    /// Appends the six dwords to `out` (`vmid` cut to 4 bits, the address's low 5 bits dropped).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_INDIRECT, 0, u16::from(self.vmid) & 0xf),
            (self.address as u32) & !(Self::ALIGN as u32 - 1),
            (self.address >> 32) as u32,
            self.size_dwords,
            self.csa as u32,
            (self.csa >> 32) as u32,
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN)?;
        Ok(Indirect {
            vmid: (h.flags & 0xf) as u8,
            address: join(w[1] & !(Self::ALIGN as u32 - 1), w[2]),
            size_dwords: w[3],
            csa: join(w[4], w[5]),
        })
    }
}

/// `FENCE`: writes the 32-bit `data` to `address` once everything before it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// Memory type of the write (3 bits).
    pub mtype: u8,
    /// Header bit 19 (`GCC`): a memory-attribute bit of the write (no functional effect).
    pub gcc: bool,
    /// Header bit 20 (`SYS`): the write targets system memory (an attribute; no functional effect).
    pub sys: bool,
    /// Header bit 22 (`SNP`): the write snoops the CPU caches (an attribute; no functional effect).
    pub snp: bool,
    /// Header bit 23 (`GPA`): the address is a guest physical one (an attribute the reference
    /// runtime leaves 0).
    pub gpa: bool,
    /// L2 cache policy (2 bits).
    pub l2_policy: u8,
    /// Dwords 1 and 2: where `data` goes (dword aligned; the emulator drops bits 0..2).
    pub address: u64,
    /// Dword 3: the value written.
    pub data: u32,
}

impl Fence {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 4;
    /// The fence the reference runtime emits: uncached write of `data` to `address`.
    pub fn new(address: u64, data: u32) -> Self {
        Fence {
            mtype: FENCE_MTYPE_UC,
            gcc: false,
            sys: false,
            snp: false,
            gpa: false,
            l2_policy: 0,
            address,
            data,
        }
    }
    /// Appends the four dwords to `out`, header flags masked to their widths.
    pub fn encode(&self, out: &mut Vec<u32>) {
        let flags = (u16::from(self.mtype) & 7)
            | (u16::from(self.gcc) << 3)
            | (u16::from(self.sys) << 4)
            | (u16::from(self.snp) << 6)
            | (u16::from(self.gpa) << 7)
            | ((u16::from(self.l2_policy) & 3) << 8);
        out.extend_from_slice(&[
            header(OP_FENCE, 0, flags),
            self.address as u32,
            (self.address >> 32) as u32,
            self.data,
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN)?;
        let f = h.flags;
        Ok(Fence {
            mtype: (f & 7) as u8,
            gcc: f & (1 << 3) != 0,
            sys: f & (1 << 4) != 0,
            snp: f & (1 << 6) != 0,
            gpa: f & (1 << 7) != 0,
            l2_policy: ((f >> 8) & 3) as u8,
            address: join(w[1], w[2]),
            data: w[3],
        })
    }
}

/// `TRAP`: raises an interrupt carrying `int_ctx` (28 bits), which signals that event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trap {
    /// Dword 1 bits 0..28: the interrupt's context id, which KFD reads as the id of the event to
    /// signal.
    pub int_ctx: u32,
}

impl Trap {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 2;
    /// Appends the two dwords to `out` (`int_ctx` cut to 28 bits).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[header(OP_TRAP, 0, 0), self.int_ctx & 0x0fff_ffff]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        need(w, Self::LEN)?;
        Ok(Trap {
            int_ctx: w[1] & 0x0fff_ffff,
        })
    }
}

/// `POLL_REGMEM`: polls a memory dword (`mem_poll`) or a register until
/// `(value & mask) <func> reference` holds (the functions of [`CompareFunction`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRegmem {
    /// Request an HDP flush (register form only).
    pub hdp_flush: bool,
    /// Compare function (3 bits).
    pub func: u8,
    /// Poll memory (`true`) or a register (`false`).
    pub mem_poll: bool,
    /// Dwords 1 and 2: the memory dword polled (dword aligned), or a register's byte address in the
    /// register form.
    pub address: u64,
    /// Dword 3: the value the masked value is compared with.
    pub reference: u32,
    /// Dword 4: the bits of the polled value that take part in the comparison.
    pub mask: u32,
    /// Poll interval (16 bits, in 160-clock units on hardware).
    pub interval: u16,
    /// Number of polls before giving up (12 bits; `0xfff`: forever).
    pub retry_count: u16,
}

impl PollRegmem {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 6;
    /// Appends the six dwords to `out`, fields masked to their widths.
    pub fn encode(&self, out: &mut Vec<u32>) {
        let flags = (u16::from(self.hdp_flush) << 10)
            | ((u16::from(self.func) & 7) << 12)
            | (u16::from(self.mem_poll) << 15);
        out.extend_from_slice(&[
            header(OP_POLL_REGMEM, 0, flags),
            self.address as u32,
            (self.address >> 32) as u32,
            self.reference,
            self.mask,
            u32::from(self.interval) | ((u32::from(self.retry_count) & 0xfff) << 16),
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked. An invalid function shows in [`PollRegmem::compare`].
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN)?;
        Ok(PollRegmem {
            hdp_flush: h.flags & (1 << 10) != 0,
            func: ((h.flags >> 12) & 7) as u8,
            mem_poll: h.flags & (1 << 15) != 0,
            address: join(w[1], w[2]),
            reference: w[3],
            mask: w[4],
            interval: w[5] as u16,
            retry_count: ((w[5] >> 16) & 0xfff) as u16,
        })
    }
    /// The compare function, if valid.
    pub fn compare(&self) -> Option<CompareFunction> {
        CompareFunction::from_bits(u32::from(self.func))
    }
    /// Whether this register-space poll is an HDP flush: the `hdp_flush` bit, or the
    /// reference runtime's form (register poll, function "always", mask 0).
    pub fn is_hdp_flush(&self) -> bool {
        !self.mem_poll && (self.hdp_flush || (self.func == 0 && self.mask == 0))
    }
}

/// The HDP flush of the reference runtime: a register-space `POLL_REGMEM` (6 dwords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HdpFlush {
    /// The register-space poll that makes up the flush.
    pub poll: PollRegmem,
}

impl HdpFlush {
    /// Dwords of the packet, header included: a [`PollRegmem`]'s.
    pub const LEN: usize = PollRegmem::LEN;
    /// The reference runtime's words.
    pub const WORDS: [u32; 6] = [header(OP_POLL_REGMEM, 0, 0), 0, 0x8000_0000, 0, 0, 0];
    /// Appends the poll's six dwords to `out`.
    pub fn encode(&self, out: &mut Vec<u32>) {
        self.poll.encode(out);
    }
    /// Reads the poll from `w` as [`PollRegmem::decode`] does, without checking that it is a flush
    /// ([`Packet::decode`] tells with [`PollRegmem::is_hdp_flush`]).
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        Ok(HdpFlush {
            poll: PollRegmem::decode(w)?,
        })
    }
}

impl Default for HdpFlush {
    fn default() -> Self {
        // The fields of `WORDS`.
        HdpFlush {
            poll: PollRegmem {
                hdp_flush: false,
                func: 0,
                mem_poll: false,
                address: join(Self::WORDS[1], Self::WORDS[2]),
                reference: 0,
                mask: 0,
                interval: 0,
                retry_count: 0,
            },
        }
    }
}

/// `TIMESTAMP` (get global): writes the 64-bit GPU clock to `address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    /// Dwords 1 and 2: where the 64-bit clock value goes.
    pub address: u64,
}

impl Timestamp {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 3;
    /// Appends the three dwords to `out`, with the get-global sub-op.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_TIMESTAMP, SUBOP_TIMESTAMP_GET_GLOBAL, 0),
            self.address as u32,
            (self.address >> 32) as u32,
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked, nor is the sub-op.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        need(w, Self::LEN)?;
        Ok(Timestamp {
            address: join(w[1], w[2]),
        })
    }
}

/// `GCR` control bits ([`Gcr::control`]: the 16 bits of dword 2's upper half, then dword 3's
/// low 3 bits).
pub mod gcr_control {
    /// Instruction cache invalidate (2-bit field).
    pub const GLI_INV: u32 = 3;
    /// Bit 4: write back the metadata cache (GLM).
    pub const GLM_WB: u32 = 1 << 4;
    /// Bit 5: invalidate the metadata cache (GLM).
    pub const GLM_INV: u32 = 1 << 5;
    /// Bit 6: write back the scalar data cache (GLK).
    pub const GLK_WB: u32 = 1 << 6;
    /// Bit 7: invalidate the scalar data cache (GLK).
    pub const GLK_INV: u32 = 1 << 7;
    /// Bit 8: invalidate the vector L0 caches (GLV).
    pub const GLV_INV: u32 = 1 << 8;
    /// Bit 9: invalidate the GL1 caches.
    pub const GL1_INV: u32 = 1 << 9;
    /// Bit 10: `GL2_US`, a modifier of the L2 action that the builder never sets (its effect is not
    /// described here).
    pub const GL2_US: u32 = 1 << 10;
    /// Bit 13: drop dirty L2 lines without writing them back.
    pub const GL2_DISCARD: u32 = 1 << 13;
    /// Bit 14: invalidate L2.
    pub const GL2_INV: u32 = 1 << 14;
    /// Bit 15: write dirty L2 lines back to memory.
    pub const GL2_WB: u32 = 1 << 15;
    /// Bit 16 (dword 3 bit 0): `base` and `limit` are physical addresses.
    pub const RANGE_IS_PA: u32 = 1 << 16;
}

/// `GCR` (user GCR): write back / invalidate caches over `[base, limit]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcr {
    /// Base address (bits 7..48; the low 7 bits are not encoded).
    pub base: u64,
    /// Limit address (bits 7..48).
    pub limit: u64,
    /// The 19 control bits ([`gcr_control`]).
    pub control: u32,
    /// Dword 4 bits 24..28: the VMID whose address space `base` and `limit` are in.
    pub vmid: u8,
}

impl Gcr {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 5;
    /// Appends the five dwords to `out` (addresses cut to bits 7..48, `control` to 19 bits, `vmid`
    /// to 4).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_GCR, SUBOP_USER_GCR, 0),
            (self.base as u32) & !0x7f,
            ((self.base >> 32) as u32 & 0xffff) | ((self.control & 0xffff) << 16),
            ((self.control >> 16) & 7) | ((self.limit as u32) & !0x7f),
            ((self.limit >> 32) as u32 & 0xffff) | ((u32::from(self.vmid) & 0xf) << 24),
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        need(w, Self::LEN)?;
        Ok(Gcr {
            base: u64::from(w[1] & !0x7f) | (u64::from(w[2] & 0xffff) << 32),
            limit: u64::from(w[3] & !0x7f) | (u64::from(w[4] & 0xffff) << 32),
            control: (w[2] >> 16) | ((w[3] & 7) << 16),
            vmid: ((w[4] >> 24) & 0xf) as u8,
        })
    }
}

/// `CONST_FILL`: fills `count + 1` bytes at `address` with `data`, repeated in units of
/// `1 << fill_size` bytes (0: byte, 1: 16-bit, 2: dword; the engine reports 3, whose meaning
/// is not known here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstFill {
    /// Swap mode (2 bits).
    pub sw: u8,
    /// Fill unit (2 bits).
    pub fill_size: u8,
    /// Dwords 1 and 2: where the fill starts.
    pub address: u64,
    /// Dword 3: the value repeated; a byte or 16-bit unit repeats its low bytes.
    pub data: u32,
    /// Bytes minus one (30 bits).
    pub count: u32,
}

impl ConstFill {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 5;
    /// Bytes this packet fills.
    pub fn bytes(&self) -> u64 {
        u64::from(self.count & COUNT_MASK) + 1
    }
    /// Bytes of `data` that repeat.
    pub fn unit(&self) -> usize {
        1 << self.fill_size.min(2)
    }
    /// Appends the five dwords to `out` (`count` cut to 30 bits, `sw` and `fill_size` to 2).
    pub fn encode(&self, out: &mut Vec<u32>) {
        let flags = (u16::from(self.sw) & 3) | ((u16::from(self.fill_size) & 3) << 14);
        out.extend_from_slice(&[
            header(OP_CONST_FILL, 0, flags),
            self.address as u32,
            (self.address >> 32) as u32,
            self.data,
            self.count & COUNT_MASK,
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN)?;
        Ok(ConstFill {
            sw: (h.flags & 3) as u8,
            fill_size: ((h.flags >> 14) & 3) as u8,
            address: join(w[1], w[2]),
            data: w[3],
            count: w[4] & COUNT_MASK,
        })
    }
}

/// `ATOMIC`: an atomic operation (`operation`, 7 bits, e.g. [`ATOMIC_ADD64`]) on `address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Atomic {
    /// Retry compare-and-swap operations until they succeed.
    pub looped: bool,
    /// Header bits 25..32: the operation (the emulator runs only [`ATOMIC_ADD64`]).
    pub operation: u8,
    /// Dwords 1 and 2: the memory operated on (8-byte aligned for the 64-bit operations).
    pub address: u64,
    /// Dwords 3 and 4: the operand (the addend of `ADD64`).
    pub src_data: u64,
    /// Dwords 5 and 6: the value compare-and-swap operations compare with.
    pub cmp_data: u64,
    /// Interval between retries (13 bits).
    pub loop_interval: u16,
}

impl Atomic {
    /// Dwords of the packet, header included.
    pub const LEN: usize = 8;
    /// Appends the eight dwords to `out` (`operation` cut to 7 bits, `loop_interval` to 13).
    pub fn encode(&self, out: &mut Vec<u32>) {
        let flags = u16::from(self.looped) | ((u16::from(self.operation) & 0x7f) << 9);
        out.extend_from_slice(&[
            header(OP_ATOMIC, 0, flags),
            self.address as u32,
            (self.address >> 32) as u32,
            self.src_data as u32,
            (self.src_data >> 32) as u32,
            self.cmp_data as u32,
            (self.cmp_data >> 32) as u32,
            u32::from(self.loop_interval) & 0x1fff,
        ]);
    }
    /// Reads the packet from `w`, header included (words past [`Self::LEN`] are ignored). Fails
    /// with [`DecodeError::Truncated`] only when `w` is shorter than [`Self::LEN`]; the header's op
    /// is not checked.
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, Self::LEN)?;
        Ok(Atomic {
            looped: h.flags & 1 != 0,
            operation: ((h.flags >> 9) & 0x7f) as u8,
            address: join(w[1], w[2]),
            src_data: join(w[3], w[4]),
            cmp_data: join(w[5], w[6]),
            loop_interval: (w[7] & 0x1fff) as u16,
        })
    }
}

/// One decoded packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// `NOP`, a zero dword included.
    Nop(Nop),
    /// `COPY_LINEAR`: a byte copy.
    CopyLinear(CopyLinear),
    /// `INDIRECT`: a buffer of packets to run.
    Indirect(Indirect),
    /// `FENCE`: a 32-bit write.
    Fence(Fence),
    /// `TRAP`: an interrupt.
    Trap(Trap),
    /// `POLL_REGMEM` that is not an HDP flush: a wait.
    PollRegmem(PollRegmem),
    /// `POLL_REGMEM` in the HDP flush form ([`PollRegmem::is_hdp_flush`]).
    HdpFlush(HdpFlush),
    /// `TIMESTAMP` get global: the GPU clock to memory.
    Timestamp(Timestamp),
    /// `GCR`: cache write-back and invalidation.
    Gcr(Gcr),
    /// `CONST_FILL`: a fill.
    ConstFill(ConstFill),
    /// `ATOMIC`: an atomic on memory.
    Atomic(Atomic),
    /// `WRITE` linear: dwords to memory.
    WriteLinear(WriteLinear),
    /// An `op`/`sub_op` this decoder does not know (or knows the size of but not how to run).
    Unknown {
        /// The header's op (see [`packet_name`]).
        op: u8,
        /// The header's sub-op.
        sub_op: u8,
    },
}

impl Packet {
    /// Decodes the packet starting at `w[0]` (words past its length are ignored).
    pub fn decode(w: &[u32]) -> Result<Self, DecodeError> {
        let h = need(w, 1)?;
        Ok(match (h.op, h.sub_op) {
            (OP_NOP, _) => Packet::Nop(Nop::decode(w)?),
            (OP_COPY, SUBOP_COPY_LINEAR) => Packet::CopyLinear(CopyLinear::decode(w)?),
            (OP_INDIRECT, _) => Packet::Indirect(Indirect::decode(w)?),
            (OP_FENCE, _) => Packet::Fence(Fence::decode(w)?),
            (OP_TRAP, _) => Packet::Trap(Trap::decode(w)?),
            (OP_POLL_REGMEM, _) => {
                let p = PollRegmem::decode(w)?;
                if p.is_hdp_flush() {
                    Packet::HdpFlush(HdpFlush { poll: p })
                } else {
                    Packet::PollRegmem(p)
                }
            }
            (OP_TIMESTAMP, SUBOP_TIMESTAMP_GET_GLOBAL) => Packet::Timestamp(Timestamp::decode(w)?),
            (OP_GCR, SUBOP_USER_GCR) => Packet::Gcr(Gcr::decode(w)?),
            (OP_CONST_FILL, _) => Packet::ConstFill(ConstFill::decode(w)?),
            (OP_ATOMIC, _) => Packet::Atomic(Atomic::decode(w)?),
            (OP_WRITE, SUBOP_WRITE_LINEAR) => Packet::WriteLinear(WriteLinear::decode(w)?),
            (op, sub_op) => Packet::Unknown { op, sub_op },
        })
    }

    /// Encodes the packet (an `Unknown` packet encodes nothing).
    pub fn encode(&self, out: &mut Vec<u32>) {
        match self {
            Packet::Nop(p) => p.encode(out),
            Packet::CopyLinear(p) => p.encode(out),
            Packet::Indirect(p) => p.encode(out),
            Packet::Fence(p) => p.encode(out),
            Packet::Trap(p) => p.encode(out),
            Packet::PollRegmem(p) => p.encode(out),
            Packet::HdpFlush(p) => p.encode(out),
            Packet::Timestamp(p) => p.encode(out),
            Packet::Gcr(p) => p.encode(out),
            Packet::ConstFill(p) => p.encode(out),
            Packet::Atomic(p) => p.encode(out),
            Packet::WriteLinear(p) => p.encode(out),
            Packet::Unknown { .. } => {}
        }
    }
}

/// Splits `words` at packet boundaries read from the headers: a packet of unknown size counts
/// as one dword, and a last packet longer than what is left is cut short.
pub fn split(words: &[u32]) -> impl Iterator<Item = &[u32]> {
    let mut rest = words;
    std::iter::from_fn(move || {
        let &first = rest.first()?;
        let n = Header::parse(first)
            .packet_len_with(|i| rest.get(i).copied())
            .unwrap_or(1)
            .clamp(1, rest.len());
        let (p, r) = rest.split_at(n);
        rest = r;
        Some(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_linear_takes_its_length_from_the_count_dword() {
        // tinygrad 0.14's copy-queue write of a 64-bit value: op 2, address, count 1, lo, hi.
        let words = [2, 0x1000, 0x7f, 1, 0xdead_beef, 0x1234_5678, 0x99];
        let h = Header::parse(words[0]);
        assert_eq!(h.packet_len(), None, "the header alone does not say");
        assert_eq!(h.packet_len_with(|i| words.get(i).copied()), Some(6));
        let p = WriteLinear::decode(&words).expect("decodes");
        assert_eq!(p.address, 0x7f_0000_1000);
        assert_eq!(p.data, [0xdead_beef, 0x1234_5678]);
        let mut again = Vec::new();
        p.encode(&mut again);
        assert_eq!(again, words[..6]);
        assert!(WriteLinear::decode(&words[..5]).is_err());
        assert_eq!(split(&words).map(<[u32]>::len).collect::<Vec<_>>(), [6, 1]);
        assert_eq!(packet_name(2, 0), "WRITE_LINEAR");
        assert_eq!(packet_name(13, 0), "TIMESTAMP_SET");
    }

    #[test]
    fn indirect_round_trips_and_has_the_sdma_v6_layout() {
        let ib = Indirect {
            vmid: 3,
            address: 0x1234_5678_9abc_def0 & !31,
            size_dwords: 77,
            csa: 0x0000_7f00_0000_1000,
        };
        let mut w = Vec::new();
        ib.encode(&mut w);
        assert_eq!(w.len(), Indirect::LEN);
        assert_eq!(w[0], 4 | (3 << 16));
        assert_eq!(w[1], 0x9abc_dee0);
        assert_eq!(w[2], 0x1234_5678);
        assert_eq!(w[3], 77);
        assert_eq!(Header::parse(w[0]).packet_len(), Some(Indirect::LEN));
        assert_eq!(Packet::decode(&w), Ok(Packet::Indirect(ib)));
        assert!(Packet::decode(&w[..5]).is_err());
        let mut b = SdmaBuilder::new();
        b.indirect(ib.address, 77);
        assert_eq!(b.packets().count(), 1);
        assert_eq!(
            Packet::decode(&b.words),
            Ok(Packet::Indirect(Indirect {
                vmid: 0,
                csa: 0,
                ..ib
            }))
        );
    }
}
