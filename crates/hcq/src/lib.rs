//! # hcq
//!
//! A GPU compute runtime built on hardware command queues: it talks to the kernel driver
//! directly, writes the GPU's command packets into rings it owns and rings the doorbell itself.
//!
//! ```
//! # fn main() -> hcq::Result<()> {
//! // HCQ_DEVICE, else a real AMD GPU, else (without /dev/kfd) amd-emu:0
//! let dev = hcq::Device::default_device()?;
//! let lib = dev.compile("__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }")?;
//! let prg = dev.program(&lib, "twice")?;
//! let buf = dev.alloc(64 * 4)?;
//! buf.write(&[1.5f32; 64])?;
//! prg.launch(&[hcq::Arg::Buffer(&buf)], [1, 1, 1], [64, 1, 1])?;
//! let out: Vec<f32> = buf.read()?;
//! assert_eq!(out, [3.0f32; 64]);
//! # Ok(()) }
//! ```
//!
//! ## Devices
//! - `amd:N` (Linux): the N-th AMD GPU of `/dev/kfd` (no ROCm needed).
//! - `amd-emu:N` (Linux): the N-th emulated gfx1100 GPU (`HCQ_EMU_GPUS` of them, default 1),
//!   which runs the real machine code in an interpreter below the same driver.
//! - `metal:N` (macOS): the N-th Metal device of `MTLCopyAllDevices()`; kernels are Metal
//!   Shading Language; graphs of launches become an indirect command buffer. It has never run
//!   on a Mac.
//!
//! ## Contracts
//! - Work on one queue executes in submission order. Copies wait for the work queued before
//!   them; launches return as soon as the work is queued. A device has its own queue and any
//!   number of [`Stream`]s, which run independently of each other; an [`Event`] orders them.
//! - A fault on the GPU (bad memory access, illegal instruction) surfaces as
//!   [`Error::DeviceFault`] from the next wait on that device. A GPU memory fault ends the
//!   device for the rest of the process, as Linux does: KFD stops every queue the process has
//!   on that GPU and never restarts them, so every later launch, copy, replay or wait for
//!   unfinished work fails at once with [`Error::DeviceLost`] (the emulated GPU does the
//!   same). Faults the emulator reports that a real GPU would not (an instruction it does not
//!   model, an LDS access out of range, a wave over `HCQ_EMU_MAX_STEPS`) end only the
//!   dispatch: the device goes on.
//! - Every wait is bounded by `HCQ_WAIT_TIMEOUT_MS` (default 30000) and ends in
//!   [`Error::Timeout`] (on AMD: when the GPU finished nothing for that long; a long queue that
//!   keeps advancing is waited for). The device is then stuck short of the value it waited for: until the
//!   GPU reaches it (the kernel ends or faults; on the emulator after `HCQ_EMU_MAX_STEPS`
//!   instructions per wave), waits that need it, drops included, fail at once with `Timeout`
//!   instead of waiting again; after that it works as before.
//! - Dropping a buffer that queued work still uses is safe: on AMD its memory goes to the
//!   device's cache, is reused only by work queued later (which runs after; with several
//!   streams open, only once every stream has finished the work queued before the drop), and
//!   is freed only once queued work has finished; Metal keeps it alive for its command
//!   buffers.
//! - What a fresh buffer holds is unspecified (dropped buffers are reused);
//!   [`Device::alloc_zeros`] gives zeros. [`Buffer::fill`] and every copy are ordered with the
//!   launches around them. Pinned host memory ([`Device::alloc_host`]) is also reached from
//!   the host at once ([`Buffer::host_write_at`], [`Buffer::host_read_range`]), without that
//!   order: synchronize first.
//! - A device whose kernel driver gives it no copy engine copies on its compute queue, with
//!   the same results and order ([`ComputeInfo::copy_engine_missing`] says why).
//! - [`Buffer::view`] gives part of a buffer as a buffer; [`Program::launch_with`] takes
//!   [`LaunchOptions`] (dynamic LDS, timing).
//! - Graphs ([`GraphBuilder`], [`Graph`]) and the [`Jit`] replay captured launches with one
//!   submission, ordered with eager work through the device timeline (see the `graph` module
//!   docs on [`Graph`]).

#![deny(missing_docs)]

mod graph;
mod registry;
mod stream;

pub use graph::{
    DimExpr, DimExprs, Graph, GraphArg, GraphBuf, GraphBuilder, Input, Jit, JitArg, JitRecorder,
    Var, VarSpec,
};

