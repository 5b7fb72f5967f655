//! PM4 type-3 packets for the gfx11 compute queue: each packet declared once, with an encoder
//! (the driver builds command streams) and a decoder (the emulated command processor executes
//! them), plus [`Pm4Builder`], which emits the exact sequences of the reference runtime.

use crate::regs;

/// Packet type 3 (header bits 30..32): packets with an opcode and a payload, the only type this
/// module builds or decodes.
pub const PACKET_TYPE3: u32 = 3;

/// Opcode of `NOP`: the payload is skipped (padding).
pub const OP_NOP: u8 = 0x10;
/// Opcode of `DISPATCH_DIRECT` ([`DispatchDirect`]): launch a grid with the SH registers as set.
pub const OP_DISPATCH_DIRECT: u8 = 0x15;
/// Opcode of `PRED_EXEC` ([`PredExec`]): run the next dwords only on the selected XCCs.
pub const OP_PRED_EXEC: u8 = 0x23;
/// Opcode of `WRITE_DATA` ([`WriteData`]): write the packet's dwords to registers or memory.
pub const OP_WRITE_DATA: u8 = 0x37;
/// Opcode of `WAIT_REG_MEM` ([`WaitRegMem`]): stall the queue until a register or memory comparison
/// holds.
pub const OP_WAIT_REG_MEM: u8 = 0x3c;
/// Opcode of `INDIRECT_BUFFER` ([`IndirectBuffer`]): call or chain to a buffer of packets.
pub const OP_INDIRECT_BUFFER: u8 = 0x3f;
/// Opcode of `COPY_DATA` ([`CopyData`]): copy one 32- or 64-bit value.
pub const OP_COPY_DATA: u8 = 0x40;
/// Opcode of `DMA_DATA` ([`DmaData`]): a CP DMA copy or fill.
pub const OP_DMA_DATA: u8 = 0x50;
/// Opcode of `EVENT_WRITE` ([`EventWrite`]): send a pipeline event.
pub const OP_EVENT_WRITE: u8 = 0x46;
/// Opcode of `RELEASE_MEM` ([`ReleaseMem`]): at an end-of-pipe event, act on caches, write memory
/// and maybe interrupt.
pub const OP_RELEASE_MEM: u8 = 0x49;
/// Opcode of `ACQUIRE_MEM` ([`AcquireMem`]): write back or invalidate caches before what follows.
pub const OP_ACQUIRE_MEM: u8 = 0x58;
/// Opcode of `SET_SH_REG` ([`SetShReg`]): write consecutive SH (compute) registers.
pub const OP_SET_SH_REG: u8 = 0x76;
/// Opcode of `SET_UCONFIG_REG` ([`SetUconfigReg`]): write consecutive user-config registers.
pub const OP_SET_UCONFIG_REG: u8 = 0x79;

/// First register dword address `SET_UCONFIG_REG` reaches (its offset counts from here).
pub const UCONFIG_REG_START: u32 = 0xc000;

/// The name of a type-3 opcode (the `PACKET3_*` numbers of the gfx11 packet headers), for fault
/// reports; `None` for a number no gfx11 packet has.
pub fn opcode_name(opcode: u8) -> Option<&'static str> {
    Some(match opcode {
        0x10 => "NOP",
        0x11 => "SET_BASE",
        0x12 => "CLEAR_STATE",
        0x13 => "INDEX_BUFFER_SIZE",
        0x15 => "DISPATCH_DIRECT",
        0x16 => "DISPATCH_INDIRECT",
        0x17 => "INDIRECT_BUFFER_END",
        0x19 => "INDIRECT_BUFFER_CNST_END",
        0x1d => "ATOMIC_GDS",
        0x1e => "ATOMIC_MEM",
        0x1f => "OCCLUSION_QUERY",
        0x20 => "SET_PREDICATION",
        0x21 => "REG_RMW",
        0x22 => "COND_EXEC",
        0x23 => "PRED_EXEC",
        0x24 => "DRAW_INDIRECT",
        0x25 => "DRAW_INDEX_INDIRECT",
        0x26 => "INDEX_BASE",
        0x27 => "DRAW_INDEX_2",
        0x28 => "CONTEXT_CONTROL",
        0x2a => "INDEX_TYPE",
        0x2c => "DRAW_INDIRECT_MULTI",
        0x2d => "DRAW_INDEX_AUTO",
        0x2f => "NUM_INSTANCES",
        0x30 => "DRAW_INDEX_MULTI_AUTO",
        0x32 => "INDIRECT_BUFFER_PRIV",
        0x33 => "INDIRECT_BUFFER_CNST",
        0x34 => "STRMOUT_BUFFER_UPDATE",
        0x35 => "DRAW_INDEX_OFFSET_2",
        0x36 => "DRAW_PREAMBLE",
        0x37 => "WRITE_DATA",
        0x38 => "DRAW_INDEX_INDIRECT_MULTI",
        0x39 => "MEM_SEMAPHORE",
        0x3a => "DRAW_INDEX_MULTI_INST",
        0x3b => "COPY_DW",
        0x3c => "WAIT_REG_MEM",
        0x3f => "INDIRECT_BUFFER",
        0x40 => "COPY_DATA",
        0x41 => "CP_DMA",
        0x42 => "PFP_SYNC_ME",
        0x43 => "SURFACE_SYNC",
        0x44 => "ME_INITIALIZE",
        0x45 => "COND_WRITE",
        0x46 => "EVENT_WRITE",
        0x47 => "EVENT_WRITE_EOP",
        0x48 => "EVENT_WRITE_EOS",
        0x49 => "RELEASE_MEM",
        0x4a => "PREAMBLE_CNTL",
        0x50 => "DMA_DATA",
        0x51 => "CONTEXT_REG_RMW",
        0x52 => "GFX_CNTX_UPDATE",
        0x53 => "BLK_CNTX_UPDATE",
        0x55 => "INCR_UPDT_STATE",
        0x58 => "ACQUIRE_MEM",
        0x59 => "REWIND",
        0x5a => "INTERRUPT",
        0x5b => "GEN_PDEPTE",
        0x5c => "INDIRECT_BUFFER_PASID",
        0x5d => "PRIME_UTCL2",
        0x5e => "LOAD_UCONFIG_REG",
        0x5f => "LOAD_SH_REG",
        0x60 => "LOAD_CONFIG_REG",
        0x61 => "LOAD_CONTEXT_REG",
        0x62 => "LOAD_COMPUTE_STATE",
        0x63 => "LOAD_SH_REG_INDEX",
        0x68 => "SET_CONFIG_REG",
        0x69 => "SET_CONTEXT_REG",
        0x6a => "SET_CONTEXT_REG_INDEX",
        0x71 => "SET_VGPR_REG_DI_MULTI",
        0x72 => "SET_SH_REG_DI",
        0x73 => "SET_CONTEXT_REG_INDIRECT",
        0x74 => "SET_SH_REG_DI_MULTI",
        0x75 => "GFX_PIPE_LOCK",
        0x76 => "SET_SH_REG",
        0x77 => "SET_SH_REG_OFFSET",
        0x78 => "SET_QUEUE_REG",
        0x79 => "SET_UCONFIG_REG",
        0x7a => "SET_UCONFIG_REG_INDEX",
        0x7c => "FORWARD_HEADER",
        0x7d => "SCRATCH_RAM_WRITE",
        0x7e => "SCRATCH_RAM_READ",
        0x80 => "LOAD_CONST_RAM",
        0x81 => "WRITE_CONST_RAM",
        0x83 => "DUMP_CONST_RAM",
        0x84 => "INCREMENT_CE_COUNTER",
        0x85 => "INCREMENT_DE_COUNTER",
        0x86 => "WAIT_ON_CE_COUNTER",
        0x88 => "WAIT_ON_DE_COUNTER_DIFF",
        0x8b => "SWITCH_BUFFER",
        0x8c => "DISPATCH_DRAW_PREAMBLE",
        0x8d => "DISPATCH_DRAW",
        0x8e => "GET_LOD_STATS",
        0x8f => "DRAW_MULTI_PREAMBLE",
        0x90 => "FRAME_CONTROL",
        0x91 => "INDEX_ATTRIBUTES_INDIRECT",
        0x93 => "WAIT_REG_MEM64",
        0x94 => "COND_PREEMPT",
        0x95 => "HDP_FLUSH",
        0x96 => "COPY_DATA_RB",
        0x98 => "INVALIDATE_TLBS",
        0x99 => "AQL_PACKET",
        0x9a => "DMA_DATA_FILL_MULTI",
        0x9b => "SET_SH_REG_INDEX",
        0x9c => "DRAW_INDIRECT_COUNT_MULTI",
        0x9d => "DRAW_INDEX_INDIRECT_COUNT_MULTI",
        0x9e => "DUMP_CONST_RAM_OFFSET",
        0x9f => "LOAD_CONTEXT_REG_INDEX",
        0xa0 => "SET_RESOURCES",
        0xa1 => "MAP_PROCESS",
        0xa2 => "MAP_QUEUES",
        0xa3 => "UNMAP_QUEUES",
        0xa4 => "QUERY_STATUS",
        0xa5 => "RUN_LIST",
        0xa6 => "MAP_PROCESS_VM",
        0xf0 => "SET_Q_PREEMPTION_MODE",
        _ => return None,
    })
}

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

