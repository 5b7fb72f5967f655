//! The packets that order a queue: waits on a register or memory, cache actions, end-of-pipe
//! releases and pipeline events.

use super::{
    header, need, DecodeError, OP_ACQUIRE_MEM, OP_EVENT_WRITE, OP_RELEASE_MEM, OP_WAIT_REG_MEM,
};

/// `VGT_EVENT_TYPE` values used by the compute queue.
pub const EVENT_CS_PARTIAL_FLUSH: u8 = 0x7;
/// `CACHE_FLUSH_AND_INV_TS_EVENT`: once earlier work is done, write back and invalidate caches and
/// take a timestamp; the event of every `RELEASE_MEM` the builder emits.
pub const EVENT_CACHE_FLUSH_AND_INV_TS: u8 = 0x14;
/// The name of a `VGT_EVENT_TYPE` a compute queue may write, for fault reports.
pub fn event_name(event_type: u8) -> &'static str {
    match event_type {
        0x04 => "CACHE_FLUSH_TS",
        0x06 => "CACHE_FLUSH",
        0x07 => "CS_PARTIAL_FLUSH",
        0x14 => "CACHE_FLUSH_AND_INV_TS_EVENT",
        0x16 => "CACHE_FLUSH_AND_INV_EVENT",
        0x17 => "PERFCOUNTER_START",
        0x18 => "PERFCOUNTER_STOP",
        0x1b => "PERFCOUNTER_SAMPLE",
        0x23 => "CS_CONTEXT_DONE",
        0x28 => "BOTTOM_OF_PIPE_TS",
        0x2f => "CS_DONE",
        0x33 => "THREAD_TRACE_START",
        0x34 => "THREAD_TRACE_STOP",
        0x35 => "THREAD_TRACE_MARKER",
        0x37 => "THREAD_TRACE_FINISH",
        _ => "another VGT event",
    }
}
/// `EVENT_INDEX` for `RELEASE_MEM` at end of pipe.
pub const EVENT_INDEX_END_OF_PIPE: u8 = 5;

/// `WAIT_REG_MEM` compare functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CompareFunction {
    /// 0: always true; a wait on it ends at once.
    Always = 0,
    /// 1: `value < reference` (unsigned).
    Less = 1,
    /// 2: `value <= reference` (unsigned).
    LessEqual = 2,
    /// 3: `value == reference`.
    Equal = 3,
    /// 4: `value != reference`.
    NotEqual = 4,
    /// 5: `value >= reference` (unsigned): a timeline wait.
    GreaterEqual = 5,
    /// 6: `value > reference` (unsigned).
    Greater = 6,
}

impl CompareFunction {
    /// The function the 3-bit `FUNCTION` field `v` encodes; `None` for 7 (reserved) and anything
    /// larger.
    pub fn from_bits(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Always,
            1 => Self::Less,
            2 => Self::LessEqual,
            3 => Self::Equal,
            4 => Self::NotEqual,
            5 => Self::GreaterEqual,
            6 => Self::Greater,
            _ => return None,
        })
    }
    /// `(value & mask) <op> reference`.
    pub fn holds(self, value: u32, reference: u32) -> bool {
        match self {
            Self::Always => true,
            Self::Less => value < reference,
            Self::LessEqual => value <= reference,
            Self::Equal => value == reference,
            Self::NotEqual => value != reference,
            Self::GreaterEqual => value >= reference,
            Self::Greater => value > reference,
        }
    }
}

/// `WAIT_REG_MEM` `MEM_SPACE` values.
pub mod mem_space {
    /// `addr_lo`/`addr_hi` are register dword addresses (their
    /// [`REGISTER_ADDRESS_MASK`](crate::pm4::REGISTER_ADDRESS_MASK) bits).
    pub const REGISTER: u8 = 0;
    /// `addr_lo`/`addr_hi` form a dword-aligned memory address
    /// ([`WaitRegMem::address`](super::WaitRegMem::address)).
    pub const MEMORY: u8 = 1;
}

/// `WAIT_REG_MEM` `OPERATION` values.
pub mod wait_operation {
    /// Poll until the comparison holds.
    pub const WAIT: u8 = 0;
    /// Write `reference` to the register `addr_lo`, then poll the register `addr_hi`.
    pub const WRITE_THEN_WAIT: u8 = 1;
    /// A wait on memory the queue may be preempted in; functionally a plain wait.
    pub const WAIT_PREEMPTABLE: u8 = 3;
}

