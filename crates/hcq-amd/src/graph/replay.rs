//! Replaying a built graph: checks of what a replay binds, the wait for the previous replay
//! before anything is rewritten, and the few packets each ring of the graph gets.

use super::*;
use crate::device::{lock, AmdDevice, DeviceState};
use crate::trace_stamps::TraceSlot;
use hcq_core::{Error, Result};
use std::sync::MutexGuard;

/// What the last replay applied, and when it was submitted.
#[derive(Debug)]
pub(super) struct Applied {
    pub(super) inputs: Vec<u64>,
    pub(super) vars: Vec<i32>,
    pub(super) dims: Option<Vec<LaunchDims>>,
    /// Per part, (timeline swaps, timeline value) of the last replay.
    pub(super) last_submission: Vec<Option<(u64, u64)>>,
    /// Number of the last replay, in the kickoff word (graphs with sync memory).
    pub(super) kickoff: u32,
    /// The queue of the last replay (single-GPU graphs replay on any stream of their GPU).
    pub(super) last_queue: Option<std::sync::Arc<Progress>>,
    /// The queue whose scratch ring the dispatches name, and that ring (kept alive while
    /// they name it), when it is not the ring of the queue the graph was built on.
    pub(super) scratch: Option<(std::sync::Arc<Progress>, std::sync::Arc<GpuMemory>)>,
}