pub use hcq_core::{
    ArgBytes, CacheInfo, CompileOptions, ComputeInfo, DeviceInfo, Error, FaultKind, FaultReport,
    ProgramInfo, Result, ARG_BYTES_MAX, VALUE_KINDS,
};
#[cfg(target_os = "linux")]
pub use registry::{
    emulator_counters, hold_emulated_engines, real_amd_unavailable, EmulatorCounters,
};
pub use registry::{list_devices, DeviceListing};
pub use stream::{Event, Stream};

#[cfg(target_os = "linux")]
use hcq_amd::{AmdBuffer, AmdDevice, AmdProgram};
#[cfg(target_os = "macos")]
use hcq_metal::{MetalBuffer, MetalProgram, ObjcMetal};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Compiles HIP source for an AMD target (`gfx1100`, ...) without opening a device. Quoted
/// `#include`s resolve from the working directory, as with `clang -x hip -`.
#[cfg(target_os = "linux")]
pub fn compile_hip(source: &str, arch: &str) -> Result<Vec<u8>> {
    hcq_amd::compiler::HipCompiler::new(arch, hcq_core::CompileCache::from_env()).compile(source)
}

/// Compiles a HIP source file for an AMD target without opening a device. Its
/// `#include "..."`s resolve relative to the file, as with clang or hipcc, from any working
/// directory; the cached object is used only while every file the compile read is unchanged.
#[cfg(target_os = "linux")]
pub fn compile_hip_file(path: impl AsRef<std::path::Path>, arch: &str) -> Result<Vec<u8>> {
    compile_hip_file_with(path, arch, &CompileOptions::default())
}

/// [`compile_hip_file`] with `options` (`-I`, `-D`, `-O`, other clang flags).
#[cfg(target_os = "linux")]
pub fn compile_hip_file_with(
    path: impl AsRef<std::path::Path>,
    arch: &str,
    options: &CompileOptions,
) -> Result<Vec<u8>> {
    hcq_amd::compiler::HipCompiler::new(arch, hcq_core::CompileCache::from_env())
        .compile_file_with(path.as_ref(), options)
}

/// Ends the compiles running in this process (killing their clang) and removes their
/// temporary files, for a signal handler about to exit the process: the compiles it stops
/// never return, and none starts after. Without it a compile still never outlives the
/// process (clang is killed when it ends), but clang's temporary files may remain until the
/// next compile removes them.
#[cfg(target_os = "linux")]
pub fn stop_compiles_for_exit() {
    hcq_amd::compiler::stop_compiles_for_exit();
}

/// Records a Chrome trace (open it in Perfetto) of every kernel, copy and graph replay into
/// `path`. The file is created (or truncated) now, so a path that cannot be written is an error
/// here; it is the only file the trace touches. Events are added at every synchronisation and
/// failed wait, each time leaving a complete JSON document; [`trace_finish`] adds the rest and
/// reports any error writing it. A trace in progress is finished first (its error, if any, is
/// returned instead). `HCQ_TRACE=path` starts one when the first device opens, which fails if
/// the file cannot be written.
#[cfg(target_os = "linux")]
pub fn trace_to(path: impl Into<std::path::PathBuf>) -> Result<()> {
    hcq_amd::trace::start(path)
}

/// Starts the trace `HCQ_TRACE` names, if it is set and no trace was started with
/// [`trace_to`]; opening a device does this too. For tools that want the error up front.
#[cfg(target_os = "linux")]
pub fn trace_from_env() -> Result<()> {
    hcq_amd::trace::start_from_env()
}

/// Ends the trace: adds what every open device has run since the last synchronisation (a
/// command still running, such as a kernel whose wait timed out, as an unfinished span ending
/// now), closes the document and returns the first error writing the file, if any. Without a
/// trace, does nothing.
#[cfg(target_os = "linux")]
pub fn trace_finish() -> Result<()> {
    if hcq_amd::trace::enabled() {
        for device in registry::open_devices() {
            let Backend::Amd(d) = &*device.backend;
            // A write error here stays with the trace; `finish` reports it.
            let _ = d.settle_trace();
        }
    }
    hcq_amd::trace::finish()
}

/// A kernel argument: a buffer or a scalar, in kernel-signature order.
pub type Arg<'a> = hcq_core::Arg<&'a Buffer>;

/// A by-value kernel argument held apart from any buffer (parsed from a command line, kept in
/// a graph): [`Arg::map_scalar`] turns it into an [`Arg`].
pub type ValueArg = hcq_core::Arg<()>;

enum Backend {
    #[cfg(target_os = "linux")]
    Amd(AmdDevice),
    #[cfg(target_os = "macos")]
    Metal(hcq_metal::ThreadSafeMetalDevice),
}