/// The type-3 header: `count` is the number of payload dwords minus one.
pub const fn header(op: u8, count: u32) -> u32 {
    (PACKET_TYPE3 << 30) | ((count & 0x3fff) << 16) | ((op as u32) << 8)
}

/// A decoded packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Bits 30..32: the packet type; only [`PACKET_TYPE3`] decodes.
    pub packet_type: u32,
    /// Bits 8..16: the type-3 opcode (the `OP_*` constants, names in [`opcode_name`]).
    pub opcode: u8,
    /// Payload dwords (the header's count field plus one).
    pub payload_len: usize,
}

impl Header {
    /// Splits a header dword into its fields. Every dword parses; [`Packet::decode`] rejects types
    /// other than 3.
    pub fn parse(word: u32) -> Header {
        Header {
            packet_type: word >> 30,
            opcode: ((word >> 8) & 0xff) as u8,
            payload_len: ((word >> 16) & 0x3fff) as usize + 1,
        }
    }
    /// Whole packet length in dwords, header included.
    pub fn len(&self) -> usize {
        self.payload_len + 1
    }
    /// Always `false`: a packet has at least its header (the companion of [`Header::len`]).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Why a packet could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a type-3 packet.
    PacketType(u32),
    /// The payload is shorter than the packet requires.
    Truncated {
        /// The packet's opcode.
        opcode: u8,
        /// Payload dwords the packet needs.
        need: usize,
        /// Payload dwords the header gave it.
        have: usize,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::PacketType(t) => {
                write!(f, "PM4 packet of type {t} (only type 3 is supported)")
            }
            DecodeError::Truncated { opcode, need, have } => {
                write!(
                    f,
                    "PM4 packet 0x{opcode:02x} has {have} payload dwords, needs {need}"
                )
            }
        }
    }
}

fn need(opcode: u8, p: &[u32], n: usize) -> Result<(), DecodeError> {
    if p.len() < n {
        Err(DecodeError::Truncated {
            opcode,
            need: n,
            have: p.len(),
        })
    } else {
        Ok(())
    }
}

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
    /// [`REGISTER_ADDRESS_MASK`](super::REGISTER_ADDRESS_MASK) bits).
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

/// Register-space addresses are 18 bits wide (`WAIT_REG_MEM`, `COPY_DATA`, `WRITE_DATA`).
pub const REGISTER_ADDRESS_MASK: u32 = (1 << 18) - 1;

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
    /// Dword 6: the pause between two polls (4 from [`Pm4Builder::wait`], 0x20 from
    /// [`Pm4Builder::hdp_flush`]); the emulator ignores it.
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
    /// [`Pm4Builder::signal`](super::Pm4Builder::signal) uses for its mailbox.
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

/// `SET_SH_REG`: write consecutive SH registers starting at `reg` (offset from 0x2c00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetShReg<'a> {
    /// Dword 1 bits 0..16: the first register, as an offset from [`regs::SH_REG_START`] (a
    /// `regs::COMPUTE_*` constant).
    pub reg: u16,
    /// Dwords 2 and on: the values of `reg`, `reg + 1`, and so on.
    pub values: &'a [u32],
}

impl SetShReg<'_> {
    /// Appends the header, the offset and the values to `out` (the count follows from `values`).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_SET_SH_REG, self.values.len() as u32));
        out.push(self.reg as u32);
        out.extend_from_slice(self.values);
    }
}

impl<'a> SetShReg<'a> {
    /// Reads the packet from its payload `p`: `values` borrows every dword after the offset. Fails
    /// with [`DecodeError::Truncated`] only on an empty payload; bits 16..32 of the offset dword
    /// are ignored.
    pub fn decode(p: &'a [u32]) -> Result<Self, DecodeError> {
        need(OP_SET_SH_REG, p, 1)?;
        Ok(SetShReg {
            reg: (p[0] & 0xffff) as u16,
            values: &p[1..],
        })
    }
}

/// `DISPATCH_DIRECT`: launch a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchDirect {
    /// Dwords 1..4: the grid size along X, Y and Z, in workgroups (in work-items with
    /// `USE_THREAD_DIMENSIONS`).
    pub dims: [u32; 3],
    /// Dword 4: the value for `COMPUTE_DISPATCH_INITIATOR` (the [`regs::initiator`] bits).
    pub initiator: u32,
}

impl DispatchDirect {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 4;
    /// Appends the header and payload to `out`.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_DISPATCH_DIRECT, Self::PAYLOAD as u32 - 1));
        out.extend_from_slice(&self.dims);
        out.push(self.initiator);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_DISPATCH_DIRECT, p, Self::PAYLOAD)?;
        Ok(DispatchDirect {
            dims: [p[0], p[1], p[2]],
            initiator: p[3],
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

/// `INDIRECT_BUFFER` control bit: the buffer continues the current one (a jump at the same
/// level, no return) instead of being called from it.
pub const IB_CHAIN: u32 = 1 << 20;
/// `INDIRECT_BUFFER` control bit: the packet is valid (set by every builder).
pub const IB_VALID: u32 = 1 << 23;
/// Largest indirect buffer one packet can name, in dwords (the 20-bit `IB_SIZE` field).
pub const IB_MAX_DWORDS: u32 = (1 << 20) - 1;

/// `INDIRECT_BUFFER`: execute `size_dwords` dwords of packets at `address` (dword aligned,
/// 48-bit), then come back; with `chain`, continue there and do not come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndirectBuffer {
    /// Dwords 1 and 2: the buffer's address; bits 0..2 and 48..64 are not encoded.
    pub address: u64,
    /// Dword 3 bits 0..20: the buffer's length in dwords, at most [`IB_MAX_DWORDS`].
    pub size_dwords: u32,
    /// [`IB_CHAIN`]: continue in the buffer and do not come back.
    pub chain: bool,
    /// [`IB_VALID`]: the packet is valid; the emulator runs no buffer without it.
    pub valid: bool,
}

impl IndirectBuffer {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 3;
    /// Packet length in dwords, header included.
    pub const DWORDS: usize = Self::PAYLOAD + 1;
    /// Appends the header and payload to `out` (address and size cut to their fields).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_INDIRECT_BUFFER, Self::PAYLOAD as u32 - 1),
            self.address as u32 & !3,
            (self.address >> 32) as u32 & 0xffff,
            (self.size_dwords & IB_MAX_DWORDS)
                | if self.chain { IB_CHAIN } else { 0 }
                | if self.valid { IB_VALID } else { 0 },
        ]);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_INDIRECT_BUFFER, p, Self::PAYLOAD)?;
        Ok(IndirectBuffer {
            address: ((p[1] as u64 & 0xffff) << 32) | (p[0] & !3) as u64,
            size_dwords: p[2] & IB_MAX_DWORDS,
            chain: p[2] & IB_CHAIN != 0,
            valid: p[2] & IB_VALID != 0,
        })
    }
}

