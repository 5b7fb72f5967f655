//! Graphs on AMD GPUs: a captured list of kernel launches and copies, on one GPU or several,
//! turned into command streams built once in GPU memory and replayed with one
//! `INDIRECT_BUFFER` packet per compute ring (and one SDMA `INDIRECT` per copy ring with
//! copies).
//!
//! # Streams
//!
//! Each GPU of the graph has up to two streams: its compute stream (the PM4 of its launches)
//! and its copy stream (the SDMA packets of the copies its engine runs). A GPU without a copy
//! engine ([`AmdDevice::copy_engine_missing`]) runs its copies in its compute stream instead,
//! as CP DMA (`DMA_DATA`) between its launches, each ordered after the one before it. Items
//! keep their recorded order within a stream. Each item declares what it reads and writes ([`Region`]);
//! an item that conflicts with an earlier item of another stream (read-after-write,
//! write-after-read, write-after-write) first waits until that stream's private progress
//! signal reaches the earlier item's position, which the earlier item signals after it
//! (`RELEASE_MEM` or `FENCE`). Independent items do not wait for each other.
//!
//! # What is built once
//!
//! - **Kernel arguments**: every launch gets its own argument segment (and AQL dispatch packet
//!   when the kernel reads one) in memory the graph owns on the launch's GPU, written at build
//!   time with [`AmdProgram::write_kernargs`], which validates the arguments against the
//!   kernel's metadata. Replays never allocate arguments.
//! - **The command streams** in uncached GTT. Compute streams longer than one indirect buffer
//!   can name (or than [`GraphOptions::segment_dwords`]) are split into segments joined by
//!   chained `INDIRECT_BUFFER` packets.
//! - **Patch lists**: per graph input, the CPU addresses of the words holding its address
//!   (argument words and copy-packet address words); per variable, the argument words holding
//!   its value; per launch whose dimensions change between replays, its `DISPATCH_DIRECT` and
//!   workgroup-size words, its hidden block-count and group-size arguments and its AQL packet.
//! - **Sync memory** (graphs with more than one stream): a kickoff word and one progress word
//!   per stream, in GTT mapped on every GPU of the graph.
//!
//! # What a replay does
//!
//! It compares the given input addresses and variable values with the ones last applied and
//! rewrites only the words of those that changed. Before rewriting anything it waits for the
//! graph's previous replay to finish, since the GPU reads those words; a replay that changes
//! nothing does not wait, and neither does a replay of a graph with copies or several GPUs.
//! It then writes a few packets to each ring of the graph, with every device of the graph
//! locked (in `gpu_id` order, as transfers lock them):
//!
//! - A single-stream graph: a wait for the device timeline's previous value, the
//!   `INDIRECT_BUFFER`, a signal of the timeline's next value.
//! - Otherwise the first GPU's compute ring (the lead) waits for the previous timeline value
//!   of every device of the graph, so the graph runs after all work queued before it on any
//!   of them; it zeroes the progress words and writes the replay's number into the kickoff
//!   word. Every other ring waits for that number before its indirect buffer, so no stream
//!   starts before the reset. Every compute ring then waits for the end of every other stream
//!   of the graph and signals its device's timeline: work queued afterwards on any of the
//!   devices runs after the whole graph, and `synchronize` on any of them waits for it.
//!
//! Host cost: independent of the number of launches. Because the lead waits for every
//! device's timeline, which each device signals only after the whole previous replay, the
//! progress words are never reset under a running replay: replays pipeline.
//!
//! With `HCQ_TRACE`, each replay is one "graph replay" span on the lead's compute track.
//!
//! The owner must not drop an [`AmdGraph`] while a replay may still run (hcq's `Graph`
//! synchronises its devices first).

use crate::device::{
    aql_dispatch_packet, dispatch_setup, lds_bytes, lock, validate_dims, AmdDevice, DeviceState,
};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::program::{AmdProgram, ArgKind};
use crate::stream::Progress;
use hcq_amd_sys::kd::KernelDescriptor;
use hcq_amd_sys::pm4::{
    DispatchPatch, DmaData, Header, IndirectBuffer, Packet as Packet4, Pm4Builder, IB_MAX_DWORDS,
};
use hcq_amd_sys::sdma::{split, Packet, SdmaBuilder};
use hcq_amd_sys::shared;
use hcq_core::{Arg, Error, Result};
use std::sync::{Arc, Mutex, MutexGuard};

/// A kernel argument of a graph launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GraphArg {
    /// The same for every replay: a buffer address (`Arg::Buffer`) or a scalar.
    Fixed(Arg<u64>),
    /// The device address of graph input `n`, rewritten when a replay binds another buffer.
    Input(usize),
    /// Symbolic variable `n`, passed as an `int32`, rewritten when its value changes.
    Var(usize),
}