/// The Metal buffer behind a buffer argument (every buffer of a Metal device is one).
#[cfg(target_os = "macos")]
fn metal_buffer<'b>(b: &'b &Buffer) -> Result<(&'b MetalBuffer<ObjcMetal>, usize)> {
    match &b.shared.inner {
        BufferInner::Metal(mb) => Ok((mb, b.offset)),
    }
}

/// The queue an operation goes to: a device's own, or a stream's.
#[derive(Clone, Copy)]
enum Queue<'a> {
    #[cfg(target_os = "linux")]
    Amd(&'a AmdDevice),
    #[cfg(target_os = "macos")]
    Metal(&'a hcq_metal::ThreadSafeMetalDevice),
}

/// An opened GPU. Cloning is cheap; clones share the device.
#[derive(Clone)]
pub struct Device {
    backend: Arc<Backend>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.name())
    }
}

impl Device {
    /// Opens a device by name (`amd:0`, `amd-emu:1`, `metal:0`). Opening the same name twice gives the same
    /// device.
    pub fn open(name: &str) -> Result<Device> {
        registry::open(name)
    }

    /// A device over an AMD driver the caller opened on a kernel of its choosing (a private
    /// `hcq_emu::EmuKernel`, or one wrapped in `hcq_amd_sys::seam::FaultInjector`), outside
    /// the registry that [`Device::open`] uses: it is not shared with devices opened by name,
    /// and it closes (its queues, memory, and the driver once no device uses it) when the
    /// last clone and the last buffer, program and graph using it are dropped.
    #[cfg(target_os = "linux")]
    pub fn from_amd(device: AmdDevice) -> Device {
        Device {
            backend: Arc::new(Backend::Amd(device)),
        }
    }

    /// The device `HCQ_DEVICE` names; else, on Linux, the first real AMD GPU, else `amd-emu:0`;
    /// on macOS, `metal:0`. A Linux machine with an AMD GPU driver that hcq cannot use (no
    /// permission on `/dev/kfd`, a kernel driver too old) is an [`Error::NoDevice`] saying why,
    /// not a quiet fall back to the emulator.
    pub fn default_device() -> Result<Device> {
        Device::open(&registry::default_name()?)
    }

