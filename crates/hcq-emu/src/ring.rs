//! What the PM4 command processor and the SDMA engine share about their rings: waiting for the
//! doorbell, checking the write pointer it carries, fetching dwords at ring positions, and
//! publishing the read pointer back to the driver.
//!
//! Pointers never wrap; a ring position is taken modulo the ring size. Compute queues count
//! them in dwords, SDMA queues in bytes, as on hardware.

use std::sync::Arc;
use std::time::Duration;

use hcq_amd_sys::pm4::CompareFunction;

use crate::gpu::{FaultClass, Gpu};
use crate::memory::Snapshot;
use crate::queue::QueueShared;

/// First and longest sleep between two reads of a polled value (`WAIT_REG_MEM`,
/// `POLL_REGMEM`); other engines' writes wake the poll early.
const POLL_MIN: Duration = Duration::from_micros(20);
const POLL_MAX: Duration = Duration::from_millis(1);

/// Where a queue's ring and pointers are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingDesc {
    pub queue_id: u32,
    pub ring_base: u64,
    pub ring_bytes: u64,
    pub rptr_addr: u64,
}

/// What a queue's read and write pointers count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PointerUnit {
    /// PM4 compute queues.
    Dwords,
    /// SDMA queues; packets still start on dword boundaries.
    Bytes,
}

impl PointerUnit {
    fn bytes(self) -> u64 {
        match self {
            PointerUnit::Dwords => 4,
            PointerUnit::Bytes => 1,
        }
    }
}

/// One queue's ring as its engine consumes it.
pub(crate) struct Ring {
    gpu: Arc<Gpu>,
    pub queue: Arc<QueueShared>,
    desc: RingDesc,
    unit: PointerUnit,
    /// How faults name the queue (`queue`, `SDMA queue`).
    kind: &'static str,
    /// The read pointer, in `unit`s.
    rptr: u64,
    rptr_fault_reported: bool,
    /// The doorbell value taken last: the engine has work when the slot holds another.
    doorbell_seen: u64,
}

impl Ring {
    pub fn new(
        gpu: Arc<Gpu>,
        queue: Arc<QueueShared>,
        desc: RingDesc,
        unit: PointerUnit,
        kind: &'static str,
    ) -> Self {
        Ring {
            gpu,
            queue,
            desc,
            unit,
            kind,
            rptr: 0,
            rptr_fault_reported: false,
            doorbell_seen: 0,
        }
    }

    /// Reads a value with `read` until `(value & mask) <func> reference` holds or the queue is
    /// destroyed; a failed read ends the poll with its error. The interval and retry fields of
    /// the packets do not bound it: a queue waits as long as it is alive.
    pub fn poll<E>(
        &self,
        func: CompareFunction,
        mask: u32,
        reference: u32,
        mut read: impl FnMut(&Gpu) -> Result<u32, E>,
    ) -> Result<(), E> {
        let mut sleep = POLL_MIN;
        loop {
            if self.halted() {
                return Ok(());
            }
            let seen = self.gpu.watch.seq();
            if func.holds(read(&self.gpu)? & mask, reference) {
                return Ok(());
            }
            if self.queue.sole_writer() {
                // Nothing else writes this memory: the wait would last until the queue is
                // stopped, so stop it now.
                self.queue.stop();
                return Ok(());
            }
            self.gpu.watch.wait(seen, sleep);
            sleep = (sleep * 2).min(POLL_MAX);
        }
    }

    /// Whether the engine must take no further packet: the queue was destroyed, or a VM fault
    /// evicted the process's queues on this GPU.
    pub fn halted(&self) -> bool {
        self.queue.stopped() || self.gpu.hold.is_evicted()
    }

    /// Reports a fault of this queue.
    pub fn fault(&self, class: FaultClass, what: String) {
        self.gpu.raise(
            class,
            &format!("{} {}: {what}", self.kind, self.desc.queue_id),
        );
    }

    /// Positions (in pointer units) the ring holds.
    fn capacity(&self) -> u64 {
        self.desc.ring_bytes / self.unit.bytes()
    }

    /// Blocks until the doorbell is written, and returns the read pointer and the write pointer it
    /// carries: the packets between them are the engine's to execute. `None` once the queue is
    /// destroyed. A write pointer the engine cannot use (behind the read pointer, more than a
    /// ring ahead of it, or between dwords) is a fault: the read pointer jumps to it (to its
    /// dword) and the ring contents in between are skipped.
    pub fn next_work(&mut self) -> Option<(u64, u64)> {
        loop {
            let wptr = self.queue.next(self.doorbell_seen)?;
            self.doorbell_seen = wptr;
            let queue = &self.queue;
            self.gpu.hold.wait(|| queue.stopped());
            let between_dwords = self.unit == PointerUnit::Bytes && wptr % 4 != 0;
            if !between_dwords && wptr >= self.rptr && wptr - self.rptr <= self.capacity() {
                return Some((self.rptr, wptr));
            }
            let (whole, units, resume_at) = match self.unit {
                PointerUnit::Dwords => ("", "dwords", wptr),
                PointerUnit::Bytes => ("a dword position ", "bytes", wptr & !3),
            };
            self.fault(
                FaultClass::Hw,
                format!(
                    "doorbell write pointer {wptr} is not {whole}within the {} ring {units} after \
                     the read pointer {}; ring contents skipped",
                    self.capacity(),
                    self.rptr
                ),
            );
            self.set_rptr(resume_at);
        }
    }

    /// The read pointer the driver last saw.
    pub fn rptr(&self) -> u64 {
        self.rptr
    }

    /// Moves the read pointer to `pos` and stores it where the driver reads it. The first
    /// store to an unmapped address is reported as a VM fault; later ones are not repeated.
    pub fn set_rptr(&mut self, pos: u64) {
        self.rptr = pos;
        self.publish_rptr();
    }

    /// Stores the read pointer where the driver reads it (before the first doorbell too, so
    /// the driver sees the ring empty).
    pub fn publish_rptr(&mut self) {
        let reported = if self.gpu.wrapped_read_pointers {
            self.rptr % self.capacity()
        } else {
            self.rptr
        };
        let published = self.gpu.publish_read_pointer(self.desc.rptr_addr, reported);
        if !published && !std::mem::replace(&mut self.rptr_fault_reported, true) {
            let va = self.desc.rptr_addr;
            self.fault(
                FaultClass::Vm { va },
                format!("VM fault: read pointer write to unmapped address {va:#x}"),
            );
        }
    }

    /// The GPU address of ring position `pos` (in pointer units).
    pub fn address(&self, pos: u64) -> u64 {
        self.desc.ring_base + (pos % self.capacity()) * self.unit.bytes()
    }

    /// The dword at ring position `pos`, read through `snap`; `Err` holds the unmapped address.
    pub fn load_u32(&self, snap: &Snapshot, pos: u64) -> Result<u32, u64> {
        let va = self.address(pos);
        snap.load_u32(va).ok_or(va)
    }
}