/// `WAIT_REG_MEM`: poll a register pair or a memory dword until a comparison holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitRegMem {
    /// 0: register space (`addr_lo`/`addr_hi` are register addresses), 1: memory.
    pub mem_space: u8,
    /// 0: wait; 1: write `addr_lo` register then wait on `addr_hi` (the HDP flush idiom).
    pub operation: u8,
    /// Dword 1 bits 0..3: the comparison, a [`CompareFunction`] as `u8`; 7 is reserved.
    pub function: u8,
    /// Dword 1 bits 8..10 (`ENGINE_SEL`): which CP engine waits; 0, the micro engine, on a compute
    /// queue.
    pub engine: u8,
    /// Dword 2: with memory, address bits 0..32 (`address` drops bits 0..2); with registers, the
    /// register polled, or the one written first under [`wait_operation::WRITE_THEN_WAIT`].
    pub addr_lo: u32,
    /// Dword 3: with memory, address bits 32..64; under [`wait_operation::WRITE_THEN_WAIT`], the
    /// register polled.
    pub addr_hi: u32,
    /// Dword 4: the value the masked value is compared with; also what
    /// [`wait_operation::WRITE_THEN_WAIT`] writes.
    pub reference: u32,
    /// Dword 5: the bits of the polled value that take part in the comparison.
    pub mask: u32,
    /// Dword 6: the pause between two polls (4 from [`Pm4Builder::wait`](super::Pm4Builder::wait),
    /// 0x20 from [`Pm4Builder::hdp_flush`](super::Pm4Builder::hdp_flush)); the emulator ignores it.
    pub poll_interval: u32,
}

impl WaitRegMem {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 6;
    /// Appends the header and payload to `out`, each field masked to its width.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_WAIT_REG_MEM, Self::PAYLOAD as u32 - 1),
            (self.function as u32 & 7)
                | ((self.mem_space as u32 & 3) << 4)
                | ((self.operation as u32 & 3) << 6)
                | ((self.engine as u32 & 3) << 8),
            self.addr_lo,
            self.addr_hi,
            self.reference,
            self.mask,
            self.poll_interval,
        ]);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_WAIT_REG_MEM, p, Self::PAYLOAD)?;
        Ok(WaitRegMem {
            function: (p[0] & 7) as u8,
            mem_space: ((p[0] >> 4) & 3) as u8,
            operation: ((p[0] >> 6) & 3) as u8,
            engine: ((p[0] >> 8) & 3) as u8,
            addr_lo: p[1],
            addr_hi: p[2],
            reference: p[3],
            mask: p[4],
            poll_interval: p[5],
        })
    }
    /// Memory address polled when `mem_space == 1` (dword aligned).
    pub fn address(&self) -> u64 {
        ((self.addr_hi as u64) << 32) | (self.addr_lo & !3) as u64
    }
}

/// `ACQUIRE_MEM` `GCR_CNTL` bits.
pub mod gcr {
    /// `GLI_INV = 1`: invalidate the whole instruction cache (the value every client sends).
    pub const GLI_INV: u32 = 1 << 0;
    /// The 2-bit `GLI_INV` field (bits 0..2; `GL1_RANGE` starts at bit 2): any non-zero value
    /// invalidates some or all of the instruction cache.
    pub const GLI_INV_FIELD: u32 = 3;

    /// Whether `gcr_cntl` invalidates instruction-cache lines (all of them, or a range).
    pub const fn invalidates_instructions(gcr_cntl: u32) -> bool {
        gcr_cntl & GLI_INV_FIELD != 0
    }
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
    /// Bit 9: invalidate the GL1 caches, one per shader array.
    pub const GL1_INV: u32 = 1 << 9;
    /// Bit 14: invalidate L2 (GL2).
    pub const GL2_INV: u32 = 1 << 14;
    /// Bit 15: write dirty L2 lines back to memory.
    pub const GL2_WB: u32 = 1 << 15;
}

/// `ACQUIRE_MEM`: invalidate/write back caches over an address range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireMem {
    /// Dword 1 (`COHER_CNTL`): the older surface-sync cache actions; gfx10 and later use
    /// `gcr_cntl`, and the builder writes 0.
    pub coher_cntl: u32,
    /// Range size in 256-byte units (40 bits).
    pub size: u64,
    /// Range base in 256-byte units (56 bits).
    pub base: u64,
    /// Dword 6: the pause between checks that the cache actions are done; 0 from the builder.
    pub poll_interval: u32,
    /// Dword 7 (`GCR_CNTL`): the cache actions, the [`gcr`] bits; the emulator acts only on the
    /// instruction-cache invalidation.
    pub gcr_cntl: u32,
}

