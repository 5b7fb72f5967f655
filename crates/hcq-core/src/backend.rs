//! The contract between the `hcq` facade and a backend (AMD over KFD, Metal): [`Backend`].
//!
//! A backend is its device type. The same type is a queue: the device's own, or a stream opened
//! from it ([`Backend::open_stream`]), so every method that queues work takes the queue as
//! `self`. Its associated types are what the facade wraps: [`Backend::Buffer`] (an
//! allocation), [`Backend::Program`] (a loaded kernel), [`Backend::Event`] (a point in a
//! queue's work) and [`Backend::Graph`] (a lowered [`Recording`]).
//!
//! What the facade does before it calls a backend, so that no backend repeats it:
//! - a buffer is handed over as a [`BufferAt`]: the allocation and the byte range of the
//!   facade's buffer (a view) in it, with every range already checked to lie inside;
//! - a launch's buffers are on the queue's device and a program is launched on its device's
//!   queues only;
//! - a replay passes one buffer per input, of the input's size and device, and one value per
//!   variable, within its bounds;
//! - a recorded graph has at least one item, its handles are its own and each launch's
//!   buffers and inputs are on the launch's device.
//!
//! What every backend promises: the contracts in the `hcq` crate's documentation (queue order,
//! faults, timeouts, what a dropped buffer or program may still be used by), errors as
//! [`Error`](crate::Error) values (never a panic), and a graph whose replay fails leaves it
//! usable.

use crate::{Arg, CompileOptions, DeviceInfo, DimExprs, ProgramInfo, Result, VarSpec};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Launch settings beyond the grid; [`Default`] is a plain launch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Bytes of LDS per workgroup beyond what the kernel declares: the size of HIP's
    /// `extern __shared__` array (at most 64 KiB in all), or on Metal the threadgroup memory
    /// of the kernel's `[[threadgroup(0)]]` argument (at most 32 KiB).
    pub dynamic_lds_bytes: u32,
    /// Wait for the kernel and return its GPU time.
    pub timed: bool,
}

/// One argument of a kernel, from its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgInfo {
    /// The parameter's name in the source, when the metadata keeps it.
    pub name: Option<String>,
    /// What the caller passes for it.
    pub kind: ArgKind,
}

/// What a kernel argument takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgKind {
    /// A buffer ([`Arg::Buffer`]).
    Buffer,
    /// A value passed by copy ([`Arg`]'s scalars or [`Arg::Bytes`]) of exactly this size.
    Value {
        /// The value's size.
        bytes: u32,
    },
    /// A kind hcq cannot pass (the metadata's `.value_kind`); launching the kernel fails.
    Other(String),
}

/// A buffer as a backend receives it: the allocation, and where the caller's buffer (the whole
/// allocation, or a view of part of it) lies in it.
#[derive(Debug)]
pub struct BufferAt<'a, B> {
    /// The allocation.
    pub buffer: &'a B,
    /// Where the buffer starts in the allocation.
    pub offset: usize,
    /// The buffer's length.
    pub size: usize,
}

impl<B> Clone for BufferAt<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for BufferAt<'_, B> {}

/// Workgroups per axis and work-items per workgroup of one launch.
pub type LaunchDims = ([u32; 3], [u32; 3]);

/// An argument of a recorded launch.
#[derive(Debug)]
pub enum RecordedArg<'a, B> {
    /// A buffer fixed for the life of the graph.
    Buffer(BufferAt<'a, B>),
    /// Graph input number `n`: the buffer each replay binds.
    Input(usize),
    /// Variable number `n`, passed as an `int32`.
    Var(usize),
    /// A by-value argument fixed for the life of the graph.
    Value(Arg<()>),
}

/// One end of a recorded copy.
#[derive(Debug)]
pub enum RecordedEnd<'a, B> {
    /// A buffer fixed for the life of the graph.
    Buffer(BufferAt<'a, B>),
    /// Graph input number `n`.
    Input(usize),
}

/// A recorded kernel launch.
pub struct RecordedLaunch<'a, D: Backend> {
    /// The launch's device: an index into [`Recording::devices`].
    pub device: usize,
    /// The kernel, loaded on that device.
    pub program: &'a D::Program,
    /// Its arguments, in kernel-signature order.
    pub args: Vec<RecordedArg<'a, D::Buffer>>,
    /// Workgroups per axis.
    pub global: DimExprs,
    /// Work-items per workgroup.
    pub local: DimExprs,
    /// Dynamic LDS bytes per workgroup ([`LaunchOptions::dynamic_lds_bytes`]).
    pub dynamic_lds: u32,
}

