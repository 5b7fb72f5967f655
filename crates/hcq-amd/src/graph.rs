//! Graphs on one AMD GPU: a captured list of kernel launches and copies turned into one PM4
//! command stream and one SDMA command stream, built once in GPU memory and replayed with a
//! single `INDIRECT_BUFFER` packet on the compute ring (and a single SDMA `INDIRECT` on the copy
//! ring when there are copies).
//!
//! # What is built once
//!
//! - **Kernel arguments**: every launch gets its own argument segment (and AQL dispatch packet
//!   when the kernel reads one) in memory the graph owns, written at build time with
//!   [`AmdProgram::write_kernargs`], which validates the arguments against the kernel's
//!   metadata. Replays never allocate arguments.
//! - **The command stream**: the PM4 of every launch ([`Pm4Builder::exec`]) in uncached GTT.
//!   Streams longer than one indirect buffer can name (or than
//!   [`GraphOptions::segment_dwords`]) are split into segments joined by chained
//!   `INDIRECT_BUFFER` packets.
//! - **Patch lists**, per graph input (the argument words holding its address), per variable
//!   (the argument words holding its value) and per launch whose dimensions change between
//!   replays (its `DISPATCH_DIRECT` and workgroup-size words, its hidden block-count and
//!   group-size arguments and its AQL packet).
//!
//! # What a replay does
//!
//! It compares the given input addresses and variable values with the ones last applied and
//! rewrites only the words of those that changed (launches with fixed dimensions and unchanged
//! arguments cost nothing). Before rewriting anything it waits for the graph's previous replay
//! to finish, since the GPU reads those words; a replay that changes nothing does not wait.
//! Then it writes three packets to the device's compute ring: a wait for the device timeline's
//! previous value (so the graph runs after all work queued before it, eager launches and
//! copies alike), the `INDIRECT_BUFFER` of the stream, and a signal of the timeline's next value
//! (so work queued afterwards runs after the graph). Host cost: independent of the number of
//! launches.
//!
//! # Copies
//!
//! Copies ([`Work::Copy`]) go to the copy stream (`COPY_LINEAR` packets in uncached GTT, with
//! a patch list per input for the address words). Each item declares what it reads and writes
//! ([`Region`]); an item conflicting with an earlier item of the other stream waits (a
//! `WAIT_REG_MEM` or `POLL_REGMEM`) until that item's position is in the other stream's
//! private signal, which the item signals after it (`RELEASE_MEM` or `FENCE`). The compute ring
//! joins the copy stream's end before signalling the timeline; the copy ring's submission waits
//! for the timeline's previous value. The private signals restart from zero on every replay,
//! so a replay of a graph with copies first waits for the previous one.
//!
//! Replays are not traced (`HCQ_TRACE`): the graph shows as one gap in the compute track.
//!
//! The owner must not drop an [`AmdGraph`] while a replay may still run (hcq's `Graph`
//! synchronises its device first).

use crate::device::{aql_dispatch_packet, dispatch_setup, lock, validate_dims, AmdDevice};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::program::{AmdProgram, ArgKind};
use hcq_amd_sys::kd::KernelDescriptor;
use hcq_amd_sys::pm4::{DispatchPatch, IndirectBuffer, Pm4Builder, IB_MAX_DWORDS};
use hcq_amd_sys::sdma::{split, Packet, SdmaBuilder};
use hcq_core::{Arg, Error, Result};
use std::sync::Mutex;

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
    pub program: &'a AmdProgram,
    pub args: Vec<GraphArg>,
    /// Workgroups per axis (the dimensions until the first replay that gives others).
    pub global: [u32; 3],
    /// Work-items per workgroup.
    pub local: [u32; 3],
    /// Whether replays give this launch's dimensions (in [`ReplayValues::dims`]).
    pub symbolic_dims: bool,
}

/// One end of a graph copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyEnd {
    /// The same device address for every replay.
    Fixed(u64),
    /// The address of graph input `n`, rewritten when a replay binds another buffer.
    Input(usize),
}