/// One launch to capture.
#[derive(Debug, Clone)]
pub struct GraphLaunch<'a> {
    /// The kernel to launch.
    pub program: &'a AmdProgram,
    /// Its arguments in signature order: fixed values, inputs and variables.
    pub args: Vec<GraphArg>,
    /// Workgroups per axis (the dimensions until the first replay that gives others).
    pub global: [u32; 3],
    /// Work-items per workgroup.
    pub local: [u32; 3],
    /// Whether replays give this launch's dimensions (in [`ReplayValues::dims`]).
    pub symbolic_dims: bool,
    /// Bytes of LDS per workgroup beyond what the kernel declares (`extern __shared__`).
    pub dynamic_lds: u32,
}

/// One end of a graph copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyEnd {
    /// The same device address for every replay.
    Fixed(u64),
    /// The address of graph input `n`, rewritten when a replay binds another buffer.
    Input(usize),
}

/// A copy of `size` bytes run by the SDMA engine of GPU `engine` (a `gpu_id` of the graph's
/// devices). Both ends must be mapped on that GPU: its own memory, or another GPU's memory the
/// owner mapped there ([`GpuMemory::map_to`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphCopy {
    /// Where the bytes go.
    pub dst: CopyEnd,
    /// Where they come from (the ends must not overlap).
    pub src: CopyEnd,
    /// Bytes to copy.
    pub size: u64,
    /// The `gpu_id` of the GPU whose copy engine runs it.
    pub engine: u32,
}

/// Memory an item reads or writes, for ordering the graph's streams. Addresses are unique
/// across the GPUs of one process (every allocation reserves its range in the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// Bytes `start..end` of device memory, the same for every replay.
    Fixed {
        /// First byte's device address.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
    /// Graph input `n` (the owner guarantees that inputs never alias each other or a fixed
    /// region).
    Input(usize),
}

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

/// What a graph item does.
#[derive(Debug, Clone)]
pub enum Work<'a> {
    /// A kernel launch.
    Launch(GraphLaunch<'a>),
    /// A copy by a copy engine.
    Copy(GraphCopy),
}

/// One item to capture, with the memory it reads and writes (a region in both sets may be
/// listed under `writes` only).
#[derive(Debug, Clone)]
pub struct GraphItem<'a> {
    /// The launch or copy.
    pub work: Work<'a>,
    /// Memory it reads: it waits for earlier items that write there.
    pub reads: Vec<Region>,
    /// Memory it writes: it waits for earlier items that read or write there.
    pub writes: Vec<Region>,
}

impl GraphItem<'_> {
    /// Whether the two items must run in recorded order (read-after-write, write-after-read
    /// or write-after-write on overlapping memory).
    fn conflicts(&self, o: &GraphItem<'_>) -> bool {
        let any = |a: &[Region], b: &[Region]| a.iter().any(|x| b.iter().any(|y| x.overlaps(y)));
        any(&self.writes, &o.writes) || any(&self.writes, &o.reads) || any(&self.reads, &o.writes)
    }
}

/// Byte offset in the sync memory of the kickoff word (the number of the replay under way).
const KICKOFF: u64 = 0;

/// Byte offset in the sync memory of stream `s`'s progress word.
fn progress(s: usize) -> u64 {
    8 * (1 + s as u64)
}

/// Stream `s` is the compute stream (even) or copy stream (odd) of part `s / 2`.
fn stream_of(part: usize, copy: bool) -> usize {
    2 * part + copy as usize
}

/// What a replay is called in the Chrome trace (one span on the lead's compute track, from
/// the start of its streams to the end of the last of them).
const TRACE_NAME: &str = "graph replay";

/// The kickoff number restarts from 1 before it passes this (waits compare 32 bits).
const KICKOFF_LIMIT: u32 = 1 << 31;

const UNCACHED_GTT: AllocFlags = AllocFlags {
    uncached: true,
    public: false,
};

/// The compute stream of one GPU of the graph.
struct ComputeStream {
    /// Owns the argument segments the patch lists point into.
    _kernargs: GpuMemory,
    /// The scratch ring the dispatches were built against, kept while the graph lives even
    /// if the device has since moved to a larger one.
    _scratch: Option<Arc<GpuMemory>>,
    stream: GpuMemory,
    dwords: usize,
    /// Dwords of the first segment (what the ring's `INDIRECT_BUFFER` names).
    first_segment_dwords: u32,
    segments: usize,
}

/// The copy stream of one GPU of the graph.
struct CopyStream {
    stream: GpuMemory,
    dwords: usize,
}

/// What the graph runs on one of its GPUs.
struct Part {
    gpu_id: u32,
    compute: Option<ComputeStream>,
    copy: Option<CopyStream>,
}

/// A 64-bit address word the host rewrites when an input changes: its CPU address, and the
/// byte offset added to the input's address (copies split into several packets).
#[derive(Debug, Clone, Copy)]
struct AddressPatch {
    at: usize,
    offset: u64,
}

/// Build settings; [`Default`] is what hcq uses.
#[derive(Debug, Clone)]
pub struct GraphOptions {
    /// Longest indirect-buffer segment in dwords, the chaining packet included (tests set it
    /// low to exercise chained indirect buffers).
    pub segment_dwords: u32,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            segment_dwords: IB_MAX_DWORDS,
        }
    }
}

/// Launch dimensions: (workgroups per axis, work-items per workgroup).
pub type LaunchDims = ([u32; 3], [u32; 3]);