impl<D: Backend> RecordedLaunch<'_, D> {
    /// Whether a dimension depends on a variable (and so changes between replays).
    pub fn is_symbolic(&self) -> bool {
        self.global
            .iter()
            .chain(&self.local)
            .any(crate::DimExpr::is_symbolic)
    }
}

/// A recorded device-to-device copy of the first `size` bytes of `src` into `dst` (the size
/// already checked against both).
pub struct RecordedCopy<'a, B> {
    /// The source, on `src_device` (whose copy engine runs the copy).
    pub src: RecordedEnd<'a, B>,
    /// The source's device: an index into [`Recording::devices`].
    pub src_device: usize,
    /// The destination.
    pub dst: RecordedEnd<'a, B>,
    /// The destination's device.
    pub dst_device: usize,
    /// Bytes copied.
    pub size: usize,
}

/// One recorded item.
pub enum RecordedItem<'a, D: Backend> {
    /// A kernel launch.
    Launch(RecordedLaunch<'a, D>),
    /// A copy.
    Copy(RecordedCopy<'a, D::Buffer>),
}

/// A recorded graph, in the backend's own types, for [`Backend::build_graph`] to lower.
pub struct Recording<'a, D: Backend> {
    /// Every device the graph touches, in order of first use; the first leads replays.
    pub devices: Vec<&'a D>,
    /// The variables, in declaration order.
    pub vars: &'a [VarSpec],
    /// Each input's example buffer (bound until the first replay binds its own) and device.
    pub inputs: Vec<(BufferAt<'a, D::Buffer>, usize)>,
    /// The launches and copies, in order.
    pub items: Vec<RecordedItem<'a, D>>,
    /// Split command streams into indirect buffers of at most this many dwords (a test knob
    /// for backends with command streams; others ignore it).
    pub segment_dwords: Option<u32>,
}

impl<D: Backend> Recording<'_, D> {
    /// The recorded launches, in order.
    pub fn launches(&self) -> impl Iterator<Item = &RecordedLaunch<'_, D>> {
        self.items.iter().filter_map(|item| match item {
            RecordedItem::Launch(l) => Some(l),
            RecordedItem::Copy(_) => None,
        })
    }
}

/// What one replay binds, checked by the facade (see the module docs).
pub struct ReplayValues<'a, B> {
    /// One buffer per input, in input order.
    pub inputs: &'a [BufferAt<'a, B>],
    /// One value per variable, in variable order.
    pub vars: &'a [i32],
}

/// One kind of device: the contract every backend implements (see the module docs).
pub trait Backend: Sized {
    /// An allocation of device (or device-reachable host) memory.
    type Buffer;
    /// A kernel loaded on a device.
    type Program;
    /// A point in one queue's work.
    type Event;
    /// A recorded graph lowered for replay.
    type Graph;

    /// The device's name (`amd:0`, `metal:1`; a stream's names its device too).
    fn name(&self) -> &str;
    /// What the device is.
    fn info(&self) -> DeviceInfo;
    /// `size` bytes of device memory (contents unspecified).
    fn alloc(&self, size: usize) -> Result<Self::Buffer>;
    /// `size` bytes of host memory the device reaches directly.
    fn alloc_host(&self, size: usize) -> Result<Self::Buffer>;
    /// Compiles kernel source into a code object, through the compile cache.
    fn compile(&self, source: &str, options: &CompileOptions) -> Result<Vec<u8>>;
    /// Compiles a kernel source file, through the compile cache.
    fn compile_file(&self, path: &Path, options: &CompileOptions) -> Result<Vec<u8>>;
    /// Loads kernel `name` from a code object.
    fn load_program(&self, code_object: &[u8], name: &str) -> Result<Self::Program>;
    /// Frees the memory dropped buffers left cached; the bytes released.
    fn free_cached(&self) -> Result<u64>;
    /// Opens another queue of this device, independent of the others.
    fn open_stream(&self) -> Result<Arc<Self>>;
    /// Waits for the work on this device's own queue and on every stream opened from it.
    fn synchronize_all(&self) -> Result<()>;
    /// Dwords the last submission wrote to the command ring (0 without rings of our own).
    fn last_submission_dwords(&self) -> u64;
    /// Capacity of the command ring in dwords (0 without rings of our own).
    fn ring_capacity_dwords(&self) -> u64;

