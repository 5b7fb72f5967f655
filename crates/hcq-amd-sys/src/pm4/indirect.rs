//! `INDIRECT_BUFFER`: how a stream calls or continues in another buffer of packets.

use super::{header, need, DecodeError, OP_INDIRECT_BUFFER};

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