    /// The device's name, as [`Device::open`] takes it (`amd-emu:0`, `metal:0`).
    pub fn name(&self) -> &str {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => &d.name,
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => &d.name,
        }
    }

    /// The device's number among those of its kind: the `N` of `amd:N`, `amd-emu:N` or
    /// `metal:N` (what DLPack and HIP call the device id).
    pub fn index(&self) -> usize {
        registry::index_of(self.name())
    }

    /// What the device is: name, architecture, memory, whether it is emulated, and its compute
    /// shape where the backend reports it.
    pub fn info(&self) -> DeviceInfo {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.info(),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => d.info(),
        }
    }

    /// Allocates `size` bytes of device memory. What a fresh buffer holds is unspecified:
    /// memory of dropped buffers is reused (and the kernel driver does not promise zeroed
    /// pages either); [`Device::alloc_zeros`] gives zeros.
    pub fn alloc(&self, size: usize) -> Result<Buffer> {
        let inner = match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => BufferInner::Amd(d.alloc(size as u64)?),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => BufferInner::Metal(d.alloc(size)?),
        };
        Ok(self.buffer(inner, size))
    }

    fn buffer(&self, inner: BufferInner, size: usize) -> Buffer {
        Buffer {
            shared: Arc::new(BufferShared {
                device: self.clone(),
                inner,
            }),
            offset: 0,
            size,
        }
    }

    /// Allocates `size` bytes of host memory the device reaches directly (pinned, as ROCm's
    /// `hipHostMalloc`): kernels read and write it in place, copies to and from device buffers
    /// need no staging, and the host reads and writes it at once with
    /// [`Buffer::host_write_at`] and [`Buffer::host_read_range`]. On AMD it is GTT memory;
    /// Metal buffers are all in memory the host shares, so there it is [`Device::alloc`].
    pub fn alloc_host(&self, size: usize) -> Result<Buffer> {
        let inner = match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => BufferInner::Amd(d.alloc_host(size as u64)?),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => BufferInner::Metal(d.alloc(size)?),
        };
        Ok(self.buffer(inner, size))
    }

    /// Allocates `n` values of `T`, all bits zero, filled on the device (ordered before any
    /// work queued afterwards).
    pub fn alloc_zeros<T: bytemuck::Pod>(&self, n: usize) -> Result<Buffer> {
        let size = n.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{n} values of {} bytes overflow the address space",
                std::mem::size_of::<T>()
            ))
        })?;
        let buf = self.alloc(size)?;
        buf.fill(0u8)?;
        Ok(buf)
    }

    /// Compiles kernel source for this device (HIP C++ for AMD, MSL for Metal) into a code object, through the
    /// on-disk compile cache.
    pub fn compile(&self, source: &str) -> Result<Vec<u8>> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.compile(source),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => d.compile(source),
        }
    }

    /// Compiles a kernel source file for this device, through the on-disk compile cache. HIP's
    /// `#include "..."`s resolve relative to the file, as with clang or hipcc, and the cached
    /// object is used only while every file the compile read is unchanged.
    pub fn compile_file(&self, path: impl AsRef<std::path::Path>) -> Result<Vec<u8>> {
        let path = path.as_ref();
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.compile_file(path),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => {
                let source = std::fs::read_to_string(path).map_err(|source| Error::Io {
                    what: format!("reading {}", path.display()),
                    source,
                })?;
                if source.trim().is_empty() {
                    return Err(Error::InvalidArgument(format!(
                        "{} is empty: there is no kernel to compile",
                        path.display()
                    )));
                }
                d.compile(&source)
            }
        }
    }

    /// [`Device::compile`] with `options`: include directories (`-I`), macros (`-D`), the
    /// optimisation level (`-O`) and other compiler flags, all part of the compile cache's
    /// key. A directory that does not exist, a bad macro name or a flag that would break the
    /// compile (`-o`, `-E`, `--offload-arch`, ...) is an [`Error::InvalidArgument`]. AMD
    /// only: Metal says `Unsupported` unless `options` is empty.
    pub fn compile_with(&self, source: &str, options: &CompileOptions) -> Result<Vec<u8>> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.compile_with(source, options),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => {
                Self::metal_takes_no_options(options)?;
                d.compile(source)
            }
        }
    }

    /// [`Device::compile_file`] with `options` ([`Device::compile_with`]).
    pub fn compile_file_with(
        &self,
        path: impl AsRef<std::path::Path>,
        options: &CompileOptions,
    ) -> Result<Vec<u8>> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.compile_file_with(path.as_ref(), options),
            #[cfg(target_os = "macos")]
            Backend::Metal(_) => {
                Self::metal_takes_no_options(options)?;
                self.compile_file(path)
            }
        }
    }

    #[cfg(target_os = "macos")]
    fn metal_takes_no_options(options: &CompileOptions) -> Result<()> {
        if options.is_default() {
            return Ok(());
        }
        Err(Error::Unsupported(
            "compile options for Metal Shading Language".into(),
        ))
    }

    /// Loads kernel `name` from a code object.
    pub fn program(&self, code_object: &[u8], name: &str) -> Result<Program> {
        let inner = match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => ProgramInner::Amd(d.load_program(code_object, name)?),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => ProgramInner::Metal(d.load_program(code_object, name)?),
        };
        Ok(Program {
            shared: Arc::new(ProgramShared {
                device: self.clone(),
                inner,
                name: name.to_string(),
            }),
        })
    }

    /// Frees the device memory that dropped buffers left in the allocator's cache (after the
    /// queued work finishes); returns the bytes released. Allocation does this by itself before
    /// reporting `OutOfMemory`.
    pub fn free_cached(&self) -> Result<u64> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.free_cached(),
            // Metal buffers go back to the system when dropped: nothing is cached.
            #[cfg(target_os = "macos")]
            Backend::Metal(_) => Ok(0),
        }
    }

    /// Waits for all queued work: on the device's own queue and on every stream opened from
    /// it ([`Stream::synchronize`] waits for one stream).
    pub fn synchronize(&self) -> Result<()> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.synchronize_streams(),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => d.synchronize_streams(),
        }
    }

    /// Dwords the last submission wrote to the command ring (a diagnostic for benchmarks).
    pub fn last_submission_dwords(&self) -> u64 {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.last_submission_dwords(),
            // Metal has no command ring of ours.
            #[cfg(target_os = "macos")]
            Backend::Metal(_) => 0,
        }
    }

    /// Capacity of the command ring in dwords (a diagnostic for benchmarks).
    pub fn ring_capacity_dwords(&self) -> u64 {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => d.ring_capacity_dwords(),
            #[cfg(target_os = "macos")]
            Backend::Metal(_) => 0,
        }
    }

    fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.backend, &other.backend)
    }

    /// The device's own queue.
    fn queue(&self) -> Queue<'_> {
        match &*self.backend {
            #[cfg(target_os = "linux")]
            Backend::Amd(d) => Queue::Amd(d),
            #[cfg(target_os = "macos")]
            Backend::Metal(d) => Queue::Metal(d),
        }
    }
}