/// What one replay binds.
#[derive(Debug, Clone, Copy)]
pub struct ReplayValues<'a> {
    /// Device address of each graph input, in input order.
    pub inputs: &'a [u64],
    /// Value of each variable, in variable order.
    pub vars: &'a [i32],
    /// Dimensions of each launch with `symbolic_dims`, in launch order, already validated;
    /// `None` keeps the last ones (allowed once a replay gave them).
    pub dims: Option<&'a [LaunchDims]>,
}

/// A hidden argument that depends on the launch dimensions.
#[derive(Debug, Clone, Copy)]
enum HiddenDim {
    BlockCount(usize),
    GroupSize(usize),
    GridDims,
}

/// Everything a replay rewrites for one launch whose dimensions change.
#[derive(Debug, Clone)]
struct DimPatch {
    /// The part whose compute stream holds the dispatch.
    part: usize,
    dispatch: DispatchPatch,
    /// (CPU address in the part's kernarg memory, size in bytes, what it holds).
    hidden: Vec<(usize, usize, HiddenDim)>,
    /// CPU address of the AQL dispatch packet, and GPU address of the argument segment it
    /// points to.
    aql: Option<(usize, u64)>,
    descriptor: KernelDescriptor,
    /// LDS bytes per workgroup, dynamic ones included.
    lds: u32,
}

/// What the last replay applied, and when it was submitted.
#[derive(Debug)]
struct Applied {
    inputs: Vec<u64>,
    vars: Vec<i32>,
    dims: Option<Vec<LaunchDims>>,
    /// Per part, (timeline swaps, timeline value) of the last replay.
    last_submission: Vec<Option<(u64, u64)>>,
    /// Number of the last replay, in the kickoff word (graphs with sync memory).
    kickoff: u32,
    /// The queue of the last replay (single-GPU graphs replay on any stream of their GPU).
    last_queue: Option<std::sync::Arc<Progress>>,
}

/// A captured list of launches and copies on one or more AMD GPUs of one driver, replayable
/// with one submission per ring.
pub struct AmdGraph {
    /// In the order of the devices given to [`AmdGraph::build`]; the first is the lead.
    parts: Vec<Part>,
    /// Part indices in `gpu_id` order (the order devices are locked in).
    lock_order: Vec<usize>,
    /// Kickoff and progress words, when the graph has more than one stream.
    sync: Option<GpuMemory>,
    /// Per stream, the progress its last item signals (0: the stream is empty).
    stream_ends: Vec<u32>,
    input_patches: Vec<Vec<AddressPatch>>,
    /// Per variable, the CPU addresses of the 4-byte argument words holding its value.
    var_patches: Vec<Vec<usize>>,
    dim_patches: Vec<DimPatch>,
    applied: Mutex<Applied>,
    /// The queue the graph was built on (its timeline's progress): a single-GPU graph also
    /// replays on another stream of the GPU when nothing ties it to this queue's memory.
    built_on: std::sync::Arc<Progress>,
    /// Whether a kernel of the graph uses scratch memory: the dispatches name the ring of the
    /// queue the graph was built on, which another queue may use at the same time.
    uses_scratch: bool,
}

impl std::fmt::Debug for AmdGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AmdGraph({} GPU(s), {} dwords in {} segment(s), {} inputs, {} vars)",
            self.parts.len(),
            self.stream_dwords(),
            self.segment_count(),
            self.input_patches.len(),
            self.var_patches.len()
        )
    }
}

/// Byte offsets of the explicit arguments of `prg` in its argument segment, the packing
/// `write_kernargs` uses (metadata offsets, else natural alignment in order).
fn explicit_arg_offsets(prg: &AmdProgram, args: &[GraphArg]) -> Vec<u64> {
    if prg.args.is_empty() {
        let mut off = 0u64;
        return args
            .iter()
            .map(|a| {
                let size = match a {
                    GraphArg::Fixed(f) => f.size() as u64,
                    GraphArg::Input(_) => 8,
                    GraphArg::Var(_) => 4,
                };
                off = off.next_multiple_of(size);
                let at = off;
                off += size;
                at
            })
            .collect();
    }
    prg.args
        .iter()
        .filter(|a| a.is_explicit())
        .map(|a| a.offset as u64)
        .collect()
}

/// The hidden arguments of `prg` that depend on the launch dimensions, for a segment whose
/// CPU address is `segment`.
fn hidden_dims(prg: &AmdProgram, segment: usize) -> Vec<(usize, usize, HiddenDim)> {
    let axis = |k: &str| match k.as_bytes().last() {
        Some(b'x') => 0,
        Some(b'y') => 1,
        _ => 2,
    };
    prg.args
        .iter()
        .filter_map(|a| {
            let ArgKind::Hidden(kind) = &a.kind else {
                return None;
            };
            let what = match kind.as_str() {
                k if k.starts_with("block_count_") => HiddenDim::BlockCount(axis(k)),
                k if k.starts_with("group_size_") => HiddenDim::GroupSize(axis(k)),
                "grid_dims" => HiddenDim::GridDims,
                _ => return None,
            };
            Some((segment + a.offset as usize, (a.size as usize).min(8), what))
        })
        .collect()
}

