//! GPU timestamps of traced commands: the slots each command's engine stamps before and after
//! it, and the clock pair that turns GPU ticks into host time for the trace and the log.

use crate::device::{lock, AmdDevice, DeviceState};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::GPU_TIMESTAMP_HZ;
use hcq_core::Result;

/// Pairs of timestamp slots per device for traced commands.
const TRACE_SLOTS: u64 = 4096;

/// A traced command whose timestamps the engine has yet to write.
pub(crate) struct PendingSpan {
    name: String,
    /// What the command did (launch dimensions, bytes), for the trace and the log.
    args: Vec<(&'static str, String)>,
    flow: u64,
    queue: &'static str,
    /// Its place in the sequence of reserved slots (the slot is `seq % TRACE_SLOTS`).
    seq: u64,
    /// The timeline value it signals: once the timeline reaches it, both stamps are written.
    value: u64,
}

impl PendingSpan {
    /// Its arguments as the log prints them: ` grid 2x1x1 block 64x1x1 lds 0`.
    fn detail(&self) -> String {
        self.args.iter().map(|(k, v)| format!(" {k} {v}")).collect()
    }
}

/// The timestamp slots reserved for one command: committed once it is submitted, so a command
/// that fails before reaching the GPU leaves no span behind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceSlot {
    seq: u64,
    /// The flow from the host's submission to the command's span.
    flow: u64,
    /// GPU addresses of the start and end stamps.
    pub start: u64,
    pub end: u64,
}

impl TraceSlot {
    /// GPU addresses of the start and end stamps, as a command builder stamps them.
    pub(crate) fn addresses(self) -> (u64, u64) {
        (self.start, self.end)
    }
}

/// GPU timestamps of traced commands, and the clock pair to convert them to host time.
pub(crate) struct TraceStamps {
    stamps: GpuMemory,
    next: u64,
    pending: Vec<PendingSpan>,
    gpu0: u64,
    host0_us: f64,
}

impl TraceStamps {
    /// Reserves the stamps of a new traced command, or `None` when the next slot still holds
    /// a pending command's stamps (the caller synchronises first).
    pub(crate) fn begin(&mut self) -> Option<TraceSlot> {
        if let Some(oldest) = self.pending.first() {
            if self.next - oldest.seq >= TRACE_SLOTS {
                return None;
            }
        }
        let seq = self.next;
        // Zero stamps say "not written yet" (a GPU clock is never 0 once it has run a command)
        // to a trace settled while this command is still queued or running. The write is in
        // range by construction; were it to fail, the command goes untraced.
        self.stamps
            .write((seq % TRACE_SLOTS) * 16, &[0u8; 16])
            .ok()?;
        self.next += 1;
        let at = self.stamps.va + (seq % TRACE_SLOTS) * 16;
        Some(TraceSlot {
            seq,
            flow: 0,
            start: at,
            end: at + 8,
        })
    }

    /// Records the submitted command of `slot`, which signals timeline value `value`; its span
    /// is written once it has finished.
    pub(crate) fn commit(
        &mut self,
        slot: TraceSlot,
        name: &str,
        args: Vec<(&'static str, String)>,
        queue: &'static str,
        value: u64,
    ) {
        self.pending.push(PendingSpan {
            name: name.to_string(),
            args,
            flow: slot.flow,
            queue,
            seq: slot.seq,
            value,
        });
    }

    /// The start and end stamps of `p` (0 where not written yet).
    fn stamps_of(&self, p: &PendingSpan) -> (u64, u64) {
        let mut b = [0u8; 16];
        // The slot index is taken modulo the slots the buffer holds, so the read cannot fall
        // outside it; were it ever to, the stamps read as unwritten rather than made up.
        if self
            .stamps
            .read((p.seq % TRACE_SLOTS) * 16, &mut b)
            .is_err()
        {
            return (0, 0);
        }
        let start = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let end = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
        (start, end)
    }

    fn to_host_us(&self, gpu_ticks: u64) -> f64 {
        self.host0_us + (gpu_ticks as f64 - self.gpu0 as f64) * 1e6 / GPU_TIMESTAMP_HZ as f64
    }

    /// Turns every pending command the timeline has passed (`reached`) into a trace event.
    pub(crate) fn resolve(&mut self, device: &str, reached: u64) {
        let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.value <= reached);
        self.pending = running;
        for p in done {
            let (start, end) = self.stamps_of(&p);
            if start == 0 {
                continue;
            }
            crate::trace::span(crate::trace::SpanRecord {
                device,
                queue: p.queue,
                name: &p.name,
                start_us: self.to_host_us(start),
                end_us: self.to_host_us(end.max(start)),
                finished: true,
                flow: p.flow,
                args: &p.args,
            });
            let us = end.saturating_sub(start) as f64 * 1e6 / GPU_TIMESTAMP_HZ as f64;
            tracing::debug!(
                target: "hcq::kernel",
                "{device} {:<7} {}{}: {us:.2} us",
                p.queue,
                p.name,
                p.detail()
            );
        }
    }