enum BufferInner {
    #[cfg(target_os = "linux")]
    Amd(AmdBuffer),
    #[cfg(target_os = "macos")]
    Metal(MetalBuffer<ObjcMetal>),
}

/// Device memory, or a view of part of it ([`Buffer::view`]). Cloning is cheap: clones and
/// views share the memory, which is freed when the last of them is dropped (graphs hold clones
/// of the buffers they use).
#[derive(Clone)]
pub struct Buffer {
    shared: Arc<BufferShared>,
    /// Where this buffer starts in its allocation, and its length.
    offset: usize,
    size: usize,
}

struct BufferShared {
    device: Device,
    inner: BufferInner,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} bytes", self.size)?;
        if self.offset > 0 {
            write!(f, " at offset {}", self.offset)?;
        }
        write!(f, " on {})", self.shared.device.name())
    }
}

impl Buffer {
    /// Bytes, as allocated (a view's own length).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device that holds it (kept open as long as the buffer lives).
    pub fn device(&self) -> &Device {
        &self.shared.device
    }

    /// Where this buffer starts in its allocation (0 unless it is a view).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The address a kernel receives for this buffer (a view's own start), for handing the
    /// memory to other libraries (DLPack, HIP interop). On AMD it is the GPU virtual address,
    /// where the host has the memory mapped too. It stays valid while any buffer or view of the
    /// memory lives. Metal buffers have no plain address: `Unsupported`.
    pub fn device_address(&self) -> Result<u64> {
        match &self.shared.inner {
            #[cfg(target_os = "linux")]
            BufferInner::Amd(b) => Ok(b.gpu_address() + self.offset as u64),
            #[cfg(target_os = "macos")]
            BufferInner::Metal(_) => Err(Error::Unsupported(
                "device addresses of Metal buffers (bind the buffer instead)".into(),
            )),
        }
    }

    /// The `size` bytes at `offset` of this buffer, as a buffer of its own that shares the
    /// memory: kernels receive its start address, copies stay inside it. A range past the
    /// end is an [`Error::InvalidArgument`].
    pub fn view(&self, offset: usize, size: usize) -> Result<Buffer> {
        let start = self.within(offset, size, "view")?;
        Ok(Buffer {
            shared: self.shared.clone(),
            offset: start,
            size,
        })
    }