impl AcquireMem {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 7;
    /// Appends the header and payload to `out` (`size` cut to 40 bits, `base` to 56).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_ACQUIRE_MEM, Self::PAYLOAD as u32 - 1),
            self.coher_cntl,
            self.size as u32,
            ((self.size >> 32) & 0xff) as u32,
            self.base as u32,
            ((self.base >> 32) & 0xff_ffff) as u32,
            self.poll_interval,
            self.gcr_cntl,
        ]);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_ACQUIRE_MEM, p, Self::PAYLOAD)?;
        Ok(AcquireMem {
            coher_cntl: p[0],
            size: p[1] as u64 | (((p[2] & 0xff) as u64) << 32),
            base: p[3] as u64 | (((p[4] & 0xff_ffff) as u64) << 32),
            poll_interval: p[5],
            gcr_cntl: p[6],
        })
    }
}

/// `RELEASE_MEM` `DATA_SEL`: what is written.
pub mod data_sel {
    /// 0: write nothing; the release still orders and can interrupt.
    pub const NONE: u8 = 0;
    /// 1: the low 32 bits of `data`, to a dword-aligned address.
    pub const DATA_32: u8 = 1;
    /// 2: all 64 bits of `data`, to a qword-aligned address.
    pub const DATA_64: u8 = 2;
    /// 3: the 64-bit GPU clock counter (100 MHz), to a qword-aligned address: a timestamp.
    pub const GPU_CLOCK_64: u8 = 3;
    /// The gfx10+ packet headers disagree on this value: the CP performance counter pair in
    /// one, the 64-bit system clock in another. Neither is modelled.
    pub const PERFCOUNTER_OR_SYSTEM_CLOCK: u8 = 4;
    /// 5: data from the global data share (not modelled).
    pub const GDS: u8 = 5;
}

/// `RELEASE_MEM` `INT_SEL`: whether an interrupt follows the write.
pub mod int_sel {
    /// 0: no interrupt.
    pub const NONE: u8 = 0;
    /// 1: interrupt once the write is issued, without waiting for its confirmation.
    pub const SEND_INT: u8 = 1;
    /// 2: interrupt once memory confirms the write, the form
    /// [`Pm4Builder::signal`](crate::pm4::Pm4Builder::signal) uses for its mailbox.
    pub const SEND_INT_ON_CONFIRM: u8 = 2;
    /// 3: write the data and interrupt once the write is confirmed (the emulator treats 1..=4
    /// alike).
    pub const SEND_DATA_AND_INT_ON_CONFIRM: u8 = 3;
    /// 4: interrupt with `int_ctx` in any case.
    pub const UNCONDITIONALLY_SEND_INT_CTXID: u8 = 4;
    /// Interrupt only when the 32-bit (5) or 64-bit (6) value at the address compares true
    /// against the data: not modelled.
    pub const CONDITIONAL_32: u8 = 5;
    /// 6: interrupt only when the 64-bit value compares true (see [`CONDITIONAL_32`]); not
    /// modelled.
    pub const CONDITIONAL_64: u8 = 6;
}

/// `RELEASE_MEM` `DST_SEL`: where the data goes.
pub mod release_dst_sel {
    /// 0: memory, written through the memory controller past L2.
    pub const MEMORY_CONTROLLER: u8 = 0;
    /// 1: memory, written through L2.
    pub const TC_L2: u8 = 1;
    /// 2: a queue's write-pointer register instead of memory (not modelled).
    pub const QUEUE_WRITE_POINTER_REGISTER: u8 = 2;
    /// 3: the poll-mask bit of a queue's write pointer (not modelled).
    pub const QUEUE_WRITE_POINTER_POLL_MASK_BIT: u8 = 3;
}

/// `RELEASE_MEM` `GCR` bits (dword 1).
pub mod release_gcr {
    /// Bit 12: write back the metadata cache (GLM); amdgpu sets it with `GLM_INV`.
    pub const GLM_WB: u32 = 0x1000;
    /// Bit 13: invalidate the metadata cache (GLM).
    pub const GLM_INV: u32 = 0x2000;
    /// Bit 14: invalidate the vector L0 caches (GLV).
    pub const GLV_INV: u32 = 0x4000;
    /// Bit 15: invalidate the GL1 caches.
    pub const GL1_INV: u32 = 0x8000;
    /// Bit 16: `GL2_US`, a modifier of the L2 action that the builder never sets (its effect is
    /// not described here).
    pub const GL2_US: u32 = 0x10000;
    /// Bit 17, the low bit of the 2-bit `GL2_RANGE` field: limit the L2 action to a range instead
    /// of all of L2.
    pub const GL2_RANGE: u32 = 0x20000;
    /// Bit 19: drop dirty L2 lines without writing them back.
    pub const GL2_DISCARD: u32 = 0x80000;
    /// Bit 20: invalidate L2.
    pub const GL2_INV: u32 = 0x100000;
    /// Bit 21: write dirty L2 lines back to memory.
    pub const GL2_WB: u32 = 0x200000;
    /// Bit 22, `SEQ` = 1 of the 2-bit field: run the cache actions one level after another instead
    /// of in parallel.
    pub const SEQ: u32 = 0x400000;
}