    /// The address a kernel receives for `buffer`, or `Unsupported`.
    fn device_address(buffer: BufferAt<'_, Self::Buffer>) -> Result<u64>;
    /// Whether the host reads and writes the buffer in place.
    fn is_host(buffer: &Self::Buffer) -> bool;
    /// Writes `bytes` at once from the host, unordered with queued work. Called for host
    /// buffers only.
    fn host_write(&self, buffer: BufferAt<'_, Self::Buffer>, bytes: &[u8]) -> Result<()>;
    /// Reads `out.len()` bytes at once from the host. Called for host buffers only.
    fn host_read(&self, buffer: BufferAt<'_, Self::Buffer>, out: &mut [u8]) -> Result<()>;

    /// The kernel's resources and occupancy, or `Unsupported`.
    fn program_info(program: &Self::Program) -> Result<ProgramInfo>;
    /// The arguments a caller passes, from the code object's metadata, if it has any.
    fn program_arguments(program: &Self::Program) -> Option<Vec<ArgInfo>>;
    /// Called when the last handle to `program` goes: its code must outlive the work queued
    /// with it, which may still run (a wait timed out).
    fn retire_program(&self, program: &Self::Program);

    /// Waits for the work on this queue.
    fn synchronize(&self) -> Result<()>;
    /// Copies `src` into `dst` after the work queued here; returns once `src` is taken.
    fn copy_in(&self, dst: BufferAt<'_, Self::Buffer>, src: &[u8]) -> Result<()>;
    /// Copies `src` into `dst` after the work queued here; returns once the bytes are there.
    fn copy_out(&self, dst: &mut [u8], src: BufferAt<'_, Self::Buffer>) -> Result<()>;
    /// Copies `src` (on this queue's device) into `dst` (on `dst_queue`'s, maybe another
    /// device of the same backend) on the GPU, ordered after the work queued on both queues
    /// and before the work queued on `dst_queue` afterwards.
    fn copy(
        &self,
        src: BufferAt<'_, Self::Buffer>,
        dst_queue: &Self,
        dst: BufferAt<'_, Self::Buffer>,
    ) -> Result<()>;
    /// Sets `buffer` to `pattern` (1, 2 or 4 bytes; the buffer a whole number of them),
    /// ordered with the work around it.
    fn fill(&self, buffer: BufferAt<'_, Self::Buffer>, pattern: &[u8]) -> Result<()>;
    /// Queues `program` with `args`, whose buffers `buffer_of` resolves; with
    /// `options.timed`, waits and returns the GPU time.
    fn launch<B>(
        &self,
        program: &Self::Program,
        args: &[Arg<B>],
        buffer_of: impl Fn(&B) -> Result<BufferAt<'_, Self::Buffer>>,
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>>;
    /// Records an event after the work queued here.
    fn record_event(&self) -> Result<Self::Event>;
    /// Makes the work queued here afterwards wait for `event` (of any queue of the backend).
    fn wait_event(&self, event: &Self::Event) -> Result<()>;
    /// Whether `event` (recorded on this queue) has been reached.
    fn event_is_complete(&self, event: &Self::Event) -> bool;
    /// Blocks until `event` (recorded on this queue) has been reached.
    fn synchronize_event(&self, event: &Self::Event) -> Result<()>;
    /// GPU time between two reached events (`end` recorded on this queue).
    fn elapsed_between(&self, start: &Self::Event, end: &Self::Event) -> Result<Duration>;

    /// Lowers a recorded graph; what the backend cannot replay is `Unsupported`.
    fn build_graph(recording: &Recording<'_, Self>) -> Result<Self::Graph>;
    /// Replays `graph` on `queues`: the queue to replay on for a single-device graph (its
    /// device's own or a stream), else each of the graph's devices in recording order.
    fn replay(
        graph: &Self::Graph,
        queues: &[&Self],
        values: &ReplayValues<'_, Self::Buffer>,
    ) -> Result<()>;
    /// Indirect-buffer segments of the graph's command streams (a diagnostic).
    fn graph_segments(graph: &Self::Graph) -> usize;
    /// Words (or binding slots) a change of `input` rewrites (a diagnostic).
    fn graph_input_patches(graph: &Self::Graph, input: usize) -> usize;
}