    /// The allocation offset of `len` bytes at `offset` of this buffer, checked to lie inside
    /// it.
    fn within(&self, offset: usize, len: usize, what: &str) -> Result<usize> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(self.offset + offset),
            _ => Err(Error::InvalidArgument(format!(
                "{what} of {len} bytes at offset {offset} exceeds the {}-byte buffer",
                self.size
            ))),
        }
    }

    /// Copies host bytes into the buffer at `offset`, after the work queued on its device
    /// (its own queue: see [`Stream::copy_in`] for a stream's). Returns once the bytes are
    /// taken (`src` may be reused); the copy completes in order.
    pub fn copy_in(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.copy_in_on(self.device().queue(), offset, src)
    }

    fn copy_in_on(&self, queue: Queue<'_>, offset: usize, src: &[u8]) -> Result<()> {
        let at = self.within(offset, src.len(), "copy")?;
        match (queue, &self.shared.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(d), BufferInner::Amd(b)) => d.copy_in(b, at as u64, src),
            #[cfg(target_os = "macos")]
            (Queue::Metal(d), BufferInner::Metal(b)) => d.copy_in(b, at, src),
        }
    }

    /// Copies bytes out of the buffer at `offset` into `dst`, after the work queued on its
    /// device's own queue, and returns once they are there.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.copy_out_on(self.device().queue(), offset, dst)
    }

    fn copy_out_on(&self, queue: Queue<'_>, offset: usize, dst: &mut [u8]) -> Result<()> {
        let at = self.within(offset, dst.len(), "copy")?;
        match (queue, &self.shared.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(d), BufferInner::Amd(b)) => d.copy_out(dst, b, at as u64),
            #[cfg(target_os = "macos")]
            (Queue::Metal(d), BufferInner::Metal(b)) => d.copy_out(dst, b, at),
        }
    }

    /// Copies `size` bytes from this buffer at `src_offset` into `dst` at `dst_offset`, on the
    /// GPU (between two GPUs, without passing through the host). Ordered after the work queued
    /// on both devices; work queued on `dst`'s device afterwards sees the data.
    pub fn copy_to(
        &self,
        src_offset: usize,
        dst: &Buffer,
        dst_offset: usize,
        size: usize,
    ) -> Result<()> {
        let (src_queue, dst_queue) = (self.device().queue(), dst.device().queue());
        self.copy_to_on(src_queue, src_offset, dst, dst_queue, dst_offset, size)
    }

    /// [`Buffer::copy_to`] by `src_queue` (of this buffer's GPU), ordered before the work
    /// queued on `dst_queue` (of `dst`'s) afterwards.
    fn copy_to_on(
        &self,
        src_queue: Queue<'_>,
        src_offset: usize,
        dst: &Buffer,
        dst_queue: Queue<'_>,
        dst_offset: usize,
        size: usize,
    ) -> Result<()> {
        let src_at = self.within(src_offset, size, "copy")?;
        let dst_at = dst.within(dst_offset, size, "copy")?;
        match (src_queue, &self.shared.inner, dst_queue, &dst.shared.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(s), BufferInner::Amd(sb), Queue::Amd(d), BufferInner::Amd(db)) => {
                s.transfer(d, db, dst_at as u64, sb, src_at as u64, size as u64)
            }
            // A blit on the device that holds both buffers.
            #[cfg(target_os = "macos")]
            (Queue::Metal(s), BufferInner::Metal(sb), Queue::Metal(_), BufferInner::Metal(db))
                if self.shared.device.same(&dst.shared.device) =>
            {
                s.copy(db, dst_at, sb, src_at, size)
            }
            #[cfg(target_os = "macos")]
            (Queue::Metal(_), _, Queue::Metal(_), _) => Err(Error::Unsupported(format!(
                "copies between Metal devices ({} to {})",
                self.shared.device.name(),
                dst.shared.device.name()
            ))),
        }
    }

    /// Writes a slice of plain values at the start of the buffer.
    pub fn write<T: bytemuck::Pod>(&self, values: &[T]) -> Result<()> {
        self.copy_in(0, bytemuck::cast_slice(values))
    }

    /// Writes a slice of plain values at byte `offset` of the buffer.
    pub fn write_at<T: bytemuck::Pod>(&self, offset: usize, values: &[T]) -> Result<()> {
        self.copy_in(offset, bytemuck::cast_slice(values))
    }

    /// Reads `count` plain values from byte `offset` of the buffer.
    pub fn read_range<T: bytemuck::Pod>(&self, offset: usize, count: usize) -> Result<Vec<T>> {
        let n = std::mem::size_of::<T>();
        count
            .checked_mul(n)
            .and_then(|len| offset.checked_add(len))
            .filter(|&end| end <= self.size)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "read of {count} values of {n} bytes at offset {offset} exceeds the \
                     {}-byte buffer",
                    self.size
                ))
            })?;
        let mut out = vec![T::zeroed(); count];
        self.copy_out(offset, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Reads the buffer's first `out.len()` values into `out`, without allocating.
    pub fn read_into<T: bytemuck::Pod>(&self, out: &mut [T]) -> Result<()> {
        self.copy_out(0, bytemuck::cast_slice_mut(out))
    }

    /// Whether the host reads and writes this buffer in place ([`Device::alloc_host`]).
    pub fn is_host(&self) -> bool {
        match &self.shared.inner {
            #[cfg(target_os = "linux")]
            BufferInner::Amd(b) => b.is_host(),
            #[cfg(target_os = "macos")]
            BufferInner::Metal(_) => true,
        }
    }

    /// Writes plain values at byte `offset` of a host buffer ([`Device::alloc_host`]) at once,
    /// from the host. Unlike [`Buffer::copy_in`] this is not ordered with queued work: a
    /// kernel still running on the buffer may see the old or the new values, so synchronize
    /// first when one may be. A device buffer is an [`Error::InvalidArgument`].
    pub fn host_write_at<T: bytemuck::Pod>(&self, offset: usize, values: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let at = self.within(offset, bytes.len(), "host write")?;
        match &self.shared.inner {
            #[cfg(target_os = "linux")]
            BufferInner::Amd(b) => {
                self.host_only(b.is_host())?;
                b.memory().write(at as u64, bytes)
            }
            #[cfg(target_os = "macos")]
            BufferInner::Metal(_) => {
                let _ = at;
                self.copy_in(offset, bytes)
            }
        }
    }

    /// Reads `count` plain values from byte `offset` of a host buffer at once, from the host:
    /// what the device has written and made visible (after [`Device::synchronize`], all of
    /// it). A device buffer is an [`Error::InvalidArgument`].
    pub fn host_read_range<T: bytemuck::Pod>(&self, offset: usize, count: usize) -> Result<Vec<T>> {
        let n = std::mem::size_of::<T>();
        let len = count.checked_mul(n).ok_or_else(|| {
            Error::InvalidArgument(format!("{count} values of {n} bytes overflow"))
        })?;
        let at = self.within(offset, len, "host read")?;
        let mut out = vec![T::zeroed(); count];
        match &self.shared.inner {
            #[cfg(target_os = "linux")]
            BufferInner::Amd(b) => {
                self.host_only(b.is_host())?;
                b.memory()
                    .read(at as u64, bytemuck::cast_slice_mut(&mut out))?;
            }
            #[cfg(target_os = "macos")]
            BufferInner::Metal(_) => {
                let _ = at;
                self.copy_out(offset, bytemuck::cast_slice_mut(&mut out))?;
            }
        }
        Ok(out)
    }

    #[cfg(target_os = "linux")]
    fn host_only(&self, host: bool) -> Result<()> {
        if host {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{self:?} is device memory: the host reaches it with copy_in and copy_out; \
             Device::alloc_host makes buffers it reads and writes in place"
        )))
    }

    /// Sets every value of the buffer to `value`, on the device, after the work queued before
    /// it and before the work queued after it (HIP's `hipMemsetD8/D16/D32`). `T` is 1, 2 or 4
    /// bytes wide and the buffer a whole number of them. On AMD the copy engine's constant
    /// fill does it (no host data moves but the up to 3 bytes at each end of an unaligned
    /// view); on Metal the pattern is written from the host.
    pub fn fill<T: bytemuck::Pod>(&self, value: T) -> Result<()> {
        self.fill_on(self.device().queue(), value)
    }

    fn fill_on<T: bytemuck::Pod>(&self, queue: Queue<'_>, value: T) -> Result<()> {
        let pattern = bytemuck::bytes_of(&value);
        let n = pattern.len();
        if !matches!(n, 1 | 2 | 4) {
            return Err(Error::InvalidArgument(format!(
                "fill takes values of 1, 2 or 4 bytes, not {n}"
            )));
        }
        if !self.size.is_multiple_of(n) {
            return Err(Error::InvalidArgument(format!(
                "a {}-byte buffer is not a whole number of {n}-byte values",
                self.size
            )));
        }
        match (queue, &self.shared.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(d), BufferInner::Amd(b)) => {
                d.fill(b, self.offset as u64, self.size as u64, pattern)
            }
            #[cfg(target_os = "macos")]
            (Queue::Metal(_), BufferInner::Metal(_)) => {
                let bytes: Vec<u8> = (0..self.size).map(|k| pattern[k % n]).collect();
                self.copy_in_on(queue, 0, &bytes)
            }
        }
    }

    /// Reads the whole buffer as plain values (the size must be a multiple of `T`'s).
    pub fn read<T: bytemuck::Pod>(&self) -> Result<Vec<T>> {
        let n = std::mem::size_of::<T>();
        if n == 0 || !self.size.is_multiple_of(n) {
            return Err(Error::InvalidArgument(format!(
                "{}-byte buffer is not a whole number of {n}-byte values",
                self.size
            )));
        }
        let mut out = vec![T::zeroed(); self.size / n];
        self.copy_out(0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}

enum ProgramInner {
    #[cfg(target_os = "linux")]
    Amd(AmdProgram),
    #[cfg(target_os = "macos")]
    Metal(MetalProgram<ObjcMetal>),
}

/// A kernel loaded on a device. Cloning is cheap: clones share the loaded code, which is freed
/// when the last one is dropped (graphs hold clones of the programs they launch).
#[derive(Clone)]
pub struct Program {
    shared: Arc<ProgramShared>,
}

struct ProgramShared {
    device: Device,
    inner: ProgramInner,
    name: String,
}

impl Drop for ProgramShared {
    fn drop(&mut self) {
        // Queued launches may still execute this program's code; its memory goes only after.
        #[cfg(target_os = "linux")]
        if self.device.synchronize().is_err() {
            // They may still be running (a wait timed out): the device keeps the code until
            // they have finished.
            let (Backend::Amd(d), ProgramInner::Amd(p)) = (&*self.device.backend, &self.inner);
            d.free_after_work(p.image.clone());
        }
        #[cfg(target_os = "macos")]
        let _ = self.device.synchronize();
    }
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Program({} on {})",
            self.shared.name,
            self.shared.device.name()
        )
    }
}