/// `COPY_DATA` `SRC_SEL` values (MEC).
pub mod copy_src_sel {
    /// 0: a register; `src` holds its dword address.
    pub const REGISTER: u8 = 0;
    /// Memory through L2 (the older name of 2; still memory).
    pub const MEMORY_OBSOLETE: u8 = 1;
    /// 2: memory at `src` through L2, dword aligned (qword aligned with `count_64`).
    pub const MEMORY: u8 = 2;
    /// 3: the global data share (not modelled).
    pub const GDS: u8 = 3;
    /// 4: a performance counter (not modelled).
    pub const PERFCOUNTERS: u8 = 4;
    /// 5: `src` itself, 32 bits (64 with `count_64`).
    pub const IMMEDIATE: u8 = 5;
    /// 6: the value an earlier memory atomic returned (not modelled).
    pub const ATOMIC_RETURN_DATA: u8 = 6;
    /// 7: the first value a GDS atomic returned (not modelled).
    pub const GDS_ATOMIC_RETURN_DATA0: u8 = 7;
    /// 8: the second value a GDS atomic returned (not modelled).
    pub const GDS_ATOMIC_RETURN_DATA1: u8 = 8;
    /// 9: the 64-bit GPU clock counter (100 MHz).
    pub const GPU_CLOCK_COUNT: u8 = 9;
    /// 10: the system clock counter (not modelled).
    pub const SYSTEM_CLOCK_COUNT: u8 = 10;
    /// 12: the argument buffer of an execute-indirect command (not modelled).
    pub const EXEC_IND_ARG_BUF: u8 = 12;
}

/// `COPY_DATA` `DST_SEL` values (MEC).
pub mod copy_dst_sel {
    /// 0: a register; `dst` holds its dword address.
    pub const REGISTER: u8 = 0;
    /// 2: memory at `dst` through L2, dword aligned (qword aligned with `count_64`).
    pub const MEMORY: u8 = 2;
    /// 3: the global data share (not modelled).
    pub const GDS: u8 = 3;
    /// 4: a performance counter (not modelled).
    pub const PERFCOUNTERS: u8 = 4;
    /// Memory through L2 (the older name of 2; still memory).
    pub const MEMORY_OBSOLETE: u8 = 5;
    /// 6: a register written through the `MEM_MAPPED_REG_DC` path (not modelled).
    pub const REGISTER_DC: u8 = 6;
}

/// `COPY_DATA`: copies one dword (or two, with `count_64`) from a register, memory, an
/// immediate or a clock to a register or memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyData {
    /// Dword 1 bits 0..4: where the value comes from, a [`copy_src_sel`] value.
    pub src_sel: u8,
    /// Dword 1 bits 8..12: where it goes, a [`copy_dst_sel`] value.
    pub dst_sel: u8,
    /// Dword 1 bits 13..15: L2 cache policy for a memory source (a hint, no functional effect).
    pub src_cache_policy: u8,
    /// Copy 64 bits instead of 32 (`COUNT_SEL`).
    pub count_64: bool,
    /// Dword 1 bit 20 (`WR_CONFIRM`): wait for the memory write to be confirmed before the next
    /// packet.
    pub write_confirm: bool,
    /// Dword 1 bits 25..27: L2 cache policy for a memory destination (a hint).
    pub dst_cache_policy: u8,
    /// Source address, register offset or immediate value (dwords 2 and 3).
    pub src: u64,
    /// Destination address or register offset (dwords 4 and 5).
    pub dst: u64,
}

impl CopyData {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 5;
    /// Appends the header and payload to `out`, selectors and policies masked to their widths.
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_COPY_DATA, Self::PAYLOAD as u32 - 1),
            (u32::from(self.src_sel) & 0xf)
                | ((u32::from(self.dst_sel) & 0xf) << 8)
                | ((u32::from(self.src_cache_policy) & 3) << 13)
                | (u32::from(self.count_64) << 16)
                | (u32::from(self.write_confirm) << 20)
                | ((u32::from(self.dst_cache_policy) & 3) << 25),
            self.src as u32,
            (self.src >> 32) as u32,
            self.dst as u32,
            (self.dst >> 32) as u32,
        ]);
    }
    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_COPY_DATA, p, Self::PAYLOAD)?;
        Ok(CopyData {
            src_sel: (p[0] & 0xf) as u8,
            dst_sel: ((p[0] >> 8) & 0xf) as u8,
            src_cache_policy: ((p[0] >> 13) & 3) as u8,
            count_64: p[0] & (1 << 16) != 0,
            write_confirm: p[0] & (1 << 20) != 0,
            dst_cache_policy: ((p[0] >> 25) & 3) as u8,
            src: u64::from(p[1]) | (u64::from(p[2]) << 32),
            dst: u64::from(p[3]) | (u64::from(p[4]) << 32),
        })
    }
}

/// `DMA_DATA` `SRC_SEL` values (gfx9 and later).
pub mod dma_src_sel {
    /// Memory (or registers, with `SAS`) at the packet's address, bypassing L2.
    pub const ADDRESS: u8 = 0;
    /// 1: the global data share (not modelled).
    pub const GDS: u8 = 1;
    /// The packet's 32-bit data, repeated: a fill.
    pub const DATA: u8 = 2;
    /// Memory at the packet's address through L2, coherent with shaders.
    pub const ADDRESS_TC_L2: u8 = 3;
}

/// `DMA_DATA` `DST_SEL` values (gfx9 and later).
pub mod dma_dst_sel {
    /// Memory (or registers, with `DAS`) at the packet's address, bypassing L2.
    pub const ADDRESS: u8 = 0;
    /// 1: the global data share (not modelled); 2 is reserved.
    pub const GDS: u8 = 1;
    /// Memory at the packet's address through L2, coherent with shaders.
    pub const ADDRESS_TC_L2: u8 = 3;
}

/// Largest `BYTE_COUNT` a `DMA_DATA` packet holds on gfx9 and later (26 bits).
pub const DMA_DATA_MAX_BYTES: u32 = (1 << 26) - 1;

/// Bytes per `DMA_DATA` packet in [`Pm4Builder::copy`]: a power of two within the 21-bit byte
/// count amdgpu's gfx9+ header documents, so the builder stays inside either reading of the
/// field's width.
pub const DMA_DATA_CHUNK_BYTES: u64 = 1 << 20;

