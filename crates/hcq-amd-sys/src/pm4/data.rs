//! The packets that move data: `COPY_DATA` (one value), `DMA_DATA` (a CP DMA copy or fill) and
//! `WRITE_DATA` (the packet's own dwords).

use super::{header, need, DecodeError, OP_COPY_DATA, OP_DMA_DATA, OP_WRITE_DATA};

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

/// Bytes per `DMA_DATA` packet in [`Pm4Builder::copy`](super::Pm4Builder::copy): a power of two
/// within the 21-bit byte count amdgpu's gfx9+ header documents, so the builder stays inside
/// either reading of the field's width.
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