impl Program {
    /// The kernel's name, as its code object gives it.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The device it was loaded on (kept open as long as the program lives).
    pub fn device(&self) -> &Device {
        &self.shared.device
    }

    /// The kernel's registers, LDS, scratch, largest workgroup and wave size, from its code
    /// object, and the waves per SIMD they allow on the device it was loaded on (as LLVM
    /// computes occupancy). AMD only: a Metal program says `Unsupported`.
    pub fn info(&self) -> Result<ProgramInfo> {
        match &self.shared.inner {
            #[cfg(target_os = "linux")]
            ProgramInner::Amd(p) => Ok(p.info.clone()),
            #[cfg(target_os = "macos")]
            ProgramInner::Metal(_) => Err(Error::Unsupported(
                "program resources and occupancy are reported for AMD kernels only".into(),
            )),
        }
    }

    /// The arguments a caller passes, in order, as the code object's metadata declares them
    /// (the hidden ones the runtime fills in are left out), so that a tool can check what it
    /// is about to pass before preparing it. `None` when the kernel carries no such metadata
    /// (a Metal kernel, or an AMD code object without argument metadata): then only
    /// [`Program::launch`] checks the arguments.
    pub fn arguments(&self) -> Option<Vec<ArgInfo>> {
        match &self.shared.inner {
            #[cfg(target_os = "linux")]
            ProgramInner::Amd(p) => {
                if p.args.is_empty() {
                    return None;
                }
                let explicit = p.args.iter().filter(|a| a.is_explicit());
                Some(
                    explicit
                        .map(|a| ArgInfo {
                            name: a.name.clone(),
                            kind: match &a.kind {
                                hcq_amd::program::ArgKind::Buffer => ArgKind::Buffer,
                                hcq_amd::program::ArgKind::Value => {
                                    ArgKind::Value { bytes: a.size }
                                }
                                hcq_amd::program::ArgKind::Hidden(k)
                                | hcq_amd::program::ArgKind::Other(k) => ArgKind::Other(k.clone()),
                            },
                        })
                        .collect(),
                )
            }
            #[cfg(target_os = "macos")]
            ProgramInner::Metal(_) => None,
        }
    }