    /// Resolves what has finished, and gives every command that started but has not finished
    /// (a kernel that hung) a span ending `now_us`, marked unfinished; forgets the rest.
    pub(crate) fn settle(&mut self, device: &str, reached: u64, now_us: f64) {
        self.resolve(device, reached);
        for p in std::mem::take(&mut self.pending) {
            let (start, _) = self.stamps_of(&p);
            if start != 0 {
                let start_us = self.to_host_us(start);
                crate::trace::span(crate::trace::SpanRecord {
                    device,
                    queue: p.queue,
                    name: &p.name,
                    start_us,
                    end_us: now_us.max(start_us),
                    finished: false,
                    flow: p.flow,
                    args: &p.args,
                });
                tracing::debug!(
                    target: "hcq::kernel",
                    "{device} {:<7} {}{}: started, never finished",
                    p.queue,
                    p.name,
                    p.detail()
                );
            }
        }
    }
}

impl AmdDevice {
    /// Timestamp slots for one traced command, when tracing is on; the caller commits them
    /// ([`AmdDevice::trace_commit_with`]) once the command is submitted.
    pub(crate) fn trace_begin(
        &self,
        st: &mut DeviceState,
        name: &str,
    ) -> Result<Option<TraceSlot>> {
        // The GPU stamps each command when a trace records it or the log prints its time.
        if !crate::trace::enabled()
            && !tracing::enabled!(target: "hcq::kernel", tracing::Level::DEBUG)
        {
            return Ok(None);
        }
        let flow = crate::trace::submit(&self.name, name);
        if st.trace.is_none() {
            let clocks = self.driver.kfd.clock_counters(self.node.gpu_id)?;
            let stamps = self.alloc_mem(
                TRACE_SLOTS * 16,
                MemoryKind::Gtt,
                AllocFlags {
                    uncached: true,
                    public: false,
                },
            )?;
            st.trace = Some(TraceStamps {
                stamps,
                next: 0,
                pending: Vec::new(),
                gpu0: clocks.gpu_clock_counter,
                host0_us: clocks.cpu_clock_counter as f64 / 1e3,
            });
        }
        let with_flow = |slot: TraceSlot| TraceSlot { flow, ..slot };
        if let Some(slot) = st.trace.as_mut().and_then(TraceStamps::begin) {
            return Ok(Some(with_flow(slot)));
        }
        self.wait_locked(st)?;
        Ok(st
            .trace
            .as_mut()
            .and_then(TraceStamps::begin)
            .map(with_flow))
    }

    /// Records the command submitted with `slot` (from [`AmdDevice::trace_begin`]), with what
    /// it did (`args`, made only when it is traced or logged): its launch dimensions, its
    /// bytes, a graph's kernels.
    pub(crate) fn trace_commit_with(
        st: &mut DeviceState,
        slot: Option<TraceSlot>,
        name: &str,
        args: impl FnOnce() -> Vec<(&'static str, String)>,
        queue: &'static str,
    ) {
        let value = st.timeline_value;
        if let (Some(slot), Some(t)) = (slot, st.trace.as_mut()) {
            t.commit(slot, name, args(), queue, value);
        }
    }

    /// Moves the traced commands that have finished into the trace and writes it, so that a
    /// failed wait leaves what ran before it in the file. A write error stays with the trace,
    /// which reports it when it ends.
    pub(crate) fn trace_progress(&self, st: &mut DeviceState) {
        let reached = st.timeline.value();
        if let Some(t) = st.trace.as_mut() {
            t.resolve(&self.name, reached);
            let _ = crate::trace::flush();
        }
    }

    /// Puts this device's traced commands into the trace, the ones still running as
    /// unfinished spans, and writes it; called when the trace ends or the device goes away.
    pub fn settle_trace(&self) -> Result<()> {
        let mut st = lock(&self.state);
        let reached = st.timeline.value();
        if let Some(t) = st.trace.as_mut() {
            t.settle(&self.name, reached, crate::trace::host_now_us());
        }
        crate::trace::flush()
    }
}
