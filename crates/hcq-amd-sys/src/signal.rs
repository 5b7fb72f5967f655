//! `amd_signal_t`: the 64-byte signal the GPU writes and the host waits on.

/// Layout of ROCr's `amd_signal_t`. The GPU writes `value` (and the timestamps); the host reads
/// them through volatile/atomic loads.
#[repr(C, align(64))]
#[derive(Debug, Default, Clone, Copy)]
pub struct AmdSignal {
    /// Bytes 0..8: ROCr's signal kind (`amd_signal_kind64_t`: 1 for a user signal, negative for the
    /// doorbell kinds); neither hcq's driver nor the emulator reads it.
    pub kind: i64,
    /// Bytes 8..16: the signal's value. An end-of-pipe `RELEASE_MEM` (or SDMA `FENCE`) sets it;
    /// `WAIT_REG_MEM` and `POLL_REGMEM` compare its low 32 bits.
    pub value: i64,
    /// Bytes 16..24: GPU address of the KFD event slot a signalling release also writes `event_id`
    /// to before raising the interrupt; 0 for a signal without an event (no interrupt).
    pub event_mailbox_ptr: u64,
    /// Bytes 24..28: the KFD event (from `CREATE_EVENT`) whose interrupt wakes the host's waiters
    /// on this signal.
    pub event_id: u32,
    /// Bytes 28..32: padding before the timestamps.
    pub reserved1: u32,
    /// Bytes 32..40: the GPU clock (100 MHz ticks) when the signalled work started, where a
    /// timestamp packet writes it.
    pub start_ts: u64,
    /// Bytes 40..48: the GPU clock (100 MHz ticks) when the signalled work ended.
    pub end_ts: u64,
    /// Bytes 48..56: reserved (ROCr's queue pointer for doorbell signals; unused here).
    pub reserved2: u64,
    /// Bytes 56..64: reserved, padding the signal to its 64-byte size.
    pub reserved3: [u32; 2],
}

/// Bytes per signal (64, its size and alignment): a signal page holds `page size / 64` of them.
pub const SIGNAL_SIZE: usize = core::mem::size_of::<AmdSignal>();
/// Byte offset of `value` (8): the address the GPU's waits poll and its releases write.
pub const VALUE_OFFSET: u64 = core::mem::offset_of!(AmdSignal, value) as u64;
/// Byte offset of `event_mailbox_ptr` (16).
pub const EVENT_MAILBOX_PTR_OFFSET: u64 =
    core::mem::offset_of!(AmdSignal, event_mailbox_ptr) as u64;
/// Byte offset of `event_id` (24).
pub const EVENT_ID_OFFSET: u64 = core::mem::offset_of!(AmdSignal, event_id) as u64;
/// Byte offset of `start_ts` (32), the target of the start timestamp.
pub const START_TS_OFFSET: u64 = core::mem::offset_of!(AmdSignal, start_ts) as u64;
/// Byte offset of `end_ts` (40), the target of the end timestamp.
pub const END_TS_OFFSET: u64 = core::mem::offset_of!(AmdSignal, end_ts) as u64;