    fn check_args(&self, args: &[Arg<'_>]) -> Result<()> {
        for (i, a) in args.iter().enumerate() {
            if let hcq_core::Arg::Buffer(b) = a {
                if !b.shared.device.same(&self.shared.device) {
                    return Err(Error::InvalidArgument(format!(
                        "argument {i} of {} is a buffer on {}, the kernel runs on {}",
                        self.shared.name,
                        b.shared.device.name(),
                        self.shared.device.name()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Queues the kernel over `global` workgroups of `local` work-items and returns at once.
    pub fn launch(&self, args: &[Arg<'_>], global: [u32; 3], local: [u32; 3]) -> Result<()> {
        self.launch_with(args, global, local, &LaunchOptions::default())
            .map(|_| ())
    }

    /// Runs the kernel, waits for it, and returns its GPU time.
    pub fn launch_timed(
        &self,
        args: &[Arg<'_>],
        global: [u32; 3],
        local: [u32; 3],
    ) -> Result<Duration> {
        let timed = LaunchOptions {
            timed: true,
            ..Default::default()
        };
        self.launch_with(args, global, local, &timed)
            .map(|t| t.unwrap_or_default())
    }

    /// Launches with `options`: returns the GPU time when `options.timed` (after waiting for
    /// the kernel), else `None` at once.
    pub fn launch_with(
        &self,
        args: &[Arg<'_>],
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>> {
        self.launch_on(self.device().queue(), args, global, local, options)
    }

    fn launch_on(
        &self,
        queue: Queue<'_>,
        args: &[Arg<'_>],
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>> {
        self.check_args(args)?;
        let LaunchOptions {
            dynamic_lds_bytes,
            timed,
        } = *options;
        match (queue, &self.shared.inner) {
            #[cfg(target_os = "linux")]
            (Queue::Amd(d), ProgramInner::Amd(p)) => {
                let address_of = |b: &&Buffer| match &b.shared.inner {
                    BufferInner::Amd(ab) => Ok(ab.gpu_address() + b.offset as u64),
                };
                d.launch_with_lds(p, args, address_of, global, local, dynamic_lds_bytes, timed)
            }
            #[cfg(target_os = "macos")]
            (Queue::Metal(d), ProgramInner::Metal(p)) => d.launch_at(
                p,
                args,
                metal_buffer,
                global,
                local,
                dynamic_lds_bytes as usize,
                timed,
            ),
        }
    }
}

/// One argument of a kernel, from its metadata ([`Program::arguments`]).
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

/// Launch settings beyond the grid; [`Default`] is what [`Program::launch`] uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Bytes of LDS per workgroup beyond what the kernel declares: the size of HIP's
    /// `extern __shared__` array (at most 64 KiB in all), or on Metal the threadgroup memory
    /// of the kernel's `[[threadgroup(0)]]` argument (at most 32 KiB).
    pub dynamic_lds_bytes: u32,
    /// Wait for the kernel and return its GPU time.
    pub timed: bool,
}
