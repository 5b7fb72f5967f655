//! Signals (`amd_signal_t` in the process's signal page), KFD events, and waiting on them.

use crate::kfd::{Kfd, Release};
use hcq_amd_sys::commands::CommandBuilder;
use hcq_amd_sys::kfd as abi;
use hcq_amd_sys::signal::{self as layout, AmdSignal};
use hcq_core::{Error, Result};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A signal slot in GPU-visible, uncached memory. The GPU writes `value` and the timestamps; the
/// host reads them atomically.
#[derive(Debug)]
pub struct Signal {
    ptr: *mut AmdSignal,
    /// The KFD event the GPU raises when it writes the signal (0: none, the host polls).
    pub event_id: u32,
    /// GPU address of that event's slot in the event page (the mailbox `RELEASE_MEM` writes
    /// the event id to before its interrupt).
    pub event_mailbox_ptr: u64,
}

// SAFETY: the slot is shared with the GPU by design; every access is atomic.
unsafe impl Send for Signal {}
// SAFETY: as above.
unsafe impl Sync for Signal {}

impl Signal {
    /// # Safety
    /// `ptr` must point to a 64-byte slot of a live, CPU-mapped signal page that outlives the
    /// signal and that nothing else uses.
    pub unsafe fn new(ptr: *mut AmdSignal, event_id: u32, event_mailbox_ptr: u64) -> Signal {
        let s = Signal {
            ptr,
            event_id,
            event_mailbox_ptr,
        };
        s.field_u64(layout::EVENT_MAILBOX_PTR_OFFSET)
            .store(event_mailbox_ptr, Ordering::Relaxed);
        s.set(0);
        s
    }

    fn field_u64(&self, offset: u64) -> &AtomicU64 {
        // SAFETY: `offset` is one of the layout's 8-byte aligned fields inside the live slot.
        unsafe { &*((self.ptr as *mut u8).add(offset as usize) as *const AtomicU64) }
    }

    fn value_cell(&self) -> &AtomicI64 {
        // SAFETY: `value` is an aligned 8-byte field of the live slot.
        unsafe { &*((self.ptr as *mut u8).add(layout::VALUE_OFFSET as usize) as *const AtomicI64) }
    }

    /// The signal's value as the GPU last wrote it.
    pub fn value(&self) -> u64 {
        self.value_cell().load(Ordering::Acquire) as u64
    }

    /// Sets the value from the host (the GPU must not be about to write it).
    pub fn set(&self, v: u64) {
        self.value_cell().store(v as i64, Ordering::Release);
    }

    /// Appends to `b` (either engine's commands) the release that sets the signal to `value`
    /// once the commands before it have finished and, through its event mailbox, wakes
    /// whoever waits on its event.
    pub fn release_with(&self, b: &mut impl CommandBuilder, value: u64) {
        b.signal(
            self.value_addr(),
            value,
            self.event_mailbox_ptr,
            self.event_id,
        );
    }

    /// One submission's commands on either engine, in a cleared builder: the `waits` (signal
    /// address, value to reach), `body` between stamps of the GPU clock at `stamps` (start and
    /// end addresses) when given, then the release of this signal to `value`.
    pub(crate) fn release_after<B: CommandBuilder, R>(
        &self,
        b: &mut B,
        waits: &[(u64, u64)],
        stamps: Option<(u64, u64)>,
        value: u64,
        body: impl FnOnce(&mut B) -> R,
    ) -> R {
        b.clear();
        for &(addr, reached) in waits {
            b.wait(addr, reached);
        }
        let result = b.stamped(stamps, body);
        self.release_with(b, value);
        result
    }

    /// GPU address of the value field (what `WAIT_REG_MEM` polls and `RELEASE_MEM` writes).
    pub fn value_addr(&self) -> u64 {
        self.ptr as u64 + layout::VALUE_OFFSET
    }
    /// GPU address of the start timestamp (written by a timestamp packet before the work).
    pub fn start_ts_addr(&self) -> u64 {
        self.ptr as u64 + layout::START_TS_OFFSET
    }
    /// GPU address of the end timestamp (written when the work has finished).
    pub fn end_ts_addr(&self) -> u64 {
        self.ptr as u64 + layout::END_TS_OFFSET
    }
    /// The start timestamp, in GPU clock ticks.
    pub fn start_ts(&self) -> u64 {
        self.field_u64(layout::START_TS_OFFSET)
            .load(Ordering::Acquire)
    }
    /// The end timestamp, in GPU clock ticks.
    pub fn end_ts(&self) -> u64 {
        self.field_u64(layout::END_TS_OFFSET)
            .load(Ordering::Acquire)
    }
}

/// A GPU exception reported through KFD's exception events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuException {
    /// The GPU it happened on.
    pub gpu_id: u32,
    /// Faulting address for VM faults.
    pub va: Option<u64>,
    /// The kernel stopped the process's queues on that GPU for good: KFD evicts them at a
    /// VM fault (`kfd_dqm_evict_pasid`), and after a GPU reset that lost memory.
    pub stops_queues: bool,
}

