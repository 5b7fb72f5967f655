//! Hazard analysis of a graph: which items conflict (read-after-write, write-after-read,
//! write-after-write on overlapping memory), where each item runs, and the waits and
//! signals that order the streams, emitted around each item on either engine.

use super::{progress, stream_of, GraphItem, Region, Work};
use crate::device::AmdDevice;
use hcq_amd_sys::commands::CommandBuilder;
use hcq_core::{Error, Result};

impl Region {
    fn overlaps(&self, o: &Region) -> bool {
        match (*self, *o) {
            (Region::Fixed { start, end }, Region::Fixed { start: s, end: e }) => {
                start < e && s < end
            }
            (Region::Input(a), Region::Input(b)) => a == b,
            _ => false,
        }
    }
}

impl GraphItem<'_> {
    /// Whether the two items must run in recorded order (read-after-write, write-after-read
    /// or write-after-write on overlapping memory).
    fn conflicts(&self, o: &GraphItem<'_>) -> bool {
        let any = |a: &[Region], b: &[Region]| a.iter().any(|x| b.iter().any(|y| x.overlaps(y)));
        any(&self.writes, &o.writes) || any(&self.writes, &o.reads) || any(&self.reads, &o.writes)
    }
}

/// Where an item runs: its stream, and its 1-based position in that stream (the value the
/// stream's progress word holds once the item is done).
#[derive(Debug, Clone, Copy)]
pub(super) struct Placement {
    pub(super) stream: usize,
    pub(super) position: u32,
}

/// What the streams of a graph are ordered by, decided at build.
pub(super) struct Ordering {
    pub(super) placement: Vec<Placement>,
    /// Items of each stream, in order.
    pub(super) stream_items: Vec<Vec<usize>>,
    /// Per item, the (stream, position) it waits for first.
    pub(super) waits: Vec<Vec<(usize, u32)>>,
    /// Per item, whether it signals its position when done.
    pub(super) signals: Vec<bool>,
}

impl Ordering {
    /// Places every item on its stream and turns the conflicts between streams into waits
    /// for the latest conflicting item of the other stream (streams run in order, so that
    /// covers the earlier ones); a wait already implied by an earlier one of the same stream
    /// is left out. When the graph is synced (more than one stream or GPU, the second value),
    /// the last item of every stream signals too: rings join the streams' ends.
    pub(super) fn new(devs: &[&AmdDevice], items: &[GraphItem<'_>]) -> Result<(Ordering, bool)> {
        let part_of = |gpu_id: u32, what: &dyn Fn() -> String| {
            devs.iter()
                .position(|d| d.node.gpu_id == gpu_id)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{} runs on a GPU that is not one of the graph's devices",
                        what()
                    ))
                })
        };
        // A GPU without a copy engine runs its copies on its compute stream (CP DMA).
        let copy_engine: Vec<bool> = devs
            .iter()
            .map(|d| d.copy_engine_missing().is_none())
            .collect();
        let mut placement = Vec::with_capacity(items.len());
        let mut stream_items: Vec<Vec<usize>> = vec![Vec::new(); 2 * devs.len()];
        for (i, it) in items.iter().enumerate() {
            let (part, copy) = match &it.work {
                Work::Launch(l) => (
                    part_of(l.program.device_gpu_id, &|| {
                        format!("item {i} ({})", l.program.name)
                    })?,
                    false,
                ),
                Work::Copy(c) => (part_of(c.engine, &|| format!("item {i} (a copy)"))?, true),
            };
            let stream = stream_of(part, copy && copy_engine[part]);
            stream_items[stream].push(i);
            placement.push(Placement {
                stream,
                position: stream_items[stream].len() as u32,
            });
        }
        // A compute ring alone orders its work by the timeline; anything else needs the sync
        // memory.
        let synced = devs.len() > 1
            || stream_items
                .iter()
                .skip(1)
                .step_by(2)
                .any(|s| !s.is_empty());
        let streams = stream_items.len();
        let mut waits = vec![Vec::new(); items.len()];
        let mut signals = vec![false; items.len()];
        let mut waited = vec![0u32; streams * streams];
        for (i, it) in items.iter().enumerate() {
            let s = placement[i].stream;
            for (t, others) in stream_items.iter().enumerate() {
                if t == s || others.is_empty() {
                    continue;
                }
                let before = others.partition_point(|&j| j < i);
                let Some(&j) = others[..before]
                    .iter()
                    .rev()
                    .find(|&&j| it.conflicts(&items[j]))
                else {
                    continue;
                };
                let value = placement[j].position;
                if value > waited[s * streams + t] {
                    waited[s * streams + t] = value;
                    waits[i].push((t, value));
                    signals[j] = true;
                }
            }
        }
        if synced {
            for s in &stream_items {
                if let Some(&last) = s.last() {
                    signals[last] = true;
                }
            }
        }
        Ok((
            Ordering {
                placement,
                stream_items,
                waits,
                signals,
            },
            synced,
        ))
    }

    /// Item `item`'s commands on its stream, on either engine: waits for the items of other
    /// streams it conflicts with, `body`, then, when something waits for it, the signal of its
    /// position in its stream's progress word (in the sync memory at `sync_va`).
    pub(super) fn item_commands<B: CommandBuilder, R>(
        &self,
        b: &mut B,
        item: usize,
        sync_va: u64,
        body: impl FnOnce(&mut B) -> R,
    ) -> R {
        for &(t, value) in &self.waits[item] {
            b.wait(sync_va + progress(t), value.into());
        }
        let result = body(b);
        if self.signals[item] {
            let Placement { stream, position } = self.placement[item];
            b.signal(sync_va + progress(stream), position.into(), 0, 0);
        }
        result
    }
}
