//! Streams and events: more than one compute queue on a GPU, each in order and independent of
//! the others, and events that order them (across GPUs too) and time them.
//!
//! A stream ([`AmdDevice::open_stream`]) is an [`AmdDevice`] of its own on the same GPU: its
//! own compute queue, timeline, kernel-argument ring, staging buffers and scratch ring, so
//! that two streams never wait on each other's locks or memory. It shares with the device it
//! was opened from what belongs to the GPU: the buffer cache (buffers and programs of one are
//! usable on the other) and the knowledge that a fault has stopped the process's queues. It
//! asks KFD for no SDMA queue (there are few, shared by every process on the machine): its
//! copies run on its own compute queue, as CP DMA.
//!
//! Memory freed while several streams are open is reused only once every one of them has
//! passed the point where it was freed (a fence per stream): in a single queue, later
//! work can never overtake earlier work, across queues it can.
//!
//! An event ([`AmdEvent`]) is a point in one stream's timeline, with the GPU clock at that
//! point: another stream waits for it on the GPU (`WAIT_REG_MEM` on the first stream's
//! signal), the host waits for it, and two events of one GPU give the GPU time between them.

use crate::device::{lock, AmdBuffer, AmdDevice, AmdDriver, DeviceOptions};
use crate::GPU_TIMESTAMP_HZ;
use hcq_amd_sys::pm4::Pm4Builder;
use hcq_core::{Error, Result};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How far one queue's timeline has got, readable without its device's lock.
pub(crate) struct Progress {
    /// `timeline swaps << 32 | the last value submitted` (values stay below 2^31).
    submitted: AtomicU64,
    /// Addresses of the value fields of the timeline signal and of its shadow: the first is
    /// the timeline after an even number of swaps.
    values: [u64; 2],
    /// Keeps the signal page (owned by the driver) mapped.
    driver: Arc<AmdDriver>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (swaps, value) = self.point();
        write!(f, "Progress(submitted {value} after {swaps} swaps)")
    }
}

impl Progress {
    pub(crate) fn new(driver: Arc<AmdDriver>, values: [u64; 2]) -> Progress {
        Progress {
            submitted: AtomicU64::new(0),
            values,
            driver,
        }
    }

    /// Records that `value` of the timeline's `swaps`-th epoch was submitted.
    pub(crate) fn submitted(&self, swaps: u64, value: u64) {
        self.submitted
            .store(swaps << 32 | (value & 0xffff_ffff), Ordering::Release);
    }

    /// `(swaps, last value submitted)`.
    fn point(&self) -> (u64, u64) {
        let p = self.submitted.load(Ordering::Acquire);
        (p >> 32, p & 0xffff_ffff)
    }

    /// The value the timeline signal of epoch `swaps` holds.
    fn reached(&self, swaps: u64) -> u64 {
        let addr = self.values[(swaps & 1) as usize];
        // SAFETY: `addr` is the 8-byte aligned value field of a signal slot in the driver's
        // signal page, which stays mapped while `driver` lives; the GPU and the host only
        // ever access it atomically. A slot given to another signal after its stream went
        // reads that signal's value, which only makes a fence look unpassed.
        let cell = unsafe { &*(addr as *const AtomicI64) };
        cell.load(Ordering::Acquire) as u64
    }

    /// Whether the timeline has reached `value` of epoch `swaps`. A value of an earlier epoch
    /// has been: the timeline swaps only once everything submitted before has finished.
    pub(crate) fn passed(&self, swaps: u64, value: u64) -> bool {
        let (now, _) = self.point();
        now != swaps || self.reached(swaps) >= value
    }
}

/// The point one stream had reached in submitting when a buffer was freed: its memory is
/// reusable once the stream has executed that far.
#[derive(Clone)]
pub(crate) struct Fence {
    progress: Weak<Progress>,
    swaps: u64,
    value: u64,
}

impl Fence {
    /// Whether the stream has executed everything submitted before the fence was taken. A
    /// stream that is gone has: dropping a device waits for its work, or destroys its queues.
    pub(crate) fn passed(&self) -> bool {
        match self.progress.upgrade() {
            Some(p) => p.passed(self.swaps, self.value),
            None => true,
        }
    }
}

/// The streams open on one GPU (the device and the streams opened from it), for the buffer
/// cache they share.
#[derive(Default)]
pub(crate) struct StreamSet {
    streams: std::sync::Mutex<Vec<Weak<Progress>>>,
}

impl StreamSet {
    pub(crate) fn add(&self, progress: &Arc<Progress>) -> usize {
        let mut s = lock(&self.streams);
        s.retain(|p| p.strong_count() > 0);
        s.push(Arc::downgrade(progress));
        s.len()
    }

    /// Where every open stream has got to; empty while only one is open (its own later work
    /// cannot overtake what it submitted before).
    pub(crate) fn fences(&self) -> Vec<Fence> {
        let s = lock(&self.streams);
        let live: Vec<Arc<Progress>> = s.iter().filter_map(Weak::upgrade).collect();
        if live.len() < 2 {
            return Vec::new();
        }
        live.iter()
            .map(|p| {
                let (swaps, value) = p.point();
                Fence {
                    progress: Arc::downgrade(p),
                    swaps,
                    value,
                }
            })
            .collect()
    }
}

/// A point in one stream's timeline, with the GPU clock there ([`AmdDevice::record_event`]).
pub struct AmdEvent {
    progress: Arc<Progress>,
    /// The signal's GPU address, and the value and epoch that mark the point.
    signal: u64,
    value: u64,
    swaps: u64,
    gpu_id: u32,
    /// Where the engine wrote the GPU clock (8 bytes of host memory).
    stamp: AmdBuffer,
    /// The stream's name, for errors.
    stream: String,
}