/// A device-to-device copy of `size` bytes on the graph's device, run by its SDMA engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphCopy {
    pub dst: CopyEnd,
    pub src: CopyEnd,
    pub size: u64,
}

/// Memory an item reads or writes, for ordering the compute and copy streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// Bytes `start..end` of device memory, the same for every replay.
    Fixed { start: u64, end: u64 },
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
    Launch(GraphLaunch<'a>),
    Copy(GraphCopy),
}

/// One item to capture, with the memory it reads and writes (a region in both sets may be
/// listed under `writes` only).
#[derive(Debug, Clone)]
pub struct GraphItem<'a> {
    pub work: Work<'a>,
    pub reads: Vec<Region>,
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

/// Byte offsets of the two 32-bit words of the graph's private signals in its sync memory:
/// the compute stream's progress and the copy stream's progress.
const COMPUTE_SYNC: u64 = 0;
const COPY_SYNC: u64 = 8;

/// The copy (SDMA) stream of a graph with copies.
struct CopyStream {
    stream: GpuMemory,
    dwords: usize,
    /// Per input, (dword index of the 64-bit address in the stream, byte offset added).
    patches: Vec<Vec<(usize, u64)>>,
    /// The value the copy stream's last signal writes (what the compute ring waits for).
    last: u32,
    /// Graph-private progress signals, reset by the host before each replay.
    sync: GpuMemory,
}

impl CopyStream {
    /// Writes `address` plus each patch's offset into the copy stream. Callers hold the
    /// graph's lock and have waited for the previous replay.
    fn patch(&self, patches: &[(usize, u64)], address: u64) {
        for &(at, offset) in patches {
            debug_assert!(at + 2 <= self.dwords);
            let a = address.wrapping_add(offset);
            // SAFETY: `at` and `at + 1` index the address words of a `COPY_LINEAR` packet
            // inside the stream mapping, which holds `dwords` dwords for the life of the
            // graph; the GPU is not reading it (the replay waited for the previous one) and the
            // graph's lock makes this the only writer.
            unsafe {
                let p = (self.stream.as_ptr() as *mut u32).add(at);
                p.write_volatile(a as u32);
                p.add(1).write_volatile((a >> 32) as u32);
            }
        }
    }
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
    dispatch: DispatchPatch,
    /// (byte offset in the graph's kernarg memory, size in bytes, what it holds).
    hidden: Vec<(u64, usize, HiddenDim)>,
    /// Byte offset of the AQL dispatch packet and of the argument segment it points to.
    aql: Option<(u64, u64)>,
    descriptor: KernelDescriptor,
}

/// What the last replay applied, and when it was submitted.
#[derive(Debug)]
struct Applied {
    inputs: Vec<u64>,
    vars: Vec<i32>,
    dims: Option<Vec<LaunchDims>>,
    /// (timeline swaps, timeline value) of the last replay.
    last_submission: Option<(u64, u64)>,
}

/// A captured list of launches on one AMD GPU, replayable with one submission.
pub struct AmdGraph {
    gpu_id: u32,
    kernargs: GpuMemory,
    stream: GpuMemory,
    stream_dwords: usize,
    /// Dwords of the first segment (what the ring's `INDIRECT_BUFFER` names).
    first_segment_dwords: u32,
    /// Per input, the byte offsets in `kernargs` of the 8-byte words holding its address.
    input_patches: Vec<Vec<u64>>,
    /// Per variable, the byte offsets in `kernargs` of the 4-byte words holding its value.
    var_patches: Vec<Vec<u64>>,
    dim_patches: Vec<DimPatch>,
    applied: Mutex<Applied>,
    segments: usize,
    /// The copy stream, when the graph has copies.
    copies: Option<CopyStream>,
}

impl std::fmt::Debug for AmdGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AmdGraph({} dwords in {} segment(s), {} inputs, {} vars)",
            self.stream_dwords,
            self.segments,
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

fn hidden_dims(prg: &AmdProgram, segment: u64) -> Vec<(u64, usize, HiddenDim)> {
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
            Some((segment + a.offset as u64, (a.size as usize).min(8), what))
        })
        .collect()
}

