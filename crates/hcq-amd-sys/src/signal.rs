//! `amd_signal_t`: the 64-byte signal the GPU writes and the host waits on.

/// Layout of ROCr's `amd_signal_t`. The GPU writes `value` (and the timestamps); the host reads
/// them through volatile/atomic loads.
#[repr(C, align(64))]
#[derive(Debug, Default, Clone, Copy)]
pub struct AmdSignal {
    pub kind: i64,
    pub value: i64,
    pub event_mailbox_ptr: u64,
    pub event_id: u32,
    pub reserved1: u32,
    pub start_ts: u64,
    pub end_ts: u64,
    pub reserved2: u64,
    pub reserved3: [u32; 2],
}

pub const SIGNAL_SIZE: usize = core::mem::size_of::<AmdSignal>();
pub const VALUE_OFFSET: u64 = core::mem::offset_of!(AmdSignal, value) as u64;
pub const EVENT_MAILBOX_PTR_OFFSET: u64 =
    core::mem::offset_of!(AmdSignal, event_mailbox_ptr) as u64;
pub const EVENT_ID_OFFSET: u64 = core::mem::offset_of!(AmdSignal, event_id) as u64;
pub const START_TS_OFFSET: u64 = core::mem::offset_of!(AmdSignal, start_ts) as u64;
pub const END_TS_OFFSET: u64 = core::mem::offset_of!(AmdSignal, end_ts) as u64;