/// `DMA_DATA` (CP DMA): the command processor copies `byte_count` bytes (or fills them with
/// the packet's data) from memory, GDS or registers to memory, GDS or registers. The copy runs
/// beside the CP, which goes on to the next packet unless `cp_sync` makes it wait for this and
/// every earlier CP DMA to finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaData {
    /// `ENGINE_SEL`: 1 runs it on the prefetch parser (graphics rings only).
    pub engine_pfp: bool,
    /// Dword 1 bits 13..15: L2 cache policy of the reads (a hint).
    pub src_cache_policy: u8,
    /// Dword 1 bit 15: the source is volatile, a cache hint.
    pub src_volatile: bool,
    /// Dword 1 bits 20..22 (`DST_SEL`): the destination, a [`dma_dst_sel`] value.
    pub dst_sel: u8,
    /// Dword 1 bits 25..27: L2 cache policy of the writes (a hint).
    pub dst_cache_policy: u8,
    /// Dword 1 bit 27: the destination is volatile, a cache hint.
    pub dst_volatile: bool,
    /// Dword 1 bits 29..31 (`SRC_SEL`): the source, a [`dma_src_sel`] value.
    pub src_sel: u8,
    /// Dword 1 bit 31 (`CP_SYNC`): the CP waits for this and every earlier CP DMA before the next
    /// packet.
    pub cp_sync: bool,
    /// Source address, or with [`dma_src_sel::DATA`] the fill value in the low 32 bits.
    pub src: u64,
    /// Dwords 4 and 5: the destination address (a register offset with `dst_is_register`).
    pub dst: u64,
    /// Bytes to move (26 bits); 0 moves nothing, and with `cp_sync` waits for earlier DMAs.
    pub byte_count: u32,
    /// `SAS`/`DAS`: the address is a register offset, not memory.
    pub src_is_register: bool,
    /// `DAS` (dword 6 bit 27): `dst` is a register offset, not memory.
    pub dst_is_register: bool,
    /// `SAIC`/`DAIC`: the address stays on the same dword instead of advancing.
    pub src_no_increment: bool,
    /// `DAIC` (dword 6 bit 29): every dword goes to the same destination dword.
    pub dst_no_increment: bool,
    /// `RAW_WAIT`: reads wait for earlier writes of the engine.
    pub raw_wait: bool,
    /// `DIS_WC`: no write confirmation.
    pub disable_write_confirm: bool,
}

impl DmaData {
    /// Payload dwords after the header.
    pub const PAYLOAD: usize = 6;

    /// A memory-to-memory copy through L2 (how gfx9+ drivers use CP DMA).
    pub fn copy(dst: u64, src: u64, byte_count: u32, cp_sync: bool) -> Self {
        DmaData {
            engine_pfp: false,
            src_cache_policy: 0,
            src_volatile: false,
            dst_sel: dma_dst_sel::ADDRESS_TC_L2,
            dst_cache_policy: 0,
            dst_volatile: false,
            src_sel: dma_src_sel::ADDRESS_TC_L2,
            cp_sync,
            src,
            dst,
            byte_count,
            src_is_register: false,
            dst_is_register: false,
            src_no_increment: false,
            dst_no_increment: false,
            raw_wait: false,
            disable_write_confirm: false,
        }
    }

    /// Appends the header and payload to `out` (`byte_count` cut to 26 bits, selectors to 2).
    pub fn encode(&self, out: &mut Vec<u32>) {
        let bit = |b: bool, at: u32| u32::from(b) << at;
        out.extend_from_slice(&[
            header(OP_DMA_DATA, Self::PAYLOAD as u32 - 1),
            bit(self.engine_pfp, 0)
                | ((u32::from(self.src_cache_policy) & 3) << 13)
                | bit(self.src_volatile, 15)
                | ((u32::from(self.dst_sel) & 3) << 20)
                | ((u32::from(self.dst_cache_policy) & 3) << 25)
                | bit(self.dst_volatile, 27)
                | ((u32::from(self.src_sel) & 3) << 29)
                | bit(self.cp_sync, 31),
            self.src as u32,
            (self.src >> 32) as u32,
            self.dst as u32,
            (self.dst >> 32) as u32,
            (self.byte_count & DMA_DATA_MAX_BYTES)
                | bit(self.src_is_register, 26)
                | bit(self.dst_is_register, 27)
                | bit(self.src_no_increment, 28)
                | bit(self.dst_no_increment, 29)
                | bit(self.raw_wait, 30)
                | bit(self.disable_write_confirm, 31),
        ]);
    }

    /// Reads the packet from its payload `p` (the dwords after the header; extra ones are ignored).
    /// Fails with [`DecodeError::Truncated`] only when `p` is shorter than [`Self::PAYLOAD`]; field
    /// values are not checked.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_DMA_DATA, p, Self::PAYLOAD)?;
        let bit = |w: u32, at: u32| w & (1 << at) != 0;
        Ok(DmaData {
            engine_pfp: bit(p[0], 0),
            src_cache_policy: ((p[0] >> 13) & 3) as u8,
            src_volatile: bit(p[0], 15),
            dst_sel: ((p[0] >> 20) & 3) as u8,
            dst_cache_policy: ((p[0] >> 25) & 3) as u8,
            dst_volatile: bit(p[0], 27),
            src_sel: ((p[0] >> 29) & 3) as u8,
            cp_sync: bit(p[0], 31),
            src: u64::from(p[1]) | (u64::from(p[2]) << 32),
            dst: u64::from(p[3]) | (u64::from(p[4]) << 32),
            byte_count: p[5] & DMA_DATA_MAX_BYTES,
            src_is_register: bit(p[5], 26),
            dst_is_register: bit(p[5], 27),
            src_no_increment: bit(p[5], 28),
            dst_no_increment: bit(p[5], 29),
            raw_wait: bit(p[5], 30),
            disable_write_confirm: bit(p[5], 31),
        })
    }
}

/// `WRITE_DATA` `DST_SEL` values (MEC).
pub mod write_dst_sel {
    /// 0: a register; `dst` holds its dword address.
    pub const REGISTER: u8 = 0;
    /// 2: memory at `dst` through L2 (dword aligned).
    pub const MEMORY_TC_L2: u8 = 2;
    /// 3: the global data share (not modelled).
    pub const GDS: u8 = 3;
    /// 5: memory at `dst` (dword aligned); the emulator handles it as 2.
    pub const MEMORY: u8 = 5;
    /// 6: the ADC persistent state, which no client here writes (not modelled).
    pub const ADC_PERSISTENT_STATE: u8 = 6;
}

/// `WRITE_DATA`: writes the packet's data dwords to consecutive registers or memory dwords
/// (or all to one, with `no_increment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteData<'a> {
    /// Dword 1 bits 8..12: where the data goes, a [`write_dst_sel`] value.
    pub dst_sel: u8,
    /// Dword 1 bit 16: every data dword goes to the first address instead of consecutive ones.
    pub no_increment: bool,
    /// Dword 1 bit 20 (`WR_CONFIRM`): wait for the write to be confirmed before the next packet.
    pub write_confirm: bool,
    /// Dword 1 bits 25..27: L2 cache policy of a memory write (a hint).
    pub cache_policy: u8,
    /// Destination address or register offset (dwords 2 and 3).
    pub dst: u64,
    /// Dwords 4 and on: the values written, at least one.
    pub data: &'a [u32],
}

