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

#[macro_use]
mod backends;
mod graph;
mod registry;
mod stream;

pub use graph::{
    DimExpr, DimExprs, Graph, GraphArg, GraphBuf, GraphBuilder, Input, Jit, JitArg, JitRecorder,
    Var, VarSpec,
};

pub use hcq_core::{
    ArgBytes, ArgInfo, ArgKind, CacheInfo, CompileOptions, ComputeInfo, DeviceInfo, Error,
    FaultKind, FaultReport, LaunchOptions, ProgramInfo, Result, ARG_BYTES_MAX, VALUE_KINDS,
};
#[cfg(target_os = "linux")]
pub use registry::{
    emulator_counters, hold_emulated_engines, real_amd_unavailable, EmulatorCounters,
};
pub use registry::{list_devices, DeviceListing};
pub use stream::{Event, Stream};

use backends::{foreign, part, whole, AnyBuffer, AnyDevice, AnyProgram, Member};
use hcq_core::Backend;
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
            let AnyDevice::Amd(d) = &device.backend;
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

/// An opened GPU. Cloning is cheap; clones share the device.
#[derive(Clone)]
pub struct Device {
    backend: AnyDevice,
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
    pub fn from_amd(device: hcq_amd::AmdDevice) -> Device {
        Device {
            backend: AnyDevice::Amd(Arc::new(device)),
        }
    }

    /// The device `HCQ_DEVICE` names; else, on Linux, the first real AMD GPU, else `amd-emu:0`;
    /// on macOS, `metal:0`. A Linux machine with an AMD GPU driver that hcq cannot use (no
    /// permission on `/dev/kfd`, a kernel driver too old, only GPUs of an architecture hcq
    /// does not drive) is an [`Error::NoDevice`] saying why, not a quiet fall back to the
    /// emulator.
    pub fn default_device() -> Result<Device> {
        Device::open(&registry::default_name()?)
    }

    /// The device's name, as [`Device::open`] takes it (`amd-emu:0`, `metal:0`).
    pub fn name(&self) -> &str {
        on_backend!(&self.backend, d => Backend::name(d))
    }

    /// The device's number among those of its kind: the `N` of `amd:N`, `amd-emu:N` or
    /// `metal:N` (what DLPack and HIP call the device id).
    pub fn index(&self) -> usize {
        registry::index_of(self.name())
    }

    /// What the device is: name, architecture, memory, whether it is emulated, and its compute
    /// shape where the backend reports it.
    pub fn info(&self) -> DeviceInfo {
        on_backend!(&self.backend, d => Backend::info(d))
    }

    /// Allocates `size` bytes of device memory. What a fresh buffer holds is unspecified:
    /// memory of dropped buffers is reused (and the kernel driver does not promise zeroed
    /// pages either); [`Device::alloc_zeros`] gives zeros.
    pub fn alloc(&self, size: usize) -> Result<Buffer> {
        let inner = on_backend!(&self.backend, d => wrap_buffer(d, Backend::alloc(d, size)?));
        Ok(self.buffer(inner, size))
    }

    fn buffer(&self, inner: AnyBuffer, size: usize) -> Buffer {
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
        let inner = on_backend!(&self.backend, d => wrap_buffer(d, Backend::alloc_host(d, size)?));
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
        self.compile_with(source, &CompileOptions::default())
    }

    /// Compiles a kernel source file for this device, through the on-disk compile cache. HIP's
    /// `#include "..."`s resolve relative to the file, as with clang or hipcc, and the cached
    /// object is used only while every file the compile read is unchanged.
    pub fn compile_file(&self, path: impl AsRef<std::path::Path>) -> Result<Vec<u8>> {
        self.compile_file_with(path, &CompileOptions::default())
    }