/// Where an item runs: its stream, and its 1-based position in that stream (the value the
/// stream's progress word holds once the item is done).
#[derive(Debug, Clone, Copy)]
struct Placement {
    stream: usize,
    position: u32,
}

/// What the streams of a graph are ordered by, decided at build.
struct Ordering {
    placement: Vec<Placement>,
    /// Items of each stream, in order.
    stream_items: Vec<Vec<usize>>,
    /// Per item, the (stream, position) it waits for first.
    waits: Vec<Vec<(usize, u32)>>,
    /// Per item, whether it signals its position when done.
    signals: Vec<bool>,
}

impl Ordering {
    /// Places every item on its stream and turns the conflicts between streams into waits
    /// for the latest conflicting item of the other stream (streams run in order, so that
    /// covers the earlier ones); a wait already implied by an earlier one of the same stream
    /// is left out. When the graph is synced (more than one stream or GPU, the second value),
    /// the last item of every stream signals too: rings join the streams' ends.
    fn new(devs: &[&AmdDevice], items: &[GraphItem<'_>]) -> Result<(Ordering, bool)> {
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
}

/// Writes `bytes` at CPU address `at` of GPU memory.
///
/// # Safety
/// `at..at + bytes.len()` must lie in a live CPU mapping of GPU memory the caller may write;
/// the words may be unaligned (kernel-argument offsets come from the metadata).
unsafe fn write_gpu_bytes(at: usize, bytes: &[u8]) {
    // SAFETY: per this function's contract; GPU memory is never a Rust reference and is
    // accessed atomically by everyone.
    unsafe { shared::store(at as *mut u8, bytes) }
}

impl AmdGraph {
    /// Builds the graph on `devs` (distinct GPUs of one driver; the first leads each replay;
    /// list every device whose memory the graph touches, even without work there, so its
    /// timeline orders the graph). Validates every launch (dimensions, arguments against the
    /// kernel metadata), writes the argument segments and the command streams with their
    /// waits and signals, and allocates the sync memory when there is more than one stream.
    /// `inputs` and `vars` are the values written at build (the first replay compares with
    /// them).
    pub fn build(
        devs: &[&AmdDevice],
        items: &[GraphItem<'_>],
        inputs: &[u64],
        vars: &[i32],
        options: &GraphOptions,
    ) -> Result<AmdGraph> {
        if options.segment_dwords < 256 || options.segment_dwords > IB_MAX_DWORDS {
            return Err(Error::InvalidArgument(format!(
                "indirect-buffer segments of {} dwords (256 to {IB_MAX_DWORDS})",
                options.segment_dwords
            )));
        }
        if items.is_empty() {
            return Err(Error::InvalidArgument(
                "a graph needs a launch or a copy".into(),
            ));
        }
        let Some(lead) = devs.first() else {
            return Err(Error::InvalidArgument("a graph needs a device".into()));
        };
        for (i, d) in devs.iter().enumerate() {
            if devs[..i].iter().any(|o| o.node.gpu_id == d.node.gpu_id) {
                return Err(Error::InvalidArgument(format!(
                    "{} is given twice to one graph",
                    d.name
                )));
            }
            if !std::sync::Arc::ptr_eq(&d.driver, &lead.driver) {
                return Err(Error::InvalidArgument(format!(
                    "{} and {} belong to different drivers",
                    lead.name, d.name
                )));
            }
        }
        let (order, synced) = Ordering::new(devs, items)?;
        let streams = order.stream_items.len();
        let sync = if synced {
            let bytes = progress(streams);
            let m = lead.alloc_mem(bytes, MemoryKind::Gtt, UNCACHED_GTT)?;
            for d in &devs[1..] {
                m.map_to(d.node.gpu_id)?;
            }
            m.write(0, &vec![0; bytes as usize])?;
            Some(m)
        } else {
            None
        };
        let sync_va = sync.as_ref().map_or(0, |m| m.va);
        let mut patches = Patches {
            inputs: vec![Vec::new(); inputs.len()],
            vars: vec![Vec::new(); vars.len()],
            dims: Vec::new(),
        };
        let recipe = Recipe {
            items,
            order: &order,
            sync_va,
            inputs,
            vars,
            options,
        };
        let mut parts = Vec::with_capacity(devs.len());
        for (p, dev) in devs.iter().enumerate() {
            let compute = build_compute(dev, p, &recipe, &mut patches)?;
            let copy = build_copies(dev, p, &recipe, &mut patches)?;
            parts.push(Part {
                gpu_id: dev.node.gpu_id,
                compute,
                copy,
            });
        }
        let mut lock_order: Vec<usize> = (0..parts.len()).collect();
        lock_order.sort_by_key(|&p| parts[p].gpu_id);
        Ok(AmdGraph {
            lock_order,
            sync,
            stream_ends: order.stream_items.iter().map(|s| s.len() as u32).collect(),
            input_patches: patches.inputs,
            var_patches: patches.vars,
            dim_patches: patches.dims,
            applied: Mutex::new(Applied {
                inputs: inputs.to_vec(),
                vars: vars.to_vec(),
                dims: None,
                last_submission: vec![None; parts.len()],
                kickoff: 0,
                last_queue: None,
            }),
            parts,
            built_on: lead.progress.clone(),
            uses_scratch: items.iter().any(|item| match &item.work {
                Work::Launch(l) => l.program.wave_scratch > 0,
                Work::Copy(_) => false,
            }),
        })
    }

    /// Number of graph inputs.
    pub fn input_count(&self) -> usize {
        self.input_patches.len()
    }

    /// Number of GPUs the graph runs on.
    pub fn device_count(&self) -> usize {
        self.parts.len()
    }

    /// Number of launches whose dimensions each replay may change.
    pub fn symbolic_launch_count(&self) -> usize {
        self.dim_patches.len()
    }

    /// Indirect-buffer segments the compute streams span (chained after the first).
    pub fn segment_count(&self) -> usize {
        self.parts
            .iter()
            .filter_map(|p| p.compute.as_ref())
            .map(|c| c.segments)
            .sum()
    }

    /// Dwords of the compute streams.
    pub fn stream_dwords(&self) -> usize {
        self.parts
            .iter()
            .filter_map(|p| p.compute.as_ref())
            .map(|c| c.dwords)
            .sum()
    }

    /// Address words (kernel arguments and copy packets) rewritten when input `n` changes.
    pub fn input_patch_count(&self, n: usize) -> usize {
        self.input_patches.get(n).map_or(0, Vec::len)
    }

    /// Overwrites the compute stream words of `part` from dword `at` with `values`. Callers
    /// hold the graph's lock and have waited for the previous replay.
    fn store_stream_words(&self, part: usize, at: usize, values: &[u32]) {
        let Some(c) = &self.parts[part].compute else {
            return;
        };
        match at.checked_add(values.len()) {
            Some(end) if end <= c.dwords => {}
            _ => return,
        }
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        // SAFETY: the stream mapping holds `dwords` dwords for the life of the graph and
        // `at + values.len() <= dwords` (checked); callers hold the graph's lock (the only
        // writer) and have waited for the previous replay.
        unsafe { write_gpu_bytes(c.stream.as_ptr() as usize + 4 * at, &bytes) };
    }

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

    /// Before a single-GPU replay on `dev`: a queue other than the one the graph was built on
    /// must be able to run it, and when the queue differs from the last replay's, that replay
    /// must have finished (the caller waits for it: replays of one graph share its memory).
    fn switch_queue(&self, dev: &AmdDevice, applied: &mut Applied) -> Result<()> {
        if !std::sync::Arc::ptr_eq(&dev.progress, &self.built_on) {
            if self.sync.is_some() || self.parts.iter().any(|p| p.copy.is_some()) {
                return Err(Error::Unsupported(format!(
                    "replaying on {} a graph whose copies run on the copy engine: it replays \
                     on the device's own queue",
                    dev.name
                )));
            }
            if self.uses_scratch {
                return Err(Error::Unsupported(format!(
                    "replaying on {} a graph whose kernels use scratch memory: its dispatches \
                     name the scratch ring of the device's own queue, where it replays",
                    dev.name
                )));
            }
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

    /// Rewrites the words of every input, variable and dimension that changed, and records
    /// the new values. Callers hold the graph's lock and have waited for the previous replay.
    fn patch(&self, applied: &mut Applied, values: &ReplayValues<'_>, dims_changed: bool) {
        for (n, (&new, old)) in values.inputs.iter().zip(&mut applied.inputs).enumerate() {
            if new != *old {
                for p in &self.input_patches[n] {
                    // SAFETY: every patch address was taken at build inside a mapping the
                    // graph owns (argument segments, copy streams) for its whole life; the
                    // previous replay has finished and the graph's lock makes this the only
                    // writer.
                    unsafe { write_gpu_bytes(p.at, &new.wrapping_add(p.offset).to_le_bytes()) };
                }
                *old = new;
            }
        }
        for (n, (&new, old)) in values.vars.iter().zip(&mut applied.vars).enumerate() {
            if new != *old {
                for &at in &self.var_patches[n] {
                    // SAFETY: as for the inputs above: a 4-byte argument word in the graph's
                    // argument memory, not read by the GPU meanwhile.
                    unsafe { write_gpu_bytes(at, &new.to_le_bytes()) };
                }
                *old = new;
            }
        }
        if dims_changed {
            let new = values.dims.unwrap_or_default();
            let old = applied.dims.take();
            for (k, (p, &(global, local))) in self.dim_patches.iter().zip(new).enumerate() {
                if old.as_ref().map(|d| d[k]) == Some((global, local)) {
                    continue;
                }
                self.store_stream_words(p.part, p.dispatch.local_at(), &local);
                self.store_stream_words(p.part, p.dispatch.global_at(), &global);
                patch_hidden_dims(p, global, local);
            }
            applied.dims = Some(new.to_vec());
        }
    }

    /// One stream on one device: wait for the timeline, call the stream, signal the timeline.
    fn submit_single(&self, dev: &AmdDevice, st: &mut DeviceState) -> Result<()> {
        dev.check_usable()?;
        let stamps = dev.trace_begin(st, TRACE_NAME)?;
        let value = st.timeline_value;
        let room_wait = dev.ring_wait(st);
        let b = &mut st.builder;
        b.clear();
        b.wait(st.timeline.value_addr(), value - 1);
        if let Some(slot) = stamps {
            b.timestamp(slot.start);
        }
        if let Some(c) = &self.parts[0].compute {
            b.indirect_buffer(c.stream.va, c.first_segment_dwords);
        }
        if let Some(slot) = stamps {
            b.timestamp(slot.end);
        }
        st.timeline.release_with(b, value);
        st.queue.submit(&b.words, room_wait)?;
        AmdDevice::trace_commit(st, stamps, TRACE_NAME, "compute");
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
        AmdDevice::trace_commit(&mut states[0], stamps, TRACE_NAME, "compute");
        Ok(())
    }
}

/// Rewrites the hidden arguments and AQL packet of a launch whose dimensions changed.
fn patch_hidden_dims(p: &DimPatch, global: [u32; 3], local: [u32; 3]) {
    let grid_dims: u64 = if global[2] > 1 || local[2] > 1 {
        3
    } else if global[1] > 1 || local[1] > 1 {
        2
    } else {
        1
    };
    for &(at, size, what) in &p.hidden {
        let value = match what {
            HiddenDim::BlockCount(a) => global[a] as u64,
            HiddenDim::GroupSize(a) => local[a] as u64,
            HiddenDim::GridDims => grid_dims,
        };
        let bytes = value.to_le_bytes();
        // SAFETY: `at..at + size` (size <= 8) is a hidden-argument slot inside the graph's
        // argument memory, found at build; the caller has waited for the previous replay and
        // holds the graph's lock.
        unsafe { write_gpu_bytes(at, &bytes[..size]) };
    }
    if let Some((aql_at, segment)) = p.aql {
        let packet = aql_dispatch_packet(&p.descriptor, global, local, segment, p.lds);
        // SAFETY: the 64-byte AQL packet slot after the launch's argument segment, inside the
        // graph's argument memory; same conditions as above.
        unsafe { write_gpu_bytes(aql_at, &packet) };
    }
}

/// Patch lists being gathered while the streams are built.
struct Patches {
    inputs: Vec<Vec<AddressPatch>>,
    vars: Vec<Vec<usize>>,
    dims: Vec<DimPatch>,
}

/// What every stream of a graph is built from.
struct Recipe<'r, 'a> {
    items: &'r [GraphItem<'a>],
    order: &'r Ordering,
    /// GPU address of the sync memory (0 without one).
    sync_va: u64,
    /// Addresses and values written at build.
    inputs: &'r [u64],
    vars: &'r [i32],
    options: &'r GraphOptions,
}

/// Builds the compute stream of part `p` (`None` when it has no launches): the argument
/// segments, validated, then the PM4 of each launch with its waits and signal, split into
/// chained segments when long.
fn build_compute(
    dev: &AmdDevice,
    p: usize,
    recipe: &Recipe<'_, '_>,
    patches: &mut Patches,
) -> Result<Option<ComputeStream>> {
    let Recipe {
        items,
        order,
        sync_va,
        inputs,
        vars,
        options,
    } = *recipe;
    // Launches, and the copies of a GPU without a copy engine.
    let stream_items: Vec<(usize, &Work<'_>)> = order.stream_items[stream_of(p, false)]
        .iter()
        .map(|&i| (i, &items[i].work))
        .collect();
    if stream_items.is_empty() {
        return Ok(None);
    }
    // Pass 1: argument segments, validated, in a host image; patch offsets in it.
    let mut image: Vec<u8> = Vec::new();
    let mut placed = Vec::with_capacity(stream_items.len());
    let mut input_offsets: Vec<(usize, u64)> = Vec::new();
    let mut var_offsets: Vec<(usize, u64)> = Vec::new();
    for &(i, work) in &stream_items {
        let Work::Launch(l) = work else {
            placed.push((0, false, 0));
            continue;
        };
        let prg = l.program;
        validate_dims(l.global, l.local)
            .map_err(|e| Error::InvalidArgument(format!("item {i} ({}): {e}", prg.name)))?;
        let lds = lds_bytes(prg, l.dynamic_lds)?;
        let mut args = Vec::with_capacity(l.args.len());
        for a in &l.args {
            args.push(match *a {
                GraphArg::Fixed(f) => f,
                GraphArg::Input(n) => Arg::Buffer(*inputs.get(n).ok_or_else(|| {
                    Error::InvalidArgument(format!("item {i}: no graph input {n}"))
                })?),
                GraphArg::Var(n) => {
                    Arg::I32(*vars.get(n).ok_or_else(|| {
                        Error::InvalidArgument(format!("item {i}: no variable {n}"))
                    })?)
                }
            });
        }
        let with_aql = prg.user_sgprs.dispatch_ptr.is_some();
        let need = (prg.kernarg_size as u64).next_multiple_of(64) + if with_aql { 64 } else { 0 };
        let at = (image.len() as u64).next_multiple_of(prg.kernarg_align as u64);
        image.resize((at + need) as usize, 0);
        let seg = &mut image[at as usize..(at + prg.kernarg_size as u64) as usize];
        prg.write_kernargs(&args, |&a| Ok(a), l.global, l.local, seg)?;
        prg.write_dynamic_lds_size(l.dynamic_lds, seg);
        for (a, off) in l.args.iter().zip(explicit_arg_offsets(prg, &l.args)) {
            match *a {
                GraphArg::Input(n) => input_offsets.push((n, at + off)),
                GraphArg::Var(n) => var_offsets.push((n, at + off)),
                GraphArg::Fixed(_) => {}
            }
        }
        placed.push((at, with_aql, lds));
    }
    let kernargs = dev.alloc_mem(
        (image.len() as u64).max(64),
        MemoryKind::Vram,
        AllocFlags::default(),
    )?;
    let host = kernargs.as_ptr() as usize;
    for (n, off) in input_offsets {
        patches.inputs[n].push(AddressPatch {
            at: host + off as usize,
            offset: 0,
        });
    }
    for (n, off) in var_offsets {
        patches.vars[n].push(host + off as usize);
    }
    // Pass 2: the command stream, with the AQL packets written into the image.
    let mut st = lock(&dev.state);
    let scratch = st.scratch.clone();
    let mut b = Pm4Builder::new();
    let mut chains: Vec<usize> = Vec::new();
    let mut segment_start = 0usize;
    let limit = options.segment_dwords as usize;
    let own = stream_of(p, false);
    // (input, dword index in the stream, offset added to the input's address) of copies.
    let mut address_words: Vec<(usize, usize, u64)> = Vec::new();
    for (&(item, work), &(at, with_aql, lds)) in stream_items.iter().zip(&placed) {
        let l = match work {
            Work::Launch(l) => l,
            Work::Copy(c) => {
                let (dst, src) = copy_ends(item, c, inputs)?;
                let emit = |b: &mut Pm4Builder| -> usize {
                    for &(t, value) in &order.waits[item] {
                        b.wait(sync_va + progress(t), value.into());
                    }
                    let start = b.words.len();
                    b.copy(dst, src, c.size);
                    if order.signals[item] {
                        let position = order.placement[item].position;
                        b.signal(sync_va + progress(own), position.into(), 0, 0);
                    }
                    start
                };
                let before = b.words.len();
                let mut start = emit(&mut b);
                if b.words.len() - segment_start + IndirectBuffer::DWORDS > limit {
                    if before == segment_start {
                        return Err(Error::InvalidArgument(format!(
                            "item {item} (a copy of {} bytes) takes {} dwords, more than a {limit}-dword segment",
                            c.size,
                            b.words.len() - before
                        )));
                    }
                    b.words.truncate(before);
                    chains.push(b.words.len());
                    b.chain_indirect_buffer(0, 0);
                    segment_start = b.words.len();
                    start = emit(&mut b);
                }
                let mut k = start;
                while let Ok(Packet4::DmaData(pk)) = Packet4::decode(
                    Header::parse(b.words[k]),
                    &b.words[k + 1..(k + 1 + DmaData::PAYLOAD).min(b.words.len())],
                ) {
                    // SRC_ADDR at dwords 2..4, DST_ADDR at 4..6.
                    if let CopyEnd::Input(n) = c.src {
                        address_words.push((n, k + 2, pk.src - src));
                    }
                    if let CopyEnd::Input(n) = c.dst {
                        address_words.push((n, k + 4, pk.dst - dst));
                    }
                    k += 1 + DmaData::PAYLOAD;
                    if pk.cp_sync || k >= b.words.len() {
                        break;
                    }
                }
                continue;
            }
        };
        let prg = l.program;
        let kernargs_addr = kernargs.va + at;
        let aql_at = at + (prg.kernarg_size as u64).next_multiple_of(64);
        let dispatch_ptr = if with_aql {
            let packet =
                aql_dispatch_packet(&prg.descriptor, l.global, l.local, kernargs_addr, lds);
            image[aql_at as usize..aql_at as usize + 64].copy_from_slice(&packet);
            kernargs.va + aql_at
        } else {
            0
        };
        let setup = dispatch_setup(prg, &mut st, kernargs_addr, dispatch_ptr, lds);
        let emit = |b: &mut Pm4Builder| {
            for &(t, value) in &order.waits[item] {
                b.wait(sync_va + progress(t), value.into());
            }
            let patch = b.exec(&setup, l.global, l.local);
            if order.signals[item] {
                let position = order.placement[item].position;
                b.signal(sync_va + progress(own), position.into(), 0, 0);
            }
            patch
        };
        let before = b.words.len();
        let mut patch = emit(&mut b);
        if b.words.len() - segment_start + IndirectBuffer::DWORDS > limit {
            if before == segment_start {
                return Err(Error::InvalidArgument(format!(
                    "one launch takes {} dwords, more than a {limit}-dword segment",
                    b.words.len() - before
                )));
            }
            // Move this launch to a new segment behind a chaining packet.
            b.words.truncate(before);
            chains.push(b.words.len());
            b.chain_indirect_buffer(0, 0);
            segment_start = b.words.len();
            patch = emit(&mut b);
        }
        if l.symbolic_dims {
            patches.dims.push(DimPatch {
                part: p,
                dispatch: patch,
                hidden: hidden_dims(prg, host + at as usize),
                aql: with_aql.then_some((host + aql_at as usize, kernargs_addr)),
                descriptor: prg.descriptor,
                lds,
            });
        }
    }
    drop(st);
    let dwords = b.words.len();
    let stream = dev.alloc_mem((dwords as u64 * 4).max(64), MemoryKind::Gtt, UNCACHED_GTT)?;
    // Point each chaining packet at the segment after it.
    let mut words = b.words;
    for (k, &c) in chains.iter().enumerate() {
        let next_start = c + IndirectBuffer::DWORDS;
        let next_end = chains
            .get(k + 1)
            .map_or(dwords, |&n| n + IndirectBuffer::DWORDS);
        let mut packet = Vec::with_capacity(IndirectBuffer::DWORDS);
        IndirectBuffer {
            address: stream.va + next_start as u64 * 4,
            size_dwords: (next_end - next_start) as u32,
            chain: true,
            valid: true,
        }
        .encode(&mut packet);
        words[c..next_start].copy_from_slice(&packet);
    }
    let first_segment_dwords = chains
        .first()
        .map_or(dwords, |&c| c + IndirectBuffer::DWORDS) as u32;
    kernargs.write(0, &image)?;
    stream.write(0, bytemuck_words(&words))?;
    let stream_host = stream.as_ptr() as usize;
    for (n, k, offset) in address_words {
        patches.inputs[n].push(AddressPatch {
            at: stream_host + 4 * k,
            offset,
        });
    }
    Ok(Some(ComputeStream {
        _kernargs: kernargs,
        _scratch: scratch,
        stream,
        dwords,
        first_segment_dwords,
        segments: chains.len() + 1,
    }))
}

/// The destination and source addresses of copy `item` with the graph's build-time inputs.
fn copy_ends(item: usize, c: &GraphCopy, inputs: &[u64]) -> Result<(u64, u64)> {
    let resolve = |end: CopyEnd| match end {
        CopyEnd::Fixed(a) => Ok(a),
        CopyEnd::Input(n) => inputs.get(n).copied().ok_or_else(|| {
            Error::InvalidArgument(format!("item {item} (a copy): no graph input {n}"))
        }),
    };
    Ok((resolve(c.dst)?, resolve(c.src)?))
}

/// Builds the copy stream of part `p` (`None` when its engine runs no copies): each copy
/// behind its waits, followed by a fence of its position when something waits for it.
fn build_copies(
    dev: &AmdDevice,
    p: usize,
    recipe: &Recipe<'_, '_>,
    patches: &mut Patches,
) -> Result<Option<CopyStream>> {
    let Recipe {
        items,
        order,
        sync_va,
        inputs,
        ..
    } = *recipe;
    let own = stream_of(p, true);
    if order.stream_items[own].is_empty() {
        return Ok(None);
    }
    let mut b = SdmaBuilder::new();
    // (input, dword index in the stream, offset added to the input's address).
    let mut address_words: Vec<(usize, usize, u64)> = Vec::new();
    for &i in &order.stream_items[own] {
        let Work::Copy(c) = &items[i].work else {
            unreachable!("launches are on compute streams")
        };
        let (dst, src) = copy_ends(i, c, inputs)?;
        for &(t, value) in &order.waits[i] {
            b.wait(sync_va + progress(t), value.into());
        }
        let start = b.words.len();
        b.copy(dst, src, c.size);
        let mut k = start;
        for packet in split(&b.words[start..]) {
            if let Ok(Packet::CopyLinear(pk)) = Packet::decode(packet) {
                // SRC_ADDR at dwords 3..5, DST_ADDR at 5..7.
                if let CopyEnd::Input(n) = c.src {
                    address_words.push((n, k + 3, pk.src - src));
                }
                if let CopyEnd::Input(n) = c.dst {
                    address_words.push((n, k + 5, pk.dst - dst));
                }
            }
            k += packet.len();
        }
        if order.signals[i] {
            let position = order.placement[i].position;
            b.signal(sync_va + progress(own), position.into(), 0, 0);
        }
    }
    let dwords = b.words.len();
    let stream = dev.alloc_mem((dwords as u64 * 4).max(64), MemoryKind::Gtt, UNCACHED_GTT)?;
    stream.write(0, bytemuck_words(&b.words))?;
    let host = stream.as_ptr() as usize;
    for (n, k, offset) in address_words {
        patches.inputs[n].push(AddressPatch {
            at: host + 4 * k,
            offset,
        });
    }
    Ok(Some(CopyStream { stream, dwords }))
}

fn bytemuck_words(words: &[u32]) -> &[u8] {
    // SAFETY: any u32 slice is a valid byte slice of four times its length.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, words.len() * 4) }
}