impl AmdGraph {
    /// Replays the graph on `devs` (the devices it was built on, in the same order) with
    /// `values`: rewrites what changed since the last replay, then queues the streams with one
    /// indirect buffer per ring. Returns once it is queued. On an error before queueing,
    /// nothing was rewritten and the graph stays usable.
    pub fn replay(&self, devs: &[&AmdDevice], values: &ReplayValues<'_>) -> Result<()> {
        if devs.len() != self.parts.len()
            || devs
                .iter()
                .zip(&self.parts)
                .any(|(d, p)| d.node.gpu_id != p.gpu_id)
        {
            return Err(Error::InvalidArgument(format!(
                "graph replayed on {}, it was built for other devices",
                devs.iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if values.inputs.len() != self.input_patches.len()
            || values.vars.len() != self.var_patches.len()
        {
            return Err(Error::InvalidArgument(format!(
                "graph takes {} inputs and {} variables, got {} and {}",
                self.input_patches.len(),
                self.var_patches.len(),
                values.inputs.len(),
                values.vars.len()
            )));
        }
        let mut applied = lock(&self.applied);
        let dims_changed = match values.dims {
            Some(d) if d.len() != self.dim_patches.len() => {
                return Err(Error::InvalidArgument(format!(
                    "graph has {} launches with symbolic dimensions, got {} sets",
                    self.dim_patches.len(),
                    d.len()
                )))
            }
            Some(d) => applied.dims.as_deref() != Some(d),
            None if applied.dims.is_none() && !self.dim_patches.is_empty() => {
                return Err(Error::InvalidArgument(
                    "the first replay must give the symbolic launch dimensions".into(),
                ))
            }
            None => false,
        };
        if let [dev] = devs {
            self.switch_queue(dev, &mut applied)?;
            let mut st = lock(&dev.state);
            return self.replay_locked(
                devs,
                std::slice::from_mut(&mut st),
                &mut applied,
                values,
                dims_changed,
            );
        }
        // Every device, locked in gpu_id order (as transfers lock them), kept in part order.
        let mut guards: Vec<Option<MutexGuard<'_, DeviceState>>> =
            (0..devs.len()).map(|_| None).collect();
        for &p in &self.lock_order {
            guards[p] = Some(lock(&devs[p].state));
        }
        let mut states: Vec<MutexGuard<'_, DeviceState>> = guards
            .into_iter()
            .map(|g| g.expect("locked above"))
            .collect();
        self.replay_locked(devs, &mut states, &mut applied, values, dims_changed)
    }

    /// Points the dispatches that use scratch memory at `dev`'s scratch ring (grown first to
    /// what the graph's kernels need), unless they name it already. Called once the graph's
    /// last replay has finished, when it was on another queue, so no replay reads the words.
    fn name_scratch_of(&self, dev: &AmdDevice, applied: &mut Applied) -> Result<()> {
        let named = match &applied.scratch {
            Some((queue, _)) => queue,
            None => &self.built_on,
        };
        if std::sync::Arc::ptr_eq(named, &dev.progress) {
            return Ok(());
        }
        dev.ensure_scratch(self.max_wave_scratch)?;
        let (ring, tmpring_size) = {
            let st = lock(&dev.state);
            (st.scratch.clone(), st.tmpring_size)
        };
        let Some(ring) = ring else {
            return Err(Error::Unsupported(format!(
                "{} has no scratch ring for the graph's kernels",
                dev.name
            )));
        };
        self.store_scratch(ring.va, tmpring_size);
        // Back on the queue it was built on too: that queue's ring may have grown since, and
        // the dispatches now name its current one.
        applied.scratch = Some((dev.progress.clone(), ring));
        Ok(())
    }

    /// Before a single-GPU replay on `dev`: a queue other than the one the graph was built on
    /// must be able to run it, and when the queue differs from the last replay's, that replay
    /// must have finished (the caller waits for it: replays of one graph share its memory).
    fn switch_queue(&self, dev: &AmdDevice, applied: &mut Applied) -> Result<()> {
        let copy_engine = self.sync.is_some() || self.parts.iter().any(|p| p.copy.is_some());
        if copy_engine && !std::sync::Arc::ptr_eq(&dev.progress, &self.built_on) {
            return Err(Error::Unsupported(format!(
                "replaying on {} a graph whose copies run on the copy engine: it replays on \
                 the device's own queue",
                dev.name
            )));
        }
        if let Some(last) = &applied.last_queue {
            if !std::sync::Arc::ptr_eq(last, &dev.progress) {
                if let Some((swaps, value)) = applied.last_submission[0] {
                    if !last.passed(swaps, value) {
                        return Err(Error::InvalidArgument(format!(
                            "the graph's last replay, on another queue, has not finished: \
                             synchronize that queue before replaying it on {}",
                            dev.name
                        )));
                    }
                }
                applied.last_submission[0] = None;
            }
        }
        if self.uses_scratch {
            self.name_scratch_of(dev, applied)?;
        }
        applied.last_queue = Some(dev.progress.clone());
        Ok(())
    }

    fn replay_locked(
        &self,
        devs: &[&AmdDevice],
        states: &mut [MutexGuard<'_, DeviceState>],
        applied: &mut Applied,
        values: &ReplayValues<'_>,
        dims_changed: bool,
    ) -> Result<()> {
        for (d, st) in devs.iter().zip(states.iter_mut()) {
            d.wrap_timeline_if_due(st)?;
        }
        let inputs_changed = applied.inputs != values.inputs;
        let vars_changed = applied.vars != values.vars;
        let kickoff_wraps = self.sync.is_some() && applied.kickoff >= KICKOFF_LIMIT;
        if inputs_changed || vars_changed || dims_changed || kickoff_wraps {
            // The GPU reads what is rewritten: wait for the previous replay everywhere (after
            // a timeline swap, everything before it has finished).
            for ((d, st), last) in devs
                .iter()
                .zip(states.iter_mut())
                .zip(&applied.last_submission)
            {
                if let Some((swaps, value)) = *last {
                    if swaps == st.timeline_swaps {
                        d.wait_value_locked(st, value)?;
                    }
                }
            }
            self.patch(applied, values, dims_changed);
            if kickoff_wraps {
                let sync = self.sync.as_ref().expect("checked above");
                sync.write(KICKOFF, &[0; 4])?;
                applied.kickoff = 0;
            }
        }
        match &self.sync {
            None => self.submit_single(devs[0], &mut states[0])?,
            Some(sync) => self.submit_synced(devs, states, sync.va, applied.kickoff + 1)?,
        }
        for (p, st) in states.iter_mut().enumerate() {
            applied.last_submission[p] = Some((st.timeline_swaps, st.timeline_value));
            st.advance();
        }
        if self.sync.is_some() {
            applied.kickoff += 1;
        }
        Ok(())
    }

    /// One stream on one device: wait for the timeline, call the stream, signal the timeline.
    fn submit_single(&self, dev: &AmdDevice, st: &mut DeviceState) -> Result<()> {
        dev.check_usable()?;
        let stamps = dev.trace_begin(st, TRACE_NAME)?;
        let value = st.timeline_value;
        let room_wait = dev.ring_wait(st);
        let previous = [(st.timeline.value_addr(), value - 1)];
        let stamps_at = stamps.map(TraceSlot::addresses);
        st.timeline
            .release_after(&mut st.builder, &previous, stamps_at, value, |b| {
                if let Some(c) = &self.parts[0].compute {
                    b.indirect_buffer(c.stream.va, c.first_segment_dwords);
                }
            });
        st.queue.submit(&st.builder.words, room_wait)?;
        AmdDevice::trace_commit_with(st, stamps, TRACE_NAME, || self.trace_args(), "compute");
        Ok(())
    }

    /// Several streams: the lead resets the progress words and kicks off replay `kickoff`;
    /// every other ring waits for it; every compute ring joins the other streams' ends before
    /// signalling its timeline. Room is made on every ring before anything is written, so a
    /// ring that is full fails the replay before any ring has part of it.
    fn submit_synced(
        &self,
        devs: &[&AmdDevice],
        states: &mut [MutexGuard<'_, DeviceState>],
        sync_va: u64,
        kickoff: u32,
    ) -> Result<()> {
        for d in devs {
            d.check_usable()?;
        }
        let stamps = devs[0].trace_begin(&mut states[0], TRACE_NAME)?;
        let prior: Vec<(u64, u64)> = states
            .iter()
            .map(|st| (st.timeline.value_addr(), st.timeline_value - 1))
            .collect();
        for (p, (part, st)) in self.parts.iter().zip(states.iter_mut()).enumerate() {
            let st = &mut **st;
            let b = &mut st.builder;
            b.clear();
            if p == 0 {
                for &(addr, value) in &prior {
                    b.wait(addr, value);
                }
                for (s, &end) in self.stream_ends.iter().enumerate() {
                    if end > 0 {
                        b.signal(sync_va + progress(s), 0, 0, 0);
                    }
                }
                b.signal(sync_va + KICKOFF, kickoff.into(), 0, 0);
                if let Some(slot) = stamps {
                    b.timestamp(slot.start);
                }
            } else {
                b.wait(sync_va + KICKOFF, kickoff.into());
            }
            if let Some(c) = &part.compute {
                b.indirect_buffer(c.stream.va, c.first_segment_dwords);
            }
            // Its own compute stream is behind the timeline signal's end-of-pipe wait.
            for (s, &end) in self.stream_ends.iter().enumerate() {
                if end > 0 && s != stream_of(p, false) {
                    b.wait(sync_va + progress(s), end.into());
                }
            }
            if let (0, Some(slot)) = (p, stamps) {
                b.timestamp(slot.end);
            }
            st.timeline.release_with(b, st.timeline_value);
            let s = &mut st.sdma_builder;
            s.clear();
            if let Some(c) = &part.copy {
                s.wait(sync_va + KICKOFF, kickoff.into());
                s.indirect(c.stream.va, c.dwords as u32);
            }
        }
        for (d, st) in devs.iter().zip(states.iter()) {
            st.queue
                .make_room(st.builder.words.len(), d.ring_wait(st))?;
            if let Some(sdma) = &st.sdma {
                sdma.make_room_sdma(&st.sdma_builder, d.ring_wait(st))?;
            }
        }
        for (d, st) in devs.iter().zip(states.iter_mut()) {
            let st = &mut **st;
            // Only a device with a copy engine has a copy stream (see `Ordering::new`).
            if let (Some(sdma), false) = (&mut st.sdma, st.sdma_builder.words.is_empty()) {
                sdma.submit_sdma(&st.sdma_builder, d.timeout)?;
            }
            st.queue.submit(&st.builder.words, d.timeout)?;
        }
        let args = || self.trace_args();
        AmdDevice::trace_commit_with(&mut states[0], stamps, TRACE_NAME, args, "compute");
        Ok(())
    }
}