    /// [`Device::compile`] with `options`: include directories (`-I`), macros (`-D`), the
    /// optimisation level (`-O`) and other compiler flags, all part of the compile cache's
    /// key. A directory that does not exist, a bad macro name or a flag that would break the
    /// compile (`-o`, `-E`, `--offload-arch`, ...) is an [`Error::InvalidArgument`]. AMD
    /// only: Metal says `Unsupported` unless `options` is empty.
    pub fn compile_with(&self, source: &str, options: &CompileOptions) -> Result<Vec<u8>> {
        on_backend!(&self.backend, d => Backend::compile(d, source, options))
    }

    /// [`Device::compile_file`] with `options` ([`Device::compile_with`]).
    pub fn compile_file_with(
        &self,
        path: impl AsRef<std::path::Path>,
        options: &CompileOptions,
    ) -> Result<Vec<u8>> {
        on_backend!(&self.backend, d => Backend::compile_file(d, path.as_ref(), options))
    }

    /// Loads kernel `name` from a code object.
    pub fn program(&self, code_object: &[u8], name: &str) -> Result<Program> {
        let inner = on_backend!(&self.backend, d => {
            wrap_program(d, Backend::load_program(d, code_object, name)?)
        });
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
    /// reporting `OutOfMemory`. Metal buffers go back to the system when dropped: 0.
    pub fn free_cached(&self) -> Result<u64> {
        on_backend!(&self.backend, d => Backend::free_cached(d))
    }

    /// Waits for all queued work: on the device's own queue and on every stream opened from
    /// it ([`Stream::synchronize`] waits for one stream).
    pub fn synchronize(&self) -> Result<()> {
        on_backend!(&self.backend, d => Backend::synchronize_all(d))
    }

    /// Dwords the last submission wrote to the command ring (a diagnostic for benchmarks; 0
    /// on Metal, which has no command ring of ours).
    pub fn last_submission_dwords(&self) -> u64 {
        on_backend!(&self.backend, d => Backend::last_submission_dwords(d))
    }

    /// Capacity of the command ring in dwords (a diagnostic for benchmarks).
    pub fn ring_capacity_dwords(&self) -> u64 {
        on_backend!(&self.backend, d => Backend::ring_capacity_dwords(d))
    }

    fn same(&self, other: &Device) -> bool {
        self.backend.same(&other.backend)
    }

    /// The device's own queue.
    fn queue(&self) -> &AnyDevice {
        &self.backend
    }
}

/// `buffer` as an [`AnyBuffer`] of the backend of `device` (which only names it).
fn wrap_buffer<D: Member>(_device: &D, buffer: D::Buffer) -> AnyBuffer {
    D::wrap_buffer(buffer)
}

/// `program` as an [`AnyProgram`] of the backend of `device`.
fn wrap_program<D: Member>(_device: &D, program: D::Program) -> AnyProgram {
    D::wrap_program(program)
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
    inner: AnyBuffer,
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

    /// Whether both are the same range of the same allocation.
    fn same_range(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
            && self.offset == other.offset
            && self.size == other.size
    }

    /// The address a kernel receives for this buffer (a view's own start), for handing the
    /// memory to other libraries (DLPack, HIP interop). On AMD it is the GPU virtual address,
    /// where the host has the memory mapped too. It stays valid while any buffer or view of the
    /// memory lives. Metal buffers have no plain address: `Unsupported`.
    pub fn device_address(&self) -> Result<u64> {
        on_backend!(self.device().queue(), d => device_address(d, self))
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

    fn copy_in_on(&self, queue: &AnyDevice, offset: usize, src: &[u8]) -> Result<()> {
        on_backend!(queue, q => Backend::copy_in(q, part(q, self, offset, src.len(), "copy")?, src))
    }

    /// Copies bytes out of the buffer at `offset` into `dst`, after the work queued on its
    /// device's own queue, and returns once they are there.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.copy_out_on(self.device().queue(), offset, dst)
    }

    fn copy_out_on(&self, queue: &AnyDevice, offset: usize, dst: &mut [u8]) -> Result<()> {
        on_backend!(queue, q => {
            let src = part(q, self, offset, dst.len(), "copy")?;
            Backend::copy_out(q, dst, src)
        })
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
        src_queue: &AnyDevice,
        src_offset: usize,
        dst: &Buffer,
        dst_queue: &AnyDevice,
        dst_offset: usize,
        size: usize,
    ) -> Result<()> {
        on_backend!(src_queue, q => {
            let src = part(q, self, src_offset, size, "copy")?;
            let to = part(q, dst, dst_offset, size, "copy")?;
            let dst_queue = same_backend(q, dst_queue)?;
            Backend::copy(q, src, dst_queue, to)
        })
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
        on_backend!(self.device().queue(), d => is_host(d, self))
    }

    /// Writes plain values at byte `offset` of a host buffer ([`Device::alloc_host`]) at once,
    /// from the host. Unlike [`Buffer::copy_in`] this is not ordered with queued work: a
    /// kernel still running on the buffer may see the old or the new values, so synchronize
    /// first when one may be. A device buffer is an [`Error::InvalidArgument`].
    pub fn host_write_at<T: bytemuck::Pod>(&self, offset: usize, values: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        on_backend!(self.device().queue(), d => {
            let at = part(d, self, offset, bytes.len(), "host write")?;
            self.host_only(is_host(d, self))?;
            Backend::host_write(d, at, bytes)
        })
    }

    /// Reads `count` plain values from byte `offset` of a host buffer at once, from the host:
    /// what the device has written and made visible (after [`Device::synchronize`], all of
    /// it). A device buffer is an [`Error::InvalidArgument`].
    pub fn host_read_range<T: bytemuck::Pod>(&self, offset: usize, count: usize) -> Result<Vec<T>> {
        let n = std::mem::size_of::<T>();
        let len = count.checked_mul(n).ok_or_else(|| {
            Error::InvalidArgument(format!("{count} values of {n} bytes overflow"))
        })?;
        let mut out = vec![T::zeroed(); count];
        on_backend!(self.device().queue(), d => {
            let at = part(d, self, offset, len, "host read")?;
            self.host_only(is_host(d, self))?;
            Backend::host_read(d, at, bytemuck::cast_slice_mut(&mut out))
        })?;
        Ok(out)
    }

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
    ///
    /// ```
    /// # fn main() -> hcq::Result<()> {
    /// let dev = hcq::Device::default_device()?;
    /// let buf = dev.alloc_zeros::<u32>(64)?; // zeros, written by the device
    /// buf.view(16, 32)?.fill(0xdead_beef_u32)?; // values 4 to 11
    /// let values: Vec<u32> = buf.read()?;
    /// assert!(values[4..12].iter().all(|&v| v == 0xdead_beef));
    /// assert!(values[..4].iter().chain(&values[12..]).all(|&v| v == 0));
    /// // Pinned host memory: written from the host at once, copied on the device.
    /// let host = dev.alloc_host(16)?;
    /// host.host_write_at(0, &[1u32, 2, 3, 4])?;
    /// host.copy_to(0, &buf, 0, 16)?;
    /// assert_eq!(buf.read_range::<u32>(0, 6)?, [1, 2, 3, 4, 0xdead_beef, 0xdead_beef]);
    /// # Ok(()) }
    /// ```
    pub fn fill<T: bytemuck::Pod>(&self, value: T) -> Result<()> {
        self.fill_on(self.device().queue(), value)
    }

    fn fill_on<T: bytemuck::Pod>(&self, queue: &AnyDevice, value: T) -> Result<()> {
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
        on_backend!(queue, q => Backend::fill(q, whole(q, self)?, pattern))
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

fn device_address<D: Member>(device: &D, buffer: &Buffer) -> Result<u64> {
    D::device_address(whole(device, buffer)?)
}

fn is_host<D: Member>(_device: &D, buffer: &Buffer) -> bool {
    D::buffer(&buffer.shared.inner).is_some_and(D::is_host)
}

/// `queue` as a queue of the backend of `like`.
fn same_backend<'q, D: Member>(like: &D, queue: &'q AnyDevice) -> Result<&'q D> {
    D::device(queue)
        .map(|d| &**d)
        .ok_or_else(|| foreign("the destination", like.name()))
}

/// A kernel loaded on a device. Cloning is cheap: clones share the loaded code, which is freed
/// when the last one is dropped (graphs hold clones of the programs they launch).
#[derive(Clone)]
pub struct Program {
    shared: Arc<ProgramShared>,
}

struct ProgramShared {
    device: Device,
    inner: AnyProgram,
    name: String,
}

impl Drop for ProgramShared {
    fn drop(&mut self) {
        on_backend!(&self.device.backend, d => {
            if let Some(p) = program_of(d, &self.inner) {
                Backend::retire_program(d, p);
            }
        })
    }
}

/// `program` in the terms of the backend of `device`.
fn program_of<'p, D: Member>(_device: &D, program: &'p AnyProgram) -> Option<&'p D::Program> {
    D::program(program)
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

    /// This program in the terms of the backend of `device`.
    fn of<D: Member>(&self, device: &D) -> Result<&D::Program> {
        program_of(device, &self.shared.inner).ok_or_else(|| foreign("the program", device.name()))
    }

    /// The kernel's registers, LDS, scratch, largest workgroup and wave size, from its code
    /// object, and the waves per SIMD they allow on the device it was loaded on (as LLVM
    /// computes occupancy). AMD only: a Metal program says `Unsupported`.
    ///
    /// ```
    /// # fn main() -> hcq::Result<()> {
    /// let dev = hcq::Device::default_device()?;
    /// let lib = dev.compile(
    ///     "__global__ void blur(float* x) {
    ///          __shared__ float tile[256];
    ///          tile[threadIdx.x] = x[threadIdx.x];
    ///          __syncthreads();
    ///          x[threadIdx.x] = (tile[threadIdx.x] + tile[(threadIdx.x + 1) % 256]) / 2;
    ///      }",
    /// )?;
    /// let info = dev.program(&lib, "blur")?.info()?;
    /// assert_eq!((info.static_lds, info.wave_size), (256 * 4, 32));
    /// assert!(info.vgprs > 0 && (1..=16).contains(&info.waves_per_simd));
    /// println!("{} VGPRs, {} waves per SIMD ({})", info.vgprs, info.waves_per_simd, info.occupancy_limit);
    /// # Ok(()) }
    /// ```
    pub fn info(&self) -> Result<ProgramInfo> {
        on_backend!(self.device().queue(), d => program_info(d, self))
    }

    /// The arguments a caller passes, in order, as the code object's metadata declares them
    /// (the hidden ones the runtime fills in are left out), so that a tool can check what it
    /// is about to pass before preparing it. `None` when the kernel carries no such metadata
    /// (a Metal kernel, or an AMD code object without argument metadata): then only
    /// [`Program::launch`] checks the arguments.
    pub fn arguments(&self) -> Option<Vec<ArgInfo>> {
        on_backend!(self.device().queue(), d => program_arguments(d, self))
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
        queue: &AnyDevice,
        args: &[Arg<'_>],
        global: [u32; 3],
        local: [u32; 3],
        options: &LaunchOptions,
    ) -> Result<Option<Duration>> {
        self.check_args(args)?;
        on_backend!(queue, q => {
            let program = self.of(q)?;
            Backend::launch(q, program, args, |b| whole(q, b), global, local, options)
        })
    }
}

fn program_info<D: Member>(device: &D, program: &Program) -> Result<ProgramInfo> {
    D::program_info(program.of(device)?)
}

fn program_arguments<D: Member>(device: &D, program: &Program) -> Option<Vec<ArgInfo>> {
    D::program_arguments(program.of(device).ok()?)
}
