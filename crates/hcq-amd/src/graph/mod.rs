//! Graphs on AMD GPUs: a captured list of kernel launches and copies, on one GPU or several,
//! turned into command streams built once in GPU memory and replayed with one
//! `INDIRECT_BUFFER` packet per compute ring (and one SDMA `INDIRECT` per copy ring with
//! copies).
//!
//! # Streams
//!
//! Each GPU of the graph has up to two streams: its compute stream (the PM4 of its launches)
//! and its copy stream (the SDMA packets of the copies its engine runs). A GPU without a copy
//! engine ([`AmdDevice::copy_engine_missing`](crate::AmdDevice::copy_engine_missing)) runs its
//! copies in its compute stream instead, as CP DMA (`DMA_DATA`) between its launches, each
//! ordered after the one before it. Items
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
//! - **Patch lists**: per graph input, the places of the words holding its address
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

mod build;
mod hazards;
pub mod lower;
mod patch;
mod replay;

use crate::memory::{AllocFlags, GpuMemory};
use crate::program::AmdProgram;
use crate::stream::Progress;
use hcq_amd_sys::pm4::IB_MAX_DWORDS;
use hcq_core::Arg;
pub use lower::LoweredGraph;
use patch::{AddressPatch, DimPatch, PatchSite, ScratchPatch};
use replay::Applied;
use std::sync::{Arc, Mutex};

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
    /// The argument segments (and AQL packets) of the launches.
    kernargs: GpuMemory,
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
    /// Per variable, the 4-byte argument words holding its value.
    var_patches: Vec<Vec<PatchSite>>,
    dim_patches: Vec<DimPatch>,
    /// The scratch registers of the dispatches whose kernels use scratch memory.
    scratch_patches: Vec<ScratchPatch>,
    /// The most scratch one wave of the graph's kernels needs, in bytes.
    max_wave_scratch: u64,
    applied: Mutex<Applied>,
    /// The queue the graph was built on (its timeline's progress): a single-GPU graph also
    /// replays on another stream of the GPU when nothing ties it to this queue's memory.
    built_on: std::sync::Arc<Progress>,
    /// Whether a kernel of the graph uses scratch memory: its dispatches name one queue's
    /// scratch ring, rewritten when it replays on another queue.
    uses_scratch: bool,
    /// Kernel launches and copies one replay runs (the replay span's arguments).
    launches: usize,
    copies: usize,
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

impl AmdGraph {
    /// What a replay's trace span says it ran.
    fn trace_args(&self) -> Vec<(&'static str, String)> {
        vec![
            ("kernels", self.launches.to_string()),
            ("copies", self.copies.to_string()),
            ("gpus", self.parts.len().to_string()),
            ("inputs", self.input_patches.len().to_string()),
            ("variables", self.var_patches.len().to_string()),
            ("command dwords", self.stream_dwords().to_string()),
        ]
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
}
