//! The command buffers a device has committed and not yet seen finish, in commit order.
//!
//! tinygrad keeps them in a list and asks `cbuf in list` before waiting on a graph's previous
//! replay, an O(n) scan per replay (tinygrad #16595). Here every committed buffer gets a
//! sequence number; everything below the front's number has been retired, so "is `seq` still
//! in flight" is one comparison, and retiring pops from the front: O(1) amortised per buffer.

use crate::api::MetalApi;
use std::collections::VecDeque;

/// Identifies one committed command buffer of a device.
pub type Seq = u64;

/// Committed command buffers, oldest first, each with what the kernel log says of it once it
/// has run (only while `hcq::kernel` debug logging is on; see [`InFlight::push_labeled`]).
pub struct InFlight<C> {
    queue: VecDeque<(Seq, C, Option<Box<str>>)>,
    next: Seq,
}

impl<C> Default for InFlight<C> {
    fn default() -> Self {
        InFlight {
            queue: VecDeque::new(),
            next: 0,
        }
    }
}

impl<C> InFlight<C> {
    /// An empty queue whose first pushed command buffer gets sequence number 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a committed command buffer and returns its sequence number.
    pub fn push(&mut self, cb: C) -> Seq {
        self.push_labeled(cb, None)
    }

    /// [`InFlight::push`] of a command buffer that, once retired, logs `label` with its GPU
    /// time (target `hcq::kernel`, as the AMD backend logs each kernel).
    pub fn push_labeled(&mut self, cb: C, label: Option<Box<str>>) -> Seq {
        let seq = self.next;
        self.next += 1;
        self.queue.push_back((seq, cb, label));
        seq
    }

    /// Whether `seq` was pushed and not yet retired.
    pub fn contains(&self, seq: Seq) -> bool {
        match self.queue.front() {
            Some(&(front, _, _)) => seq >= front && seq < self.next,
            None => false,
        }
    }

    /// The oldest command buffer still tracked.
    pub fn front(&self) -> Option<(Seq, &C)> {
        self.queue.front().map(|(s, c, _)| (*s, c))
    }

    /// Stops tracking the oldest command buffer (which has finished), logging its label.
    pub fn pop_front<A: MetalApi<CommandBuffer = C>>(&mut self, api: &A) -> Option<C> {
        let (_, cb, label) = self.queue.pop_front()?;
        log_finished(api, &cb, label.as_deref());
        Some(cb)
    }

    /// Command buffers tracked: pushed and not yet retired or popped.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no command buffer is tracked (every pushed one has been retired or popped).
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Retires command buffers from the front that the GPU has finished, without blocking.
    /// Returns the errors of the failed ones, in commit order.
    pub fn retire_finished<A: MetalApi<CommandBuffer = C>>(&mut self, api: &A) -> Vec<String> {
        let mut errors = Vec::new();
        while let Some((_, cb, _)) = self.queue.front() {
            if !api.status(cb).is_finished() {
                break;
            }
            if let Some(e) = failure(api, cb) {
                errors.push(e);
            }
            self.pop_front(api);
        }
        errors
    }

    /// Waits for every command buffer up to and including `seq` (all of them with `None`) and
    /// retires them. Returns the errors of the failed ones, in commit order.
    pub fn wait_through<A: MetalApi<CommandBuffer = C>>(
        &mut self,
        api: &A,
        seq: Option<Seq>,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        while let Some((s, cb, _)) = self.queue.front() {
            if seq.is_some_and(|last| *s > last) {
                break;
            }
            if !api.status(cb).is_finished() {
                api.wait_until_completed(cb);
            }
            if let Some(e) = failure(api, cb) {
                errors.push(e);
            }
            self.pop_front(api);
        }
        errors
    }
}

/// Logs a finished command buffer's `label` with its GPU time.
fn log_finished<A: MetalApi>(api: &A, cb: &A::CommandBuffer, label: Option<&str>) {
    let Some(label) = label else { return };
    let (start, end) = (api.gpu_start_time(cb), api.gpu_end_time(cb));
    if failure(api, cb).is_some() {
        tracing::debug!(target: "hcq::kernel", "{label}: failed");
    } else if end > start && start >= 0.0 {
        tracing::debug!(target: "hcq::kernel", "{label}: {:.2} us", (end - start) * 1e6);
    } else {
        tracing::debug!(target: "hcq::kernel", "{label}: done (Metal gave no GPU time)");
    }
}

/// The error of a finished command buffer, if it failed.
pub(crate) fn failure<A: MetalApi>(api: &A, cb: &A::CommandBuffer) -> Option<String> {
    match (api.status(cb), api.error(cb)) {
        (_, Some(e)) => Some(e),
        (crate::api::CommandStatus::Error, None) => Some("command buffer failed".to_string()),
        _ => None,
    }
}