impl AmdGraph {
    /// Builds the graph: validates every launch (program device, dimensions, arguments
    /// against the kernel metadata), writes the argument segments, the compute stream and,
    /// when there are copies, the copy stream, with waits on the graph's private signals
    /// wherever an item conflicts with an earlier one of the other stream. `inputs` and `vars`
    /// are the values written at build (the first replay compares with them).
    pub fn build(
        dev: &AmdDevice,
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
        // Each item's stream (copy or not) and 1-based position in it; the position is the
        // value the stream's signal holds once the item is done.
        let mut position = Vec::with_capacity(items.len());
        let mut stream_items: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (i, it) in items.iter().enumerate() {
            let copy = matches!(it.work, Work::Copy(_));
            stream_items[copy as usize].push(i);
            position.push((copy, stream_items[copy as usize].len() as u32));
        }
        // Hazards across the streams become waits for the latest conflicting item of the
        // other stream (streams run in order, so that covers the earlier ones); a wait
        // already implied by an earlier one of the same stream is left out.
        let mut waits = vec![0u32; items.len()];
        let mut signals = vec![false; items.len()];
        let mut waited = [0u32; 2];
        for (i, it) in items.iter().enumerate() {
            let (copy, _) = position[i];
            let other = &stream_items[!copy as usize];
            let before = other.partition_point(|&j| j < i);
            if let Some(&j) = other[..before]
                .iter()
                .rev()
                .find(|&&j| it.conflicts(&items[j]))
            {
                let value = position[j].1;
                if value > waited[copy as usize] {
                    waited[copy as usize] = value;
                    waits[i] = value;
                    signals[j] = true;
                }
            }
        }
        // The compute ring joins the copy stream's end.
        if let Some(&last) = stream_items[1].last() {
            signals[last] = true;
        }
        let launches: Vec<(usize, &GraphLaunch<'_>)> = items
            .iter()
            .enumerate()
            .filter_map(|(i, it)| match &it.work {
                Work::Launch(l) => Some((i, l)),
                Work::Copy(_) => None,
            })
            .collect();
        let sync = if stream_items[1].is_empty() {
            None
        } else {
            let m = dev.alloc_mem(
                64,
                MemoryKind::Gtt,
                AllocFlags {
                    uncached: true,
                    public: false,
                },
            )?;
            m.write(0, &[0; 16]);
            Some(m)
        };
        let sync_va = sync.as_ref().map_or(0, |m| m.va);
        // Pass 1: argument segments, validated, in a host image.
        let mut image: Vec<u8> = Vec::new();
        let mut placed = Vec::with_capacity(launches.len());
        let mut input_patches = vec![Vec::new(); inputs.len()];
        let mut var_patches = vec![Vec::new(); vars.len()];
        for (i, &(_, l)) in launches.iter().enumerate() {
            let prg = l.program;
            if prg.device_gpu_id != dev.node.gpu_id {
                return Err(Error::InvalidArgument(format!(
                    "launch {i}: program {} was loaded on another device",
                    prg.name
                )));
            }
            validate_dims(l.global, l.local)
                .map_err(|e| Error::InvalidArgument(format!("launch {i} ({}): {e}", prg.name)))?;
            let mut args = Vec::with_capacity(l.args.len());
            for a in &l.args {
                args.push(match *a {
                    GraphArg::Fixed(f) => f,
                    GraphArg::Input(n) => Arg::Buffer(*inputs.get(n).ok_or_else(|| {
                        Error::InvalidArgument(format!("launch {i}: no graph input {n}"))
                    })?),
                    GraphArg::Var(n) => Arg::I32(*vars.get(n).ok_or_else(|| {
                        Error::InvalidArgument(format!("launch {i}: no variable {n}"))
                    })?),
                });
            }
            let with_aql = prg.user_sgprs.dispatch_ptr.is_some();
            let need =
                (prg.kernarg_size as u64).next_multiple_of(64) + if with_aql { 64 } else { 0 };
            let at = (image.len() as u64).next_multiple_of(prg.kernarg_align as u64);
            image.resize((at + need) as usize, 0);
            let seg = &mut image[at as usize..(at + prg.kernarg_size as u64) as usize];
            prg.write_kernargs(&args, |&a| Ok(a), l.global, l.local, seg)?;
            let offsets = explicit_arg_offsets(prg, &l.args);
            for (a, off) in l.args.iter().zip(offsets) {
                match *a {
                    GraphArg::Input(n) => input_patches[n].push(at + off),
                    GraphArg::Var(n) => var_patches[n].push(at + off),
                    GraphArg::Fixed(_) => {}
                }
            }
            placed.push((at, with_aql));
        }
        let kernargs = dev.alloc_mem(
            (image.len() as u64).max(64),
            MemoryKind::Vram,
            AllocFlags::default(),
        )?;
        // Pass 2: the command stream, with the AQL packets written into the image.
        let mut st = lock(&dev.state);
        let mut b = Pm4Builder::new();
        let mut chains: Vec<usize> = Vec::new();
        let mut segment_start = 0usize;
        let mut dim_patches = Vec::new();
        let limit = options.segment_dwords as usize;
        for (&(item, l), &(at, with_aql)) in launches.iter().zip(&placed) {
            let prg = l.program;
            let kernargs_addr = kernargs.va + at;
            let aql_at = at + (prg.kernarg_size as u64).next_multiple_of(64);
            let dispatch_ptr = if with_aql {
                let packet = aql_dispatch_packet(&prg.descriptor, l.global, l.local, kernargs_addr);
                image[aql_at as usize..aql_at as usize + 64].copy_from_slice(&packet);
                kernargs.va + aql_at
            } else {
                0
            };
            let setup = dispatch_setup(prg, &mut st, kernargs_addr, dispatch_ptr);
            let emit = |b: &mut Pm4Builder| {
                if waits[item] > 0 {
                    b.wait(sync_va + COPY_SYNC, waits[item].into());
                }
                let patch = b.exec(&setup, l.global, l.local);
                if signals[item] {
                    b.signal(sync_va + COMPUTE_SYNC, position[item].1.into(), 0, 0);
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
                dim_patches.push(DimPatch {
                    dispatch: patch,
                    hidden: hidden_dims(prg, at),
                    aql: with_aql.then_some((aql_at, at)),
                    descriptor: prg.descriptor,
                });
            }
        }
        drop(st);
        let stream_dwords = b.words.len();
        let stream = dev.alloc_mem(
            (stream_dwords as u64 * 4).max(64),
            MemoryKind::Gtt,
            AllocFlags {
                uncached: true,
                public: false,
            },
        )?;
        // Point each chaining packet at the segment after it.
        let mut words = b.words;
        for (k, &c) in chains.iter().enumerate() {
            let next_start = c + IndirectBuffer::DWORDS;
            let next_end = chains
                .get(k + 1)
                .map_or(stream_dwords, |&n| n + IndirectBuffer::DWORDS);
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
            .map_or(stream_dwords, |&c| c + IndirectBuffer::DWORDS)
            as u32;
        kernargs.write(0, &image);
        stream.write(0, bytemuck_words(&words));
        let copies = match sync {
            None => None,
            Some(sync) => Some(Self::build_copies(
                dev, items, inputs, &waits, &signals, &position, sync,
            )?),
        };
        Ok(AmdGraph {
            copies,
            gpu_id: dev.node.gpu_id,
            kernargs,
            stream,
            stream_dwords,
            first_segment_dwords,
            input_patches,
            var_patches,
            dim_patches,
            applied: Mutex::new(Applied {
                inputs: inputs.to_vec(),
                vars: vars.to_vec(),
                dims: None,
                last_submission: None,
            }),
            segments: chains.len() + 1,
        })
    }

    /// Writes the copy stream: each copy behind its wait for the compute stream, followed by
    /// a fence of its position when something waits for it.
    fn build_copies(
        dev: &AmdDevice,
        items: &[GraphItem<'_>],
        inputs: &[u64],
        waits: &[u32],
        signals: &[bool],
        position: &[(bool, u32)],
        sync: GpuMemory,
    ) -> Result<CopyStream> {
        let mut b = SdmaBuilder::new();
        let mut patches = vec![Vec::new(); inputs.len()];
        let mut last = 0;
        for (i, it) in items.iter().enumerate() {
            let Work::Copy(c) = &it.work else {
                continue;
            };
            let resolve = |end: CopyEnd| match end {
                CopyEnd::Fixed(a) => Ok(a),
                CopyEnd::Input(n) => inputs.get(n).copied().ok_or_else(|| {
                    Error::InvalidArgument(format!("copy {}: no graph input {n}", position[i].1))
                }),
            };
            let (dst, src) = (resolve(c.dst)?, resolve(c.src)?);
            if waits[i] > 0 {
                b.wait(sync.va + COMPUTE_SYNC, waits[i].into());
            }
            let start = b.words.len();
            b.copy(dst, src, c.size);
            let mut k = start;
            for packet in split(&b.words[start..]) {
                if let Ok(Packet::CopyLinear(p)) = Packet::decode(packet) {
                    // SRC_ADDR at dwords 3..5, DST_ADDR at 5..7.
                    if let CopyEnd::Input(n) = c.src {
                        patches[n].push((k + 3, p.src - src));
                    }
                    if let CopyEnd::Input(n) = c.dst {
                        patches[n].push((k + 5, p.dst - dst));
                    }
                }
                k += packet.len();
            }
            if signals[i] {
                last = position[i].1;
                b.signal(sync.va + COPY_SYNC, last.into(), 0, 0);
            }
        }
        let dwords = b.words.len();
        let stream = dev.alloc_mem(
            (dwords as u64 * 4).max(64),
            MemoryKind::Gtt,
            AllocFlags {
                uncached: true,
                public: false,
            },
        )?;
        stream.write(0, bytemuck_words(&b.words));
        Ok(CopyStream {
            stream,
            dwords,
            patches,
            last,
            sync,
        })
    }

    /// Number of graph copies' address words rewritten when input `n` changes.
    pub fn copy_patch_count(&self, n: usize) -> usize {
        self.copies
            .as_ref()
            .and_then(|c| c.patches.get(n))
            .map_or(0, Vec::len)
    }

    /// Number of graph inputs.
    pub fn input_count(&self) -> usize {
        self.input_patches.len()
    }

    /// Number of launches whose dimensions each replay may change.
    pub fn symbolic_launch_count(&self) -> usize {
        self.dim_patches.len()
    }

    /// Indirect-buffer segments the command stream spans (chained after the first).
    pub fn segment_count(&self) -> usize {
        self.segments
    }

    /// Dwords of the command stream.
    pub fn stream_dwords(&self) -> usize {
        self.stream_dwords
    }

    /// Argument words rewritten when input `n` changes.
    pub fn input_patch_count(&self, n: usize) -> usize {
        self.input_patches.get(n).map_or(0, Vec::len)
    }

    fn write_kernarg(&self, offset: u64, bytes: &[u8]) {
        debug_assert!(offset + bytes.len() as u64 <= self.kernargs.size);
        // SAFETY: every offset comes from the layout built in `build`, inside the kernarg
        // mapping, which lives as long as the graph; the GPU is not reading it (the replay
        // waited for the previous one), and the graph's lock makes this the only writer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.kernargs.as_ptr().add(offset as usize),
                bytes.len(),
            )
        };
    }

    /// Runs `edit` over the command stream's words. Callers hold the graph's lock and have
    /// waited for the previous replay.
    fn edit_stream(&self, edit: impl FnOnce(&mut [u32])) {
        // SAFETY: the stream mapping holds `stream_dwords` dwords for the life of the graph;
        // callers hold the graph's lock (the only writer) and have waited for the previous
        // replay, so the GPU does not read these words meanwhile.
        let words = unsafe {
            std::slice::from_raw_parts_mut(self.stream.as_ptr() as *mut u32, self.stream_dwords)
        };
        edit(words);
    }

    /// Replays the graph on `dev` with `values`: rewrites what changed since the last replay,
    /// then queues the whole stream with one `INDIRECT_BUFFER`. Returns once it is queued. On
    /// an error nothing was rewritten and the graph stays usable.
    pub fn replay(&self, dev: &AmdDevice, values: &ReplayValues<'_>) -> Result<()> {
        if dev.node.gpu_id != self.gpu_id {
            return Err(Error::InvalidArgument(format!(
                "graph replayed on {}, it was built for another device",
                dev.name
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
        let inputs_changed = applied.inputs != values.inputs;
        let vars_changed = applied.vars != values.vars;
        let mut st = lock(&dev.state);
        dev.wrap_timeline_if_due(&mut st)?;
        if inputs_changed || vars_changed || dims_changed || self.copies.is_some() {
            // A graph with copies always waits: its private signals restart from zero.
            if let Some((swaps, value)) = applied.last_submission {
                // After a timeline swap everything before it has finished.
                if swaps == st.timeline_swaps {
                    dev.wait_value_locked(&st, value)?;
                }
            }
            if inputs_changed {
                for (n, (&new, old)) in values.inputs.iter().zip(&mut applied.inputs).enumerate() {
                    if new != *old {
                        for &at in &self.input_patches[n] {
                            self.write_kernarg(at, &new.to_le_bytes());
                        }
                        if let Some(c) = &self.copies {
                            c.patch(&c.patches[n], new);
                        }
                        *old = new;
                    }
                }
            }
            if vars_changed {
                for (n, (&new, old)) in values.vars.iter().zip(&mut applied.vars).enumerate() {
                    if new != *old {
                        for &at in &self.var_patches[n] {
                            self.write_kernarg(at, &new.to_le_bytes());
                        }
                        *old = new;
                    }
                }
            }
            if dims_changed {
                let new = values.dims.unwrap_or_default();
                let old = applied.dims.take();
                self.edit_stream(|words| {
                    for (k, (p, &(global, local))) in self.dim_patches.iter().zip(new).enumerate() {
                        if old.as_ref().map(|d| d[k]) == Some((global, local)) {
                            continue;
                        }
                        p.dispatch.set_dims(words, global, local);
                        self.patch_hidden_dims(p, global, local);
                    }
                });
                applied.dims = Some(new.to_vec());
            }
        }
        let value = st.timeline_value;
        let st = &mut *st;
        if let Some(c) = &self.copies {
            c.sync.write(0, &[0; 16]);
            let s = &mut st.sdma_builder;
            s.clear();
            s.wait(st.timeline.value_addr(), value - 1);
            s.indirect(c.stream.va, c.dwords as u32);
            st.sdma
                .submit_packets(st.sdma_builder.packets(), dev.timeout)?;
        }
        let b = &mut st.builder;
        b.clear();
        b.wait(st.timeline.value_addr(), value - 1);
        if self.stream_dwords > 0 {
            b.indirect_buffer(self.stream.va, self.first_segment_dwords);
        }
        if let Some(c) = &self.copies {
            b.wait(c.sync.va + COPY_SYNC, c.last.into());
        }
        b.signal(
            st.timeline.value_addr(),
            value,
            st.timeline.event_mailbox_ptr,
            st.timeline.event_id,
        );
        st.queue.submit(&b.words, dev.timeout)?;
        st.timeline_value += 1;
        applied.last_submission = Some((st.timeline_swaps, value));
        Ok(())
    }

    fn patch_hidden_dims(&self, p: &DimPatch, global: [u32; 3], local: [u32; 3]) {
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
            self.write_kernarg(at, &value.to_le_bytes()[..size]);
        }
        if let Some((aql_at, segment_at)) = p.aql {
            let packet =
                aql_dispatch_packet(&p.descriptor, global, local, self.kernargs.va + segment_at);
            self.write_kernarg(aql_at, &packet);
        }
    }
}

fn bytemuck_words(words: &[u32]) -> &[u8] {
    // SAFETY: any u32 slice is a valid byte slice of four times its length.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, words.len() * 4) }
}