impl std::fmt::Debug for AmdEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AmdEvent({} at {})", self.stream, self.value)
    }
}

impl AmdEvent {
    /// Whether the work queued on its stream before it has finished.
    pub fn is_complete(&self) -> bool {
        self.progress.passed(self.swaps, self.value)
    }

    /// The GPU clock when the event was reached, in ticks of [`GPU_TIMESTAMP_HZ`], once it
    /// is complete.
    fn ticks(&self) -> Result<u64> {
        if !self.is_complete() {
            return Err(Error::InvalidArgument(format!(
                "an event of {} has not completed yet; wait for it first",
                self.stream
            )));
        }
        let mut b = [0u8; 8];
        self.stamp.memory().read(0, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// GPU time from `earlier` to this event, both complete and both recorded on one GPU
    /// (any of its streams: they share the clock).
    pub fn elapsed_since(&self, earlier: &AmdEvent) -> Result<Duration> {
        if self.gpu_id != earlier.gpu_id {
            return Err(Error::InvalidArgument(format!(
                "events of {} and {} are on different GPUs, whose clocks are unrelated",
                earlier.stream, self.stream
            )));
        }
        let (start, end) = (earlier.ticks()?, self.ticks()?);
        let ticks = end.checked_sub(start).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the event of {} came after the one of {} (elapsed time runs from the earlier \
                 event to the later)",
                earlier.stream, self.stream
            ))
        })?;
        Ok(Duration::from_nanos(
            ticks.saturating_mul(1_000_000_000 / GPU_TIMESTAMP_HZ),
        ))
    }
}

impl AmdDevice {
    /// Opens another stream on this device's GPU: a compute queue of its own, in order and
    /// independent of the device's queue and of other streams. Buffers and programs of the
    /// device are usable on it. Opening the second stream of a GPU waits for the work queued
    /// on the first (memory that work used may already have been handed out again, which is
    /// safe only within one queue).
    pub fn open_stream(&self) -> Result<Arc<AmdDevice>> {
        let number = self.shared.next_stream.fetch_add(1, Ordering::Relaxed);
        let name = format!("{} stream {number}", self.name);
        let options = DeviceOptions {
            kernargs_bytes: self.kernargs_bytes(),
            ..DeviceOptions::default()
        };
        let stream = Arc::new(AmdDevice::assemble(
            &self.driver,
            self.node.clone(),
            name,
            options,
            Some(self),
        )?);
        {
            let mut children = lock(&self.shared.children);
            children.retain(|c| c.strong_count() > 0);
            children.push(Arc::downgrade(&stream));
        }
        if self.cache.streams.add(&stream.progress) == 2 {
            // Registered first: anything freed from here on carries a fence.
            self.synchronize()?;
        }
        Ok(stream)
    }

    /// Queues an event: a point after everything queued on this stream so far, with the GPU
    /// clock there.
    pub fn record_event(&self) -> Result<AmdEvent> {
        let stamp = self.alloc_host(8)?;
        let (signal, value, swaps) = self.queue_marker(|b| {
            b.timestamp(stamp.gpu_address());
        })?;
        Ok(AmdEvent {
            progress: self.progress.clone(),
            signal,
            value,
            swaps,
            gpu_id: self.node.gpu_id,
            stamp,
            stream: self.name.clone(),
        })
    }

    /// Makes the work queued on this stream from now on wait, on the GPU, for `event` (of any
    /// stream, of any GPU of the same driver). Returns at once.
    pub fn wait_event(&self, event: &AmdEvent) -> Result<()> {
        if !Arc::ptr_eq(&event.progress.driver, &self.driver) {
            // Its signal is in another driver's page, which this GPU has not mapped.
            return Err(Error::InvalidArgument(format!(
                "an event of {} waited for by {}: they belong to different kernel drivers",
                event.stream, self.name
            )));
        }
        if Arc::ptr_eq(&event.progress, &self.progress) || event.is_complete() {
            // A stream's own events are behind everything queued after them already.
            return Ok(());
        }
        // After its epoch the event's signal may be the shadow of its stream's timeline; it
        // still holds a value past the event's until the next swap, 2^31 submissions later.
        self.queue_marker(|b| {
            b.wait(event.signal, event.value);
        })
        .map(|_| ())
    }

    /// Queues the commands `body` adds between a wait for this queue's previous submission
    /// and the signal of the next timeline value; returns the timeline signal's address, that
    /// value and the timeline's epoch.
    fn queue_marker(&self, body: impl FnOnce(&mut Pm4Builder)) -> Result<(u64, u64, u64)> {
        let mut st = lock(&self.state);
        self.check_usable()?;
        self.wrap_timeline_if_due(&mut st)?;
        let value = st.timeline_value;
        let room_wait = self.ring_wait(&st);
        let st = &mut *st;
        let previous = [(st.timeline.value_addr(), value - 1)];
        st.timeline
            .release_after(&mut st.builder, &previous, None, value, body);
        st.queue.submit(&st.builder.words, room_wait)?;
        let marker = (st.timeline.value_addr(), value, st.timeline_swaps);
        st.advance();
        Ok(marker)
    }

    /// Blocks until `event`, which must have been recorded on this stream, is complete; any
    /// fault of the GPU meanwhile is the error.
    pub fn synchronize_event(&self, event: &AmdEvent) -> Result<()> {
        if !Arc::ptr_eq(&event.progress, &self.progress) {
            return Err(Error::InvalidArgument(format!(
                "an event of {} waited for through {}",
                event.stream, self.name
            )));
        }
        let mut st = lock(&self.state);
        if st.timeline_swaps != event.swaps {
            return Ok(());
        }
        self.wait_value_locked(&mut st, event.value)
    }
}