impl WriteData<'_> {
    /// Appends the header, control and address dwords and `data` to `out` (the count follows from
    /// `data`).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.extend_from_slice(&[
            header(OP_WRITE_DATA, self.data.len() as u32 + 2),
            ((u32::from(self.dst_sel) & 0xf) << 8)
                | (u32::from(self.no_increment) << 16)
                | (u32::from(self.write_confirm) << 20)
                | ((u32::from(self.cache_policy) & 3) << 25),
            self.dst as u32,
            (self.dst >> 32) as u32,
        ]);
        out.extend_from_slice(self.data);
    }
}

impl<'a> WriteData<'a> {
    /// Reads the packet from its payload `p`: `data` borrows every dword after the address. Fails
    /// with [`DecodeError::Truncated`] when `p` lacks the control dword, the address or a first
    /// data dword.
    pub fn decode(p: &'a [u32]) -> Result<Self, DecodeError> {
        // Control, address and at least one data dword.
        need(OP_WRITE_DATA, p, 4)?;
        Ok(WriteData {
            dst_sel: ((p[0] >> 8) & 0xf) as u8,
            no_increment: p[0] & (1 << 16) != 0,
            write_confirm: p[0] & (1 << 20) != 0,
            cache_policy: ((p[0] >> 25) & 3) as u8,
            dst: u64::from(p[1]) | (u64::from(p[2]) << 32),
            data: &p[3..],
        })
    }
}

/// `PRED_EXEC`: the next `exec_count` dwords run only on the XCCs (compute dies) whose bit
/// is set in `device_select`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredExec {
    /// Dwords of packets that follow under the predicate (14 bits).
    pub exec_count: u16,
    /// One bit per XCC (bits 24..32 of the payload).
    pub device_select: u8,
}

impl PredExec {
    /// Appends the header and the predicate dword to `out` (`exec_count` cut to 14 bits).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_PRED_EXEC, 0));
        out.push((u32::from(self.exec_count) & 0x3fff) | (u32::from(self.device_select) << 24));
    }
    /// Reads the predicate dword from the payload `p`; fails with [`DecodeError::Truncated`] only
    /// on an empty payload.
    pub fn decode(p: &[u32]) -> Result<Self, DecodeError> {
        need(OP_PRED_EXEC, p, 1)?;
        Ok(PredExec {
            exec_count: (p[0] & 0x3fff) as u16,
            device_select: (p[0] >> 24) as u8,
        })
    }
}

/// `SET_UCONFIG_REG`: write consecutive user-config registers starting at `reg` (offset from
/// [`UCONFIG_REG_START`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetUconfigReg<'a> {
    /// Dword 1 bits 0..16: the first register, as an offset from [`UCONFIG_REG_START`].
    pub reg: u16,
    /// Dwords 2 and on: the values of `reg`, `reg + 1`, and so on.
    pub values: &'a [u32],
}

impl SetUconfigReg<'_> {
    /// Appends the header, the offset and the values to `out` (the count follows from `values`).
    pub fn encode(&self, out: &mut Vec<u32>) {
        out.push(header(OP_SET_UCONFIG_REG, self.values.len() as u32));
        out.push(u32::from(self.reg));
        out.extend_from_slice(self.values);
    }
}

impl<'a> SetUconfigReg<'a> {
    /// Reads the packet from its payload `p`: `values` borrows every dword after the offset. Fails
    /// with [`DecodeError::Truncated`] only on an empty payload.
    pub fn decode(p: &'a [u32]) -> Result<Self, DecodeError> {
        need(OP_SET_UCONFIG_REG, p, 1)?;
        Ok(SetUconfigReg {
            reg: (p[0] & 0xffff) as u16,
            values: &p[1..],
        })
    }
}