/// The process's exception events: KFD signals them on VM faults and hardware exceptions.
pub struct ExceptionEvents {
    /// The `KFD_IOC_EVENT_MEMORY` event (VM faults).
    pub memory_event: u32,
    /// The `KFD_IOC_EVENT_HW_EXCEPTION` event (GPU resets and other hardware exceptions).
    pub hw_event: u32,
}

impl ExceptionEvents {
    /// Creates both events (auto-reset, in KFD's own event page).
    pub fn create(kfd: &Kfd) -> Result<Self> {
        let memory_event = kfd.create_event(abi::EVENT_MEMORY, 0, true)?.event_id;
        let hw_event = match kfd.create_event(abi::EVENT_HW_EXCEPTION, 0, true) {
            Ok(a) => a.event_id,
            Err(e) => {
                // SAFETY: destroying an event releases no memory.
                unsafe {
                    kfd.release(vec![Release::DestroyEvent {
                        event_id: memory_event,
                    }])
                };
                return Err(e);
            }
        };
        Ok(ExceptionEvents {
            memory_event,
            hw_event,
        })
    }

    /// Destroys both events (once nothing waits on them).
    pub fn destroy(&self, kfd: &Kfd) {
        let steps = [self.memory_event, self.hw_event]
            .map(|event_id| Release::DestroyEvent { event_id })
            .to_vec();
        // SAFETY: destroying events releases no memory.
        unsafe { kfd.release(steps) };
    }

    fn slots(&self, signal_event: Option<u32>) -> Vec<abi::EventData> {
        let mut v = Vec::with_capacity(3);
        if let Some(id) = signal_event {
            v.push(abi::EventData {
                event_id: id,
                ..Default::default()
            });
        }
        v.push(abi::EventData {
            event_id: self.memory_event,
            ..Default::default()
        });
        v.push(abi::EventData {
            event_id: self.hw_event,
            ..Default::default()
        });
        v
    }

    /// Exceptions recorded in `slots` after a wait.
    fn collect(&self, slots: &[abi::EventData], out: &mut Vec<GpuException>) {
        for s in slots {
            if s.event_id == self.memory_event {
                // SAFETY: the kernel fills the memory-exception arm for memory events.
                let d = unsafe { s.data.memory_exception_data };
                if d.gpu_id != 0 {
                    out.push(GpuException {
                        gpu_id: d.gpu_id,
                        va: Some(d.va),
                        stops_queues: true,
                    });
                }
            } else if s.event_id == self.hw_event {
                // SAFETY: the kernel fills the hardware-exception arm for these events.
                let d = unsafe { s.data.hw_exception_data };
                if d.gpu_id != 0 {
                    out.push(GpuException {
                        gpu_id: d.gpu_id,
                        va: None,
                        stops_queues: d.memory_lost != 0,
                    });
                }
            }
        }
    }

    /// Exceptions already pending, without blocking.
    pub fn poll(&self, kfd: &Kfd, out: &mut Vec<GpuException>) -> Result<()> {
        loop {
            let mut slots = self.slots(None);
            if !kfd.wait_events(&mut slots, false, 0)? {
                return Ok(());
            }
            let before = out.len();
            self.collect(&slots, out);
            if out.len() == before {
                return Ok(());
            }
        }
    }

    /// Waits until `signal` reaches `value`. Exceptions seen meanwhile are appended to
    /// `exceptions` and end the wait early. The wait fails when the signal has not moved for
    /// `timeout`: a long queue of short kernels may take longer than that in all, and is not
    /// stuck while it advances.
    pub fn wait_signal(
        &self,
        kfd: &Kfd,
        signal: &Signal,
        value: u64,
        timeout: Duration,
        what: &dyn Fn() -> String,
        exceptions: &mut Vec<GpuException>,
    ) -> Result<()> {
        let mut seen = signal.value();
        let mut moved_at = Instant::now();
        loop {
            let now = signal.value();
            if now >= value {
                return self.poll(kfd, exceptions);
            }
            if now != seen {
                (seen, moved_at) = (now, Instant::now());
            }
            let elapsed = moved_at.elapsed();
            if elapsed >= timeout {
                return Err(Error::Timeout {
                    what: format!("{} (it stayed at {now} all that time)", what()),
                    ms: timeout.as_millis() as u64,
                });
            }
            // Short slices, so a missed interrupt costs little latency.
            let slice = (timeout - elapsed).min(Duration::from_millis(100));
            let mut slots = self.slots(Some(signal.event_id));
            kfd.wait_events(&mut slots, false, slice.as_millis().max(1) as u32)?;
            let before = exceptions.len();
            self.collect(&slots, exceptions);
            if exceptions.len() != before {
                return Ok(());
            }
        }
    }
}