/// `RELEASE_MEM`: at an event (end of pipe), write data or a clock to memory and optionally
/// raise an interrupt carrying `int_ctx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseMem {
    /// Dword 1 bits 0..6: the `VGT_EVENT_TYPE` the release waits for
    /// ([`EVENT_CACHE_FLUSH_AND_INV_TS`] from the builder).
    pub event_type: u8,
    /// Dword 1 bits 8..12: `EVENT_INDEX`, how the event is tracked; [`EVENT_INDEX_END_OF_PIPE`] for
    /// an end-of-pipe release.
    pub event_index: u8,
    /// Cache actions (the [`release_gcr`] bits), already in place.
    pub gcr: u32,
    /// Dword 2 bits 29..32: what is written, a [`data_sel`] value.
    pub data_sel: u8,
    /// Dword 2 bits 24..27: whether and when an interrupt follows, an [`int_sel`] value.
    pub int_sel: u8,
    /// Dword 2 bits 16..18: where the data goes, a [`release_dst_sel`] value.
    pub dst_sel: u8,
    /// Dwords 3 and 4: the destination address, dword aligned for 32-bit data and qword aligned for
    /// 64-bit (the emulator drops the lower bits).
    pub address: u64,
    /// Dwords 5 and 6: the value written with [`data_sel::DATA_32`] (low half) or
    /// [`data_sel::DATA_64`].
    pub data: u64,
    /// Dword 7: the interrupt's context id (`INT_CTXID`), which KFD reads as the id of the event to
    /// signal.
    pub int_ctx: u32,
}

impl ReleaseMem {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 7;
    /// Appends the header and payload to `out`; the selectors are masked to their widths and `gcr`
    /// is ORed in as given.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_RELEASE_MEM, Self::PAYLOAD as u32 - 1),
            (self.event_type as u32 & 0x3f) | ((self.event_index as u32 & 0xf) << 8) | self.gcr,
            ((self.data_sel as u32 & 7) << 29)
                | ((self.int_sel as u32 & 7) << 24)
                | ((self.dst_sel as u32 & 3) << 16),
            self.address as u32,
            (self.address >> 32) as u32,
            self.data as u32,
            (self.data >> 32) as u32,
            self.int_ctx,
        ]);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked. `gcr` keeps every bit of dword 1 outside the event type and index.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_RELEASE_MEM, p, Self::PAYLOAD)?;
        Ok(ReleaseMem {
            event_type: (p[0] & 0x3f) as u8,
            event_index: ((p[0] >> 8) & 0xf) as u8,
            gcr: p[0] & !0xf3f,
            data_sel: ((p[1] >> 29) & 7) as u8,
            int_sel: ((p[1] >> 24) & 7) as u8,
            dst_sel: ((p[1] >> 16) & 3) as u8,
            address: p[2] as u64 | ((p[3] as u64) << 32),
            data: p[4] as u64 | ((p[5] as u64) << 32),
            int_ctx: p[6],
        })
    }
}

/// `EVENT_WRITE`: a pipeline event (e.g. `CS_PARTIAL_FLUSH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventWrite {
    /// Dword 1 bits 0..6: the `VGT_EVENT_TYPE` (names in [`event_name`]).
    pub event_type: u8,
    /// Dword 1 bits 8..12: `EVENT_INDEX`; the builder sends 4 with [`EVENT_CS_PARTIAL_FLUSH`].
    pub event_index: u8,
}

impl EventWrite {
    /// Appends the header and the event dword to `out` (type cut to 6 bits, index to 4).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_EVENT_WRITE, 0));
        out.push((self.event_type as u32 & 0x3f) | ((self.event_index as u32 & 0xf) << 8));
    }
    /// Reads the event dword from the payload `p`; fails with [`DecodeError::Truncated`] only on an
    /// empty payload.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_EVENT_WRITE, p, 1)?;
        Ok(EventWrite {
            event_type: (p[0] & 0x3f) as u8,
            event_index: ((p[0] >> 8) & 0xf) as u8,
        })
    }
}