/// One decoded packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet<'a> {
    /// `NOP`: padding, nothing to do.
    Nop,
    /// `SET_SH_REG`: compute registers to set.
    SetShReg(SetShReg<'a>),
    /// `ACQUIRE_MEM`: cache actions before what follows.
    AcquireMem(AcquireMem),
    /// `RELEASE_MEM`: an end-of-pipe write and interrupt.
    ReleaseMem(ReleaseMem),
    /// `WAIT_REG_MEM`: a wait on a register or memory.
    WaitRegMem(WaitRegMem),
    /// `DISPATCH_DIRECT`: a grid launch.
    DispatchDirect(DispatchDirect),
    /// `EVENT_WRITE`: a pipeline event.
    EventWrite(EventWrite),
    /// `INDIRECT_BUFFER`: a call or chain to more packets.
    IndirectBuffer(IndirectBuffer),
    /// `COPY_DATA`: a one-value copy.
    CopyData(CopyData),
    /// `DMA_DATA`: a CP DMA copy or fill.
    DmaData(DmaData),
    /// `WRITE_DATA`: dwords to write.
    WriteData(WriteData<'a>),
    /// `PRED_EXEC`: a predicate on the next dwords.
    PredExec(PredExec),
    /// `SET_UCONFIG_REG`: user-config registers to set.
    SetUconfigReg(SetUconfigReg<'a>),
    /// A type-3 opcode this decoder does not know.
    Unknown {
        /// The opcode (its name, if gfx11 has one, from [`opcode_name`]).
        opcode: u8,
    },
}

impl<'a> Packet<'a> {
    /// Decodes one packet from its header and payload.
    pub fn decode(header: Header, payload: &'a [u32]) -> Result<Self, DecodeError> {
        if header.packet_type != PACKET_TYPE3 {
            return Err(DecodeError::PacketType(header.packet_type));
        }
        Ok(match header.opcode {
            OP_NOP => Packet::Nop,
            OP_SET_SH_REG => Packet::SetShReg(SetShReg::decode(payload)?),
            OP_ACQUIRE_MEM => Packet::AcquireMem(AcquireMem::decode(payload)?),
            OP_RELEASE_MEM => Packet::ReleaseMem(ReleaseMem::decode(payload)?),
            OP_WAIT_REG_MEM => Packet::WaitRegMem(WaitRegMem::decode(payload)?),
            OP_DISPATCH_DIRECT => Packet::DispatchDirect(DispatchDirect::decode(payload)?),
            OP_EVENT_WRITE => Packet::EventWrite(EventWrite::decode(payload)?),
            OP_INDIRECT_BUFFER => Packet::IndirectBuffer(IndirectBuffer::decode(payload)?),
            OP_COPY_DATA => Packet::CopyData(CopyData::decode(payload)?),
            OP_DMA_DATA => Packet::DmaData(DmaData::decode(payload)?),
            OP_WRITE_DATA => Packet::WriteData(WriteData::decode(payload)?),
            OP_PRED_EXEC => Packet::PredExec(PredExec::decode(payload)?),
            OP_SET_UCONFIG_REG => Packet::SetUconfigReg(SetUconfigReg::decode(payload)?),
            opcode => Packet::Unknown { opcode },
        })
    }
}

/// What a kernel dispatch needs from the driver: the program and its resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchSetup {
    /// Address of the first instruction (256-byte aligned).
    pub code_entry: u64,
    /// `COMPUTE_PGM_RSRC1`: the descriptor's value plus [`regs::dispatch_rsrc1_bits`].
    pub rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2` as the descriptor has it; [`Pm4Builder::exec`] adds the LDS size from
    /// `group_segment_size`.
    pub rsrc2: u32,
    /// Bytes of LDS the kernel declares (the descriptor's group segment size).
    pub group_segment_size: u32,
    /// Base of the scratch ring (256-byte aligned; 0 without one), for
    /// `COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI`.
    pub scratch_base: u64,
    /// `COMPUTE_TMPRING_SIZE` for that scratch ([`regs::tmpring_size`]).
    pub tmpring_size: u32,
    /// `COMPUTE_USER_DATA_0..`: the user SGPR values in descriptor order.
    pub user_data: [u32; 16],
    /// How many of `user_data` the waves load (the descriptor's `USER_SGPR` count); at most 16 are
    /// written.
    pub user_data_count: usize,
}

/// Handle to the launch dimensions of a dispatch inside a builder's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchPatch {
    local_at: usize,
    global_at: usize,
}

impl DispatchPatch {
    /// Rewrites the workgroup size and grid size of the dispatch in place.
    pub fn set_dims(&self, words: &mut [u32], global: [u32; 3], local: [u32; 3]) {
        words[self.local_at..self.local_at + 3].copy_from_slice(&local);
        words[self.global_at..self.global_at + 3].copy_from_slice(&global);
    }
    /// Dword index of the first grid dimension.
    pub fn global_at(&self) -> usize {
        self.global_at
    }
    /// Dword index of the first workgroup-size dimension.
    pub fn local_at(&self) -> usize {
        self.local_at
    }
}

/// Handle to the value a `wait` compares against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPatch {
    reference_at: usize,
}

impl WaitPatch {
    /// Rewrites, in `words` (the builder's or a copy of them), the value the wait compares with;
    /// the packet holds only the low 32 bits of `value`.
    pub fn set_value(&self, words: &mut [u32], value: u64) {
        words[self.reference_at] = value as u32;
    }
}

/// Handle to the value a `signal` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPatch {
    data_at: usize,
}

impl SignalPatch {
    /// Rewrites, in `words` (the builder's or a copy of them), the value the signal's release
    /// writes: both data dwords, of which the 32-bit release stores the low one.
    pub fn set_value(&self, words: &mut [u32], value: u64) {
        words[self.data_at] = value as u32;
        words[self.data_at + 1] = (value >> 32) as u32;
    }
}

const SIGNAL_GCR: u32 = release_gcr::GLV_INV
    | release_gcr::GL1_INV
    | release_gcr::GL2_INV
    | release_gcr::GLM_WB
    | release_gcr::GLM_INV
    | release_gcr::GL2_WB
    | release_gcr::SEQ;

/// Builds a compute-queue command stream, one method per operation of the reference runtime.
#[derive(Debug, Default, Clone)]
pub struct Pm4Builder {
    /// The stream so far: the dwords to place in a ring or an indirect buffer.
    pub words: Vec<u32>,
}

impl Pm4Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every word, keeping the allocation for the next stream.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// Requests an HDP flush (the host data path's write queue: CPU writes through the BAR
    /// to VRAM) and waits until it is done: writes every client's bit to `GPU_HDP_FLUSH_REQ`
    /// and polls `GPU_HDP_FLUSH_DONE` for them.
    pub fn hdp_flush(&mut self) -> &mut Self {
        WaitRegMem {
            mem_space: 0,
            operation: 1,
            function: CompareFunction::Equal as u8,
            engine: 0,
            addr_lo: regs::GPU_HDP_FLUSH_REQ,
            addr_hi: regs::GPU_HDP_FLUSH_DONE,
            reference: regs::HDP_FLUSH_ALL_CLIENTS,
            mask: regs::HDP_FLUSH_ALL_CLIENTS,
            poll_interval: 0x20,
        }
        .encode(&mut self.words);
        self
    }

    /// Invalidates the instruction, scalar, vector, L1 and L2 caches over all memory.
    pub fn invalidate_cache(&mut self) -> &mut Self {
        AcquireMem {
            coher_cntl: 0,
            size: (1u64 << 40) - 1,
            base: 0,
            poll_interval: 0,
            gcr_cntl: gcr::GLI_INV | gcr::GLK_INV | gcr::GLV_INV | gcr::GL1_INV | gcr::GL2_INV,
        }
        .encode(&mut self.words);
        self
    }

    /// Waits until the 32-bit word at `signal_value_addr` is `>= value` (low 32 bits compared).
    pub fn wait(&mut self, signal_value_addr: u64, value: u64) -> WaitPatch {
        let start = self.words.len();
        WaitRegMem {
            mem_space: 1,
            operation: 0,
            function: CompareFunction::GreaterEqual as u8,
            engine: 0,
            addr_lo: signal_value_addr as u32,
            addr_hi: (signal_value_addr >> 32) as u32,
            reference: value as u32,
            mask: 0xffff_ffff,
            poll_interval: 4,
        }
        .encode(&mut self.words);
        WaitPatch {
            reference_at: start + 4,
        }
    }

    /// Copies `size` bytes from `src` to `dst` with CP DMA, in [`DMA_DATA_CHUNK_BYTES`]
    /// packets, the last with `CP_SYNC`: the CP goes on only once every byte has landed, so a
    /// signal after it means the data is there. CP DMA does not wait for earlier dispatches:
    /// callers order it after them (a wait for the timeline, or `CS_PARTIAL_FLUSH`).
    pub fn copy(&mut self, dst: u64, src: u64, size: u64) -> &mut Self {
        let mut done = 0;
        loop {
            let n = (size - done).min(DMA_DATA_CHUNK_BYTES);
            let last = done + n == size;
            DmaData::copy(dst + done, src + done, n as u32, last).encode(&mut self.words);
            done += n;
            if last {
                return self;
            }
        }
    }

    /// Fills `size` bytes at `dst` with the 32-bit `value` repeated (`dst` and `size` whole
    /// dwords) with CP DMA from the packet's data, in [`DMA_DATA_CHUNK_BYTES`] packets, the
    /// last with `CP_SYNC`. A size of 0 emits one empty packet that still waits for earlier
    /// DMAs.
    pub fn fill(&mut self, dst: u64, value: u32, size: u64) -> &mut Self {
        let mut done = 0;
        loop {
            let n = (size - done).min(DMA_DATA_CHUNK_BYTES);
            let last = done + n == size;
            let mut d = DmaData::copy(dst + done, u64::from(value), n as u32, last);
            d.src_sel = dma_src_sel::DATA;
            d.encode(&mut self.words);
            done += n;
            if last {
                return self;
            }
        }
    }

    /// Calls the indirect buffer of `size_dwords` dwords at `address`; execution returns here.
    pub fn indirect_buffer(&mut self, address: u64, size_dwords: u32) -> &mut Self {
        IndirectBuffer {
            address,
            size_dwords,
            chain: false,
            valid: true,
        }
        .encode(&mut self.words);
        self
    }

    /// Continues in the indirect buffer at `address` without coming back (the last packet of
    /// an indirect buffer that goes on elsewhere).
    pub fn chain_indirect_buffer(&mut self, address: u64, size_dwords: u32) -> &mut Self {
        IndirectBuffer {
            address,
            size_dwords,
            chain: true,
            valid: true,
        }
        .encode(&mut self.words);
        self
    }

    /// Writes the 64-bit GPU clock (100 MHz) to `addr`, ordered with the work around it: an
    /// end-of-pipe release first (everything before has finished and written its memory),
    /// then the clock's release, then an acquire that writes L2 back, so that once a later
    /// signal is seen the stamp is in memory. The bare clock release alone, tinygrad 0.9.0's
    /// form, let real GPUs stamp early or leave the stamp unwritten when the host read it
    /// (tinygrad's PRs #12794 and #13267).
    pub fn timestamp(&mut self, addr: u64) -> &mut Self {
        let release = |data_sel: u8, address: u64| ReleaseMem {
            event_type: EVENT_CACHE_FLUSH_AND_INV_TS,
            event_index: EVENT_INDEX_END_OF_PIPE,
            gcr: 0,
            data_sel,
            int_sel: int_sel::NONE,
            dst_sel: 0,
            address,
            data: 0,
            int_ctx: 0,
        };
        release(data_sel::NONE, 0).encode(&mut self.words);
        release(data_sel::GPU_CLOCK_64, addr).encode(&mut self.words);
        AcquireMem {
            coher_cntl: 0,
            size: (1u64 << 40) - 1,
            base: 0,
            poll_interval: 0,
            gcr_cntl: gcr::GLM_INV
                | gcr::GLM_WB
                | gcr::GLK_INV
                | gcr::GLK_WB
                | gcr::GLV_INV
                | gcr::GL1_INV
                | gcr::GL2_INV
                | gcr::GL2_WB,
        }
        .encode(&mut self.words);
        self
    }

    /// Writes `value` to the signal at end of pipe; when the signal has an event mailbox, also
    /// writes `event_id` there and raises the interrupt that wakes `WAIT_EVENTS`.
    pub fn signal(
        &mut self,
        signal_value_addr: u64,
        value: u64,
        event_mailbox_ptr: u64,
        event_id: u32,
    ) -> SignalPatch {
        let start = self.words.len();
        let release = |address: u64, data: u64, int_sel: u8, int_ctx: u32| ReleaseMem {
            event_type: EVENT_CACHE_FLUSH_AND_INV_TS,
            event_index: EVENT_INDEX_END_OF_PIPE,
            gcr: SIGNAL_GCR,
            data_sel: data_sel::DATA_32,
            int_sel,
            dst_sel: 0,
            address,
            data,
            int_ctx,
        };
        // Only the mailbox write interrupts, naming its event. An interrupt with context 0
        // after the value write (as tinygrad sent until its PR #17004) names no event, so KFD
        // scans every signal event of the process for each signal.
        release(signal_value_addr, value, int_sel::NONE, 0).encode(&mut self.words);
        if event_mailbox_ptr != 0 {
            release(
                event_mailbox_ptr,
                event_id as u64,
                int_sel::SEND_INT_ON_CONFIRM,
                event_id,
            )
            .encode(&mut self.words);
        }
        SignalPatch { data_at: start + 5 }
    }

    /// A whole kernel dispatch: flush and invalidate, program registers, user data, launch
    /// dimensions, `DISPATCH_DIRECT`, then a `CS_PARTIAL_FLUSH`.
    pub fn exec(
        &mut self,
        setup: &DispatchSetup,
        global: [u32; 3],
        local: [u32; 3],
    ) -> DispatchPatch {
        self.hdp_flush();
        self.invalidate_cache();
        let lds_granules = setup.group_segment_size.div_ceil(regs::LDS_GRANULE);
        let prog = setup.code_entry >> 8;
        let w = &mut self.words;
        let sh = |w: &mut Vec<u32>, reg: u16, values: &[u32]| SetShReg { reg, values }.encode(w);
        sh(
            w,
            regs::COMPUTE_PGM_LO,
            &[
                prog as u32,
                (prog >> 32) as u32,
                0,
                0,
                (setup.scratch_base >> 8) as u32,
                (setup.scratch_base >> 40) as u32,
            ],
        );
        sh(
            w,
            regs::COMPUTE_PGM_RSRC1,
            &[
                setup.rsrc1,
                regs::PgmRsrc2(setup.rsrc2).with_lds_size(lds_granules).0,
            ],
        );
        sh(w, regs::COMPUTE_TMPRING_SIZE, &[setup.tmpring_size]);
        sh(w, regs::COMPUTE_RESTART_X, &[0, 0, 0]);
        sh(w, regs::COMPUTE_STATIC_THREAD_MGMT_SE0, &[u32::MAX; 2]);
        sh(w, regs::COMPUTE_STATIC_THREAD_MGMT_SE2, &[u32::MAX; 2]);
        sh(w, regs::COMPUTE_STATIC_THREAD_MGMT_SE4, &[u32::MAX; 4]);
        sh(
            w,
            regs::COMPUTE_USER_DATA_0,
            &setup.user_data[..setup.user_data_count.min(16)],
        );
        let local_at = w.len() + 2 + 3;
        sh(
            w,
            regs::COMPUTE_START_X,
            &[0, 0, 0, local[0], local[1], local[2], 0, 0],
        );
        sh(w, regs::COMPUTE_RESOURCE_LIMITS, &[0]);
        let global_at = w.len() + 1;
        DispatchDirect {
            dims: global,
            initiator: regs::initiator::CS_W32_EN
                | regs::initiator::FORCE_START_AT_000
                | regs::initiator::COMPUTE_SHADER_EN,
        }
        .encode(w);
        EventWrite {
            event_type: EVENT_CS_PARTIAL_FLUSH,
            event_index: 4,
        }
        .encode(w);
        DispatchPatch {
            local_at,
            global_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_one(words: &[u32]) -> Packet<'_> {
        let h = Header::parse(words[0]);
        assert_eq!(h.len(), words.len());
        Packet::decode(h, &words[1..]).expect("decodes")
    }

    #[test]
    fn indirect_buffer_round_trips() {
        for (address, size_dwords, chain) in [
            (0x1234_5678_9abc_u64, 17u32, false),
            (0xffff_ffff_fffc, IB_MAX_DWORDS, true),
            (0x1000, 0, false),
        ] {
            let ib = IndirectBuffer {
                address,
                size_dwords,
                chain,
                valid: true,
            };
            let mut w = Vec::new();
            ib.encode(&mut w);
            assert_eq!(w.len(), IndirectBuffer::DWORDS);
            assert_eq!(w[0], 0xc002_3f00);
            assert_eq!(decode_one(&w), Packet::IndirectBuffer(ib));
        }
    }

    #[test]
    fn dma_data_copies_match_the_documented_layout() {
        // PACKET3(DMA_DATA, 5); control: DST_SEL 3 (L2) at bit 20, SRC_SEL 3 (L2) at bit 29,
        // CP_SYNC at bit 31; source and destination lo/hi; BYTE_COUNT in the command dword.
        let mut b = Pm4Builder::new();
        b.copy(0x7f00_0000_1000, 0x7e00_0000_2000, 0x1234);
        assert_eq!(
            b.words,
            [
                0xc005_5000,
                0xe030_0000,
                0x0000_2000,
                0x7e00,
                0x0000_1000,
                0x7f00,
                0x1234
            ]
        );
    }

    #[test]
    fn large_copies_split_into_chunks_and_only_the_last_syncs() {
        let size = 2 * DMA_DATA_CHUNK_BYTES + 12;
        let mut b = Pm4Builder::new();
        b.copy(0x10_0000_0000, 0x20_0000_0000, size);
        let packets: Vec<DmaData> = b
            .words
            .chunks(7)
            .map(|w| match decode_one(w) {
                Packet::DmaData(d) => d,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(packets.len(), 3);
        let mut at = 0;
        for (i, d) in packets.iter().enumerate() {
            assert_eq!(d.src, 0x20_0000_0000 + at);
            assert_eq!(d.dst, 0x10_0000_0000 + at);
            assert_eq!(d.cp_sync, i == 2);
            at += u64::from(d.byte_count);
        }
        assert_eq!(at, size);
        // An empty copy is one packet moving nothing that still waits for earlier DMAs.
        let mut b = Pm4Builder::new();
        b.copy(0x1000, 0x2000, 0);
        assert_eq!(
            decode_one(&b.words),
            Packet::DmaData(DmaData::copy(0x1000, 0x2000, 0, true))
        );
    }

    #[test]
    fn dma_data_round_trips_every_field() {
        let d = DmaData {
            engine_pfp: true,
            src_cache_policy: 2,
            src_volatile: true,
            dst_sel: dma_dst_sel::GDS,
            dst_cache_policy: 1,
            dst_volatile: true,
            src_sel: dma_src_sel::DATA,
            cp_sync: false,
            src: 0xdead_beef,
            dst: 0xffff_1234_5678_9abc,
            byte_count: DMA_DATA_MAX_BYTES,
            src_is_register: true,
            dst_is_register: false,
            src_no_increment: false,
            dst_no_increment: true,
            raw_wait: true,
            disable_write_confirm: true,
        };
        let mut w = Vec::new();
        d.encode(&mut w);
        assert_eq!(decode_one(&w), Packet::DmaData(d));
        assert!(matches!(
            Packet::decode(Header::parse(w[0]), &w[1..6]),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn builder_indirect_buffers_match_the_reference_layout() {
        // tinygrad: PACKET3(INDIRECT_BUFFER, 2), lo, hi, len | INDIRECT_BUFFER_VALID.
        let mut b = Pm4Builder::new();
        b.indirect_buffer(0x7f00_1234_5600, 99);
        assert_eq!(b.words, [0xc002_3f00, 0x1234_5600, 0x7f00, 99 | (1 << 23)]);
        b.clear();
        b.chain_indirect_buffer(0x40_0000, 8);
        assert_eq!(b.words[3], 8 | (1 << 20) | (1 << 23));
        assert!(IndirectBuffer::decode(&[0, 0]).is_err());
    }

    #[test]
    fn patch_handles_point_at_the_fields_they_change() {
        let mut b = Pm4Builder::new();
        let wait = b.wait(0x1000, 5);
        let setup = DispatchSetup {
            code_entry: 0x10000,
            rsrc1: 0,
            rsrc2: 0,
            group_segment_size: 0,
            scratch_base: 0,
            tmpring_size: 0,
            user_data: [0; 16],
            user_data_count: 2,
        };
        let dispatch = b.exec(&setup, [1, 2, 3], [4, 5, 6]);
        let signal = b.signal(0x2000, 7, 0, 0);
        let mut words = b.words.clone();
        wait.set_value(&mut words, 0x1_0000_0009);
        dispatch.set_dims(&mut words, [10, 11, 12], [13, 14, 15]);
        signal.set_value(&mut words, 0x2_0000_0021);
        let mut pos = 0;
        let (mut saw_wait, mut saw_dispatch, mut saw_signal) = (false, false, false);
        while pos < words.len() {
            let h = Header::parse(words[pos]);
            match Packet::decode(h, &words[pos + 1..pos + h.len()]).unwrap() {
                Packet::WaitRegMem(w) if w.mem_space == 1 => {
                    assert_eq!(w.reference, 9);
                    saw_wait = true;
                }
                Packet::DispatchDirect(d) => {
                    assert_eq!(d.dims, [10, 11, 12]);
                    saw_dispatch = true;
                }
                Packet::SetShReg(s) if s.reg == regs::COMPUTE_START_X => {
                    assert_eq!(&s.values[3..6], &[13, 14, 15]);
                }
                Packet::ReleaseMem(r) => {
                    assert_eq!(r.data, 0x2_0000_0021);
                    saw_signal = true;
                }
                _ => {}
            }
            pos += h.len();
        }
        assert!(saw_wait && saw_dispatch && saw_signal);
    }

    #[test]
    fn copy_data_fields_sit_where_the_mec_layout_puts_them() {
        // tinygrad's PMC read: COPY_DATA, src_sel 4 (perf counter), dst_sel 2 (memory), with
        // write confirm (bit 20) in its SQTT form; count_sel is bit 16.
        let words = [
            header(OP_COPY_DATA, 4),
            (1 << 20) | (2 << 8) | 4,
            0x1234,
            0,
            0xdead_bee0,
            0x7f,
        ];
        let Packet::CopyData(c) = decode_one(&words) else {
            panic!("not COPY_DATA");
        };
        assert_eq!((c.src_sel, c.dst_sel), (4, 2));
        assert!(c.write_confirm && !c.count_64);
        assert_eq!((c.src, c.dst), (0x1234, 0x7f_dead_bee0));
        let mut again = Vec::new();
        c.encode(&mut again);
        assert_eq!(again, words);
        let c64 = CopyData::decode(&[(1 << 16) | (5 << 8) | 9, 0, 0, 0, 0]).expect("decodes");
        assert!(c64.count_64);
        assert_eq!((c64.src_sel, c64.dst_sel), (9, 5));
    }

    #[test]
    fn write_data_pred_exec_and_set_uconfig_reg_decode() {
        let words = [
            header(OP_WRITE_DATA, 4),
            (5 << 8) | (1 << 16),
            0x1000,
            0x2,
            7,
            8,
        ];
        let Packet::WriteData(d) = decode_one(&words) else {
            panic!("not WRITE_DATA");
        };
        assert_eq!(d.dst_sel, write_dst_sel::MEMORY);
        assert!(d.no_increment);
        assert_eq!((d.dst, d.data), (0x2_0000_1000, &[7u32, 8][..]));
        let mut again = Vec::new();
        d.encode(&mut again);
        assert_eq!(again, words);
        assert!(WriteData::decode(&[0, 0, 0]).is_err(), "no data dword");

        // tinygrad: PRED_EXEC with xcc_mask << 24, then the count or-ed in.
        let p = PredExec::decode(&[(0b10 << 24) | 17]).expect("decodes");
        assert_eq!((p.exec_count, p.device_select), (17, 0b10));

        let words = [header(OP_SET_UCONFIG_REG, 2), 0x200, 0xe000_0000, 5];
        let Packet::SetUconfigReg(u) = decode_one(&words) else {
            panic!("not SET_UCONFIG_REG");
        };
        assert_eq!((u.reg, u.values), (0x200, &[0xe000_0000u32, 5][..]));
    }

    #[test]
    fn every_opcode_the_definitions_list_has_a_name() {
        for (op, name) in [
            (0x10, "NOP"),
            (0x23, "PRED_EXEC"),
            (0x37, "WRITE_DATA"),
            (0x40, "COPY_DATA"),
            (0x50, "DMA_DATA"),
            (0x79, "SET_UCONFIG_REG"),
            (0x93, "WAIT_REG_MEM64"),
            (0xf0, "SET_Q_PREEMPTION_MODE"),
        ] {
            assert_eq!(opcode_name(op), Some(name));
        }
        assert_eq!(opcode_name(0x01), None);
    }

    #[test]
    fn every_gli_inv_value_but_zero_touches_the_instruction_cache() {
        // GCR_CNTL's GLI_INV field is bits 0..2: 1 (all), 2 and 3 (a range) all invalidate.
        assert!(!gcr::invalidates_instructions(0x4380));
        for gli in 1..=3 {
            assert!(gcr::invalidates_instructions(0x4380 | gli));
        }
        assert!(
            !gcr::invalidates_instructions(1 << 2),
            "GL1_RANGE is not GLI_INV"
        );
    }
}
