//! PM4 type-3 packets for the gfx11 compute queue: each packet declared once, with an encoder
//! (the driver builds command streams) and a decoder (the emulated command processor executes
//! them), plus [`Pm4Builder`], which emits the exact sequences of the reference runtime.

mod builder;
mod data;
mod dispatch;
mod indirect;
mod sync;
#[cfg(test)]
mod tests;

pub use builder::{DispatchPatch, DispatchSetup, Pm4Builder, SignalPatch, WaitPatch};
pub use data::{
    copy_dst_sel, copy_src_sel, dma_dst_sel, dma_src_sel, write_dst_sel, CopyData, DmaData,
    WriteData, DMA_DATA_CHUNK_BYTES, DMA_DATA_MAX_BYTES,
};
pub use dispatch::{DispatchDirect, PredExec, SetShReg, SetUconfigReg, UCONFIG_REG_START};
pub use indirect::{IndirectBuffer, IB_CHAIN, IB_MAX_DWORDS, IB_VALID};
pub use sync::{
    data_sel, event_name, gcr, int_sel, mem_space, release_dst_sel, release_gcr, wait_operation,
    AcquireMem, CompareFunction, EventWrite, ReleaseMem, WaitRegMem, EVENT_CACHE_FLUSH_AND_INV_TS,
    EVENT_CS_PARTIAL_FLUSH, EVENT_INDEX_END_OF_PIPE,
};

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

/// Register-space addresses are 18 bits wide (`WAIT_REG_MEM`, `COPY_DATA`, `WRITE_DATA`).
pub const REGISTER_ADDRESS_MASK: u32 = (1 << 18) - 1;

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
