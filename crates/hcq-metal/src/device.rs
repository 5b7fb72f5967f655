//! [`MetalDevice`]: buffers in shared storage, MSL compile (through the compile cache),
//! pipelines, dispatch, and the command buffers in flight. Generic over [`MetalApi`].

use crate::api::{MetalApi, Size3};
use crate::inflight::{failure, InFlight, Seq};
use hcq_core::{Arg, CompileCache, CompileKey, DeviceInfo, Error, Result};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};
use std::time::Duration;

/// Metal's limit on buffer bindings per kernel (`[[buffer(0..30)]]`), which is also what an
/// indirect compute command can hold.
pub const MAX_BUFFER_BINDINGS: usize = 31;
/// Threadgroup memory every Apple GPU family offers (`maxThreadgroupMemoryLength`).
pub const MAX_THREADGROUP_MEMORY: usize = 32 * 1024;

/// Command buffers the device's queue may have outstanding (as tinygrad asks for).
pub const MAX_COMMAND_BUFFERS: usize = 1024;

/// The compiler target reported in [`DeviceInfo::arch`] and used in compile-cache keys.
pub const ARCH: &str = "metal";

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A process-unique id, used to tell devices, buffers and programs apart without comparing
/// Metal handles.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Device memory: an `MTLBuffer` in shared storage.
pub struct MetalBuffer<A: MetalApi> {
    pub(crate) buf: A::Buffer,
    pub(crate) size: usize,
    pub(crate) id: u64,
    pub(crate) device_id: u64,
}

impl<A: MetalApi> MetalBuffer<A> {
    /// Bytes requested.
    pub fn size(&self) -> usize {
        self.size
    }
    /// The Metal handle.
    pub fn raw(&self) -> &A::Buffer {
        &self.buf
    }
    /// Process-unique identity of this buffer.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl<A: MetalApi> std::fmt::Debug for MetalBuffer<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetalBuffer(#{}, {} bytes)", self.id, self.size)
    }
}

/// A kernel: its library, function and compute pipeline.
pub struct MetalProgram<A: MetalApi> {
    pub(crate) name: String,
    pub(crate) _library: A::Library,
    pub(crate) function: A::Function,
    pub(crate) pipeline: A::Pipeline,
    pub(crate) max_threads: u64,
    pub(crate) device_id: u64,
}

impl<A: MetalApi> MetalProgram<A> {
    /// The kernel's function name in its library (what [`MetalDevice::load_program`] was
    /// asked for).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// `maxTotalThreadsPerThreadgroup` of the pipeline.
    pub fn max_threads_per_threadgroup(&self) -> u64 {
        self.max_threads
    }
}

impl<A: MetalApi> std::fmt::Debug for MetalProgram<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetalProgram({})", self.name)
    }
}

pub(crate) struct DeviceState<A: MetalApi> {
    pub(crate) in_flight: InFlight<A::CommandBuffer>,
    /// Failures of command buffers retired without a waiter, reported by the next wait.
    pub(crate) pending_errors: Vec<String>,
    /// The queue's timeline for events (made at the first one) and the value the last event
    /// set it to.
    timeline: Option<A::Event>,
    timeline_value: u64,
}

/// A queue of a device that the device waits for in [`MetalDevice::synchronize_streams`]: a
/// stream opened with [`MetalDevice::new_stream`] and handed to
/// [`MetalDevice::track_stream`].
pub trait StreamQueue: Send + Sync {
    /// Blocks until the work queued on this queue has finished.
    fn synchronize(&self) -> Result<()>;
}

impl<A: MetalApi> StreamQueue for MetalDevice<A>
where
    MetalDevice<A>: Send + Sync,
{
    fn synchronize(&self) -> Result<()> {
        MetalDevice::synchronize(self)
    }
}

/// A point in one queue's work ([`MetalDevice::record_event`]): a value of that queue's
/// `MTLSharedEvent`, set on the GPU once everything committed before it has run.
pub struct MetalEvent<A: MetalApi> {
    event: A::Event,
    value: u64,
    /// The command buffer that sets it, for its GPU time.
    marker: A::CommandBuffer,
    seq: Seq,
    device_id: u64,
    queue_id: u64,
    queue_name: String,
}

impl<A: MetalApi> MetalEvent<A> {
    /// The value of its queue's shared event that marks it.
    pub fn value(&self) -> u64 {
        self.value
    }
}

impl<A: MetalApi> std::fmt::Debug for MetalEvent<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetalEvent({} at {})", self.queue_name, self.value)
    }
}

impl<A: MetalApi> DeviceState<A> {
    fn new() -> Self {
        DeviceState {
            in_flight: InFlight::new(),
            pending_errors: Vec::new(),
            timeline: None,
            timeline_value: 0,
        }
    }
}

/// One Metal GPU.
pub struct MetalDevice<A: MetalApi> {
    pub(crate) api: A,
    /// `metal:<index>`, the index into `MTLCopyAllDevices()` it was opened with; the name in
    /// [`DeviceInfo`] and in error messages.
    pub name: String,
    pub(crate) device: A::Device,
    pub(crate) queue: A::Queue,
    /// The only way to the committed command buffers: `Send` and `Sync` for `ObjcMetal` (objc.rs) are
    /// sound because no two threads touch them at once.
    pub(crate) state: Mutex<DeviceState<A>>,
    cache: CompileCache,
    compiler_id: String,
    /// The device's identity, shared by its streams: buffers and programs of the device are
    /// used on any of them.
    pub(crate) id: u64,
    /// This queue's identity (the device's own, or a stream's).
    pub(crate) queue_id: u64,
    /// Streams opened from this device, waited for by [`MetalDevice::synchronize_streams`].
    streams: Mutex<Vec<Weak<dyn StreamQueue>>>,
    next_stream: AtomicU32,
}

/// Names of the Metal devices `api` sees: `metal:0`, `metal:1`, ...
pub fn device_names<A: MetalApi>(api: &A) -> Vec<String> {
    (0..api.copy_all_devices().len())
        .map(|i| format!("metal:{i}"))
        .collect()
}

impl<A: MetalApi> MetalDevice<A> {
    /// Opens the `index`-th device of `MTLCopyAllDevices()`, with the compile cache from the
    /// environment.
    pub fn open(api: A, index: usize) -> Result<Self> {
        Self::open_with_cache(api, index, CompileCache::from_env())
    }

    /// Opens the `index`-th device with an explicit compile cache.
    pub fn open_with_cache(api: A, index: usize, cache: CompileCache) -> Result<Self> {
        let name = format!("metal:{index}");
        let mut devices = api.copy_all_devices();
        let count = devices.len();
        if index >= count {
            return Err(Error::NoDevice(format!(
                "{name} (this machine has {count} Metal device(s))"
            )));
        }
        let device = devices.swap_remove(index);
        let queue = api
            .new_command_queue(&device, MAX_COMMAND_BUFFERS)
            .ok_or_else(|| Error::Unsupported(format!("{name}: newCommandQueue returned nil")))?;
        let compiler_id = format!("Metal on {}", api.operating_system_version());
        tracing::info!(
            target: "hcq::device",
            "{name}: opened ({}, {compiler_id})",
            api.device_name(&device)
        );
        Ok(Self::on_queue(
            api,
            name,
            device,
            queue,
            cache,
            compiler_id,
            next_id(),
        ))
    }

    /// A device of identity `id` (shared by a device and its streams) driving `queue`, with
    /// that queue's own state: nothing in flight, no event timeline, no streams of its own.
    fn on_queue(
        api: A,
        name: String,
        device: A::Device,
        queue: A::Queue,
        cache: CompileCache,
        compiler_id: String,
        id: u64,
    ) -> Self {
        MetalDevice {
            api,
            name,
            device,
            queue,
            state: Mutex::new(DeviceState::new()),
            cache,
            compiler_id,
            id,
            queue_id: next_id(),
            streams: Mutex::new(Vec::new()),
            next_stream: AtomicU32::new(1),
        }
    }

    /// A stream: another `MTLCommandQueue` on the same `MTLDevice`, as a device of its own
    /// that accepts this device's buffers and programs (`metal:0 stream 1`, ...). Its work
    /// runs in order, independently of this device's queue and of other streams; events
    /// order them ([`MetalDevice::record_event`], [`MetalDevice::wait_event`]). Hand it to
    /// [`MetalDevice::track_stream`] for [`MetalDevice::synchronize_streams`] to wait for it.
    /// Metal keeps a buffer alive while a committed command buffer uses it, so memory needs
    /// no fences between streams.
    pub fn new_stream(&self) -> Result<MetalDevice<A>>
    where
        A: Clone,
        A::Device: Clone,
    {
        let number = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let name = format!("{} stream {number}", self.name);
        let queue = self
            .api
            .new_command_queue(&self.device, MAX_COMMAND_BUFFERS)
            .ok_or_else(|| Error::Unsupported(format!("{name}: newCommandQueue returned nil")))?;
        Ok(Self::on_queue(
            self.api.clone(),
            name,
            self.device.clone(),
            queue,
            self.cache.clone(),
            self.compiler_id.clone(),
            self.id,
        ))
    }

    /// Has [`MetalDevice::synchronize_streams`] wait for `stream` while it lives.
    pub fn track_stream(&self, stream: Weak<dyn StreamQueue>) {
        let mut streams = lock(&self.streams);
        streams.retain(|s| s.strong_count() > 0);
        streams.push(stream);
    }

    /// Blocks until the work queued on this device's own queue and on every live stream
    /// tracked with [`MetalDevice::track_stream`] has finished. Every queue is waited for; the
    /// first failure is returned.
    pub fn synchronize_streams(&self) -> Result<()> {
        let mut result = self.synchronize();
        let streams: Vec<_> = lock(&self.streams)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for s in streams {
            let r = s.synchronize();
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    /// Records an event: the point after everything committed to this queue so far. A
    /// command buffer sets the queue's shared event to the event's value there.
    pub fn record_event(&self) -> Result<MetalEvent<A>> {
        let mut st = lock(&self.state);
        if st.timeline.is_none() {
            st.timeline = Some(
                self.api
                    .new_shared_event(&self.device)
                    .ok_or_else(|| self.nil("newSharedEvent"))?,
            );
        }
        let event = st.timeline.clone().expect("made above");
        let cb = self.new_command_buffer()?;
        let value = st.timeline_value + 1;
        self.api.encode_signal_event(&cb, &event, value);
        st.timeline_value = value;
        let seq = self.submit_locked(&mut st, cb.clone());
        Ok(MetalEvent {
            event,
            value,
            marker: cb,
            seq,
            device_id: self.id,
            queue_id: self.queue_id,
            queue_name: self.name.clone(),
        })
    }

    /// Makes the work committed to this queue from now on wait, on the GPU, until `event` is
    /// reached; returns at once. An event of this queue is already behind everything to come.
    /// The event may belong to another Metal device of this process: a shared event is the
    /// one Metal synchronises devices with (`encodeWaitForEvent:value:` takes any device's).
    pub fn wait_event(&self, event: &MetalEvent<A>) -> Result<()> {
        if event.queue_id == self.queue_id && event.device_id == self.id {
            return Ok(());
        }
        let mut st = lock(&self.state);
        let cb = self.new_command_buffer()?;
        self.api
            .encode_wait_for_event(&cb, &event.event, event.value);
        self.submit_locked(&mut st, cb);
        Ok(())
    }

    fn check_event(&self, event: &MetalEvent<A>) -> Result<()> {
        if event.device_id != self.id {
            return Err(Error::InvalidArgument(format!(
                "an event of {} used on {}, another Metal device",
                event.queue_name, self.name
            )));
        }
        Ok(())
    }

    /// Whether `event` has been reached (its queue's shared event holds its value).
    pub fn event_is_complete(&self, event: &MetalEvent<A>) -> bool {
        self.api.signaled_value(&event.event) >= event.value
    }

    /// Blocks until `event`, recorded on this queue, is reached; a command buffer of this
    /// queue that failed meanwhile is the error.
    pub fn synchronize_event(&self, event: &MetalEvent<A>) -> Result<()> {
        if event.queue_id != self.queue_id {
            return Err(Error::InvalidArgument(format!(
                "an event of {} waited for on {}",
                event.queue_name, self.name
            )));
        }
        let mut st = lock(&self.state);
        self.wait_locked(&mut st, Some(event.seq))
    }

    /// The GPU time from `earlier` to `later`, both reached and recorded on queues of this
    /// device: the difference of the `GPUEndTime`s of the command buffers that set them.
    /// Metal may not time a command buffer that holds nothing but the event: then it is
    /// `Unsupported`.
    pub fn elapsed_between(
        &self,
        earlier: &MetalEvent<A>,
        later: &MetalEvent<A>,
    ) -> Result<Duration> {
        self.check_event(earlier)?;
        self.check_event(later)?;
        for e in [earlier, later] {
            if !self.event_is_complete(e) {
                return Err(Error::InvalidArgument(format!(
                    "event {} of {} has not been reached",
                    e.value, e.queue_name
                )));
            }
        }
        // Read under this queue's lock, as every command buffer is touched (both are finished,
        // so nothing else changes them).
        let _st = lock(&self.state);
        let (start, end) = (
            self.api.gpu_end_time(&earlier.marker),
            self.api.gpu_end_time(&later.marker),
        );
        if start <= 0.0 || end <= 0.0 {
            return Err(Error::Unsupported(format!(
                "{}: Metal did not time the command buffer of an event",
                self.name
            )));
        }
        if end < start {
            return Err(Error::InvalidArgument(format!(
                "the later event ({} of {}) was reached before the earlier one ({} of {})",
                later.value, later.queue_name, earlier.value, earlier.queue_name
            )));
        }
        Ok(gpu_time(start, end))
    }

    /// The Metal calls this device makes.
    pub fn api(&self) -> &A {
        &self.api
    }

    /// What hcq reports about the device: its name, the `metal` arch, Metal's recommended
    /// working-set size (bytes) as its memory, and Metal's device name as the description.
    /// Core, SIMD and clock figures are `None`: Metal does not expose them.
    pub fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            arch: ARCH.to_string(),
            memory: self.api.recommended_max_working_set_size(&self.device),
            emulated: A::EMULATED,
            description: self.api.device_name(&self.device),
            // Metal does not expose its cores, SIMDs or clocks.
            compute: None,
        }
    }

    /// Allocates a shared-storage buffer of `size` bytes (at least one byte is allocated).
    pub fn alloc(&self, size: usize) -> Result<MetalBuffer<A>> {
        let oom = || Error::OutOfMemory {
            device: self.name.clone(),
            requested: size as u64,
            reason: None,
        };
        if size as u64 > self.api.max_buffer_length(&self.device) {
            return Err(oom());
        }
        let buf = self
            .api
            .new_buffer_with_length(&self.device, size.max(1))
            .ok_or_else(oom)?;
        if self.api.length(&buf) < size {
            return Err(oom());
        }
        tracing::debug!(target: "hcq::memory", "{}: buffer of {size} bytes in shared storage", self.name);
        Ok(MetalBuffer {
            buf,
            size,
            id: next_id(),
            device_id: self.id,
        })
    }

    fn check_buffer(&self, buf: &MetalBuffer<A>) -> Result<()> {
        if buf.device_id != self.id {
            return Err(Error::InvalidArgument(format!(
                "buffer #{} belongs to another device than {}",
                buf.id, self.name
            )));
        }
        Ok(())
    }

    fn check_range(buf: &MetalBuffer<A>, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > buf.size) {
            return Err(Error::InvalidArgument(format!(
                "copy of {len} bytes at offset {offset} exceeds the {}-byte buffer",
                buf.size
            )));
        }
        Ok(())
    }

    /// Copies host bytes into `buf` at `offset`, after the work already queued.
    pub fn copy_in(&self, buf: &MetalBuffer<A>, offset: usize, src: &[u8]) -> Result<()> {
        self.check_buffer(buf)?;
        Self::check_range(buf, offset, src.len())?;
        let mut st = lock(&self.state);
        self.wait_locked(&mut st, None)?;
        let base = self.api.contents(&buf.buf);
        if base.is_null() {
            return Err(Error::Unsupported("buffer has no CPU contents".into()));
        }
        // SAFETY: `contents` points at the buffer's `length >= size` bytes of shared storage
        // (checked at allocation), `offset + src.len() <= size` (checked above), no GPU work is
        // in flight on this device (waited above, lock held), and `src` is host memory that
        // cannot overlap a Metal allocation's storage.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len()) };
        Ok(())
    }

    /// Copies `dst.len()` bytes out of `buf` at `offset`, after the work already queued.
    pub fn copy_out(&self, dst: &mut [u8], buf: &MetalBuffer<A>, offset: usize) -> Result<()> {
        self.check_buffer(buf)?;
        Self::check_range(buf, offset, dst.len())?;
        let mut st = lock(&self.state);
        self.wait_locked(&mut st, None)?;
        let base = self.api.contents(&buf.buf);
        if base.is_null() {
            return Err(Error::Unsupported("buffer has no CPU contents".into()));
        }
        // SAFETY: as in `copy_in`: the range lies inside the buffer's shared storage and no GPU
        // work that could write it is in flight.
        unsafe { std::ptr::copy_nonoverlapping(base.add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Queues a GPU copy of `size` bytes from `src` to `dst` (a blit), after the work already
    /// queued.
    pub fn copy(
        &self,
        dst: &MetalBuffer<A>,
        dst_offset: usize,
        src: &MetalBuffer<A>,
        src_offset: usize,
        size: usize,
    ) -> Result<()> {
        self.check_buffer(dst)?;
        self.check_buffer(src)?;
        Self::check_range(dst, dst_offset, size)?;
        Self::check_range(src, src_offset, size)?;
        let mut st = lock(&self.state);
        let cb = self.new_command_buffer()?;
        let blit = self
            .api
            .blit_command_encoder(&cb)
            .ok_or_else(|| self.nil("blitCommandEncoder"))?;
        self.api
            .copy_from_buffer(&blit, &src.buf, src_offset, &dst.buf, dst_offset, size);
        self.api.end_blit_encoding(&blit);
        self.submit_locked(&mut st, cb);
        Ok(())
    }

    /// Compiles Metal Shading Language source into a serialized library (metallib bytes),
    /// through the compile cache.
    pub fn compile(&self, source: &str) -> Result<Vec<u8>> {
        let flags: [String; 0] = [];
        let key = CompileKey {
            source,
            arch: ARCH,
            compiler: &self.compiler_id,
            flags: &flags,
        };
        let started = std::time::Instant::now();
        let compiled = std::cell::Cell::new(false);
        let library = self.cache.get_or_compile(&key, || {
            compiled.set(true);
            let lib = self
                .api
                .new_library_with_source(&self.device, source)
                .map_err(|log| Error::Compile {
                    message: format!("Metal rejected the source on {}", self.name),
                    log,
                })?;
            self.api.library_data_contents(&lib).ok_or_else(|| {
                Error::Unsupported("this Metal cannot serialize a compiled library".into())
            })
        })?;
        tracing::debug!(
            target: "hcq::compile",
            "{ARCH}: source text ({}) in {:.1} ms, {} bytes",
            if compiled.get() { "compiled" } else { "from the cache" },
            started.elapsed().as_secs_f64() * 1e3,
            library.len()
        );
        Ok(library)
    }

    /// Loads kernel `name` from a serialized library.
    pub fn load_program(&self, library: &[u8], name: &str) -> Result<MetalProgram<A>> {
        if !library.starts_with(b"MTLB") {
            return Err(Error::InvalidCodeObject(
                "not a Metal library (no MTLB magic)".into(),
            ));
        }
        let lib = self
            .api
            .new_library_with_data(&self.device, library)
            .map_err(|e| Error::InvalidCodeObject(format!("Metal refused the library: {e}")))?;
        let function = self
            .api
            .new_function_with_name(&lib, name)
            .ok_or_else(|| Error::InvalidCodeObject(format!("no kernel {name} in the library")))?;
        let pipeline = self
            .api
            .new_compute_pipeline_state(&self.device, &function, false)
            .map_err(|log| Error::Compile {
                message: format!("creating the pipeline of {name}"),
                log,
            })?;
        let max_threads = self.api.max_total_threads_per_threadgroup(&pipeline);
        Ok(MetalProgram {
            name: name.to_string(),
            _library: lib,
            function,
            pipeline,
            max_threads,
            device_id: self.id,
        })
    }

    pub(crate) fn check_program(&self, prg: &MetalProgram<A>) -> Result<()> {
        if prg.device_id != self.id {
            return Err(Error::InvalidArgument(format!(
                "program {} was loaded on another device",
                prg.name
            )));
        }
        Ok(())
    }

    /// Launches `prg` over `global` threadgroups of `local` threads. Arguments bind in order:
    /// argument `i` is `[[buffer(i)]]`, a buffer by reference, a scalar by value. With `wait`,
    /// blocks until it finishes and returns its GPU time.
    pub fn launch<'b, B>(
        &self,
        prg: &MetalProgram<A>,
        args: &'b [Arg<B>],
        buffer_of: impl Fn(&'b B) -> Result<&'b MetalBuffer<A>>,
        global: Size3,
        local: Size3,
        wait: bool,
    ) -> Result<Option<Duration>>
    where
        A: 'b,
    {
        let at_start = |b: &'b B| buffer_of(b).map(|m| (m, 0));
        self.launch_at(prg, args, at_start, global, local, 0, wait)
    }

    /// [`MetalDevice::launch`] with each buffer argument bound at a byte offset into its
    /// buffer (`buffer_of` gives both): `setBuffer:offset:atIndex:`, and `threadgroup_bytes`
    /// of threadgroup memory (rounded up to 16) for the kernel's `[[threadgroup(0)]]`
    /// argument when nonzero.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_at<'b, B>(
        &self,
        prg: &MetalProgram<A>,
        args: &'b [Arg<B>],
        buffer_of: impl Fn(&'b B) -> Result<(&'b MetalBuffer<A>, usize)>,
        global: Size3,
        local: Size3,
        threadgroup_bytes: usize,
        wait: bool,
    ) -> Result<Option<Duration>>
    where
        A: 'b,
    {
        self.check_program(prg)?;
        let threadgroup_bytes = threadgroup_bytes.next_multiple_of(16);
        if threadgroup_bytes > MAX_THREADGROUP_MEMORY {
            return Err(Error::InvalidArgument(format!(
                "{threadgroup_bytes} bytes of threadgroup memory for {} (at most \
                 {MAX_THREADGROUP_MEMORY})",
                prg.name
            )));
        }
        check_launch(&prg.name, prg.max_threads, global, local)?;
        if args.len() > MAX_BUFFER_BINDINGS {
            return Err(Error::InvalidArgument(format!(
                "{} arguments to {} (Metal binds at most {MAX_BUFFER_BINDINGS})",
                args.len(),
                prg.name
            )));
        }
        let mut buffers = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            if let Arg::Buffer(b) = a {
                let (b, offset) = buffer_of(b)?;
                self.check_buffer(b)
                    .map_err(|e| Error::InvalidArgument(format!("argument {i}: {e}")))?;
                if offset >= b.size.max(1) {
                    return Err(Error::InvalidArgument(format!(
                        "argument {i}: offset {offset} is past the {}-byte buffer",
                        b.size
                    )));
                }
                buffers.push((b, offset));
            }
        }
        let mut st = lock(&self.state);
        let cb = self.new_command_buffer()?;
        let enc = self
            .api
            .compute_command_encoder(&cb)
            .ok_or_else(|| self.nil("computeCommandEncoder"))?;
        self.api.set_compute_pipeline_state(&enc, &prg.pipeline);
        let mut next_buffer = buffers.iter();
        for (i, a) in args.iter().enumerate() {
            match a.scalar_bytes() {
                None => {
                    if let Some((b, offset)) = next_buffer.next() {
                        self.api.set_buffer(&enc, &b.buf, *offset, i);
                    }
                }
                Some(bytes) => self.api.set_bytes(&enc, &bytes, i),
            }
        }
        if threadgroup_bytes > 0 {
            self.api
                .set_threadgroup_memory_length(&enc, threadgroup_bytes, 0);
        }
        self.api.dispatch_threadgroups(&enc, global, local);
        self.api.end_encoding(&enc);
        // The kernel's line in the log, once the GPU has run it (as the AMD backend prints it).
        let label = tracing::enabled!(target: "hcq::kernel", tracing::Level::DEBUG).then(|| {
            let [g, l] = [global, local].map(|d| format!("{}x{}x{}", d[0], d[1], d[2]));
            format!(
                "{} compute {} grid {g} block {l} threadgroup memory {threadgroup_bytes}",
                self.name, prg.name
            )
            .into_boxed_str()
        });
        let seq = self.submit_labeled_locked(&mut st, cb, label);
        if !wait {
            return Ok(None);
        }
        self.wait_seq_locked(&mut st, seq)
    }

    pub(crate) fn nil(&self, call: &str) -> Error {
        Error::Unsupported(format!("{}: {call} returned nil", self.name))
    }

    pub(crate) fn new_command_buffer(&self) -> Result<A::CommandBuffer> {
        self.api
            .command_buffer(&self.queue)
            .ok_or_else(|| self.nil("commandBuffer"))
    }

    /// Commits `cb`, tracks it as in flight, and retires what already finished.
    pub(crate) fn submit_locked(&self, st: &mut DeviceState<A>, cb: A::CommandBuffer) -> Seq {
        self.submit_labeled_locked(st, cb, None)
    }

    /// [`MetalDevice::submit_locked`] of a command buffer whose `label` the kernel log prints
    /// once it has run.
    fn submit_labeled_locked(
        &self,
        st: &mut DeviceState<A>,
        cb: A::CommandBuffer,
        label: Option<Box<str>>,
    ) -> Seq {
        self.api.commit(&cb);
        let errors = st.in_flight.retire_finished(&self.api);
        st.pending_errors.extend(errors);
        st.in_flight.push_labeled(cb, label)
    }

    /// Waits for command buffer `seq` (and everything before it), then returns its GPU time.
    pub(crate) fn wait_seq_locked(
        &self,
        st: &mut DeviceState<A>,
        seq: Seq,
    ) -> Result<Option<Duration>> {
        // Everything before `seq` is retired first, so `seq` is at the front afterwards.
        if let Some(before) = seq.checked_sub(1) {
            let errors = st.in_flight.wait_through(&self.api, Some(before));
            st.pending_errors.extend(errors);
        }
        let mut time = None;
        if let Some((front, cb)) = st.in_flight.front() {
            if front == seq {
                self.api.wait_until_completed(cb);
                if let Some(e) = failure(&self.api, cb) {
                    st.pending_errors.push(e);
                }
                time = Some(gpu_time(
                    self.api.gpu_start_time(cb),
                    self.api.gpu_end_time(cb),
                ));
                st.in_flight.pop_front(&self.api);
            }
        }
        self.take_errors(st)?;
        Ok(time)
    }

    /// Waits for everything up to `seq` (everything with `None`) and reports any failure seen
    /// since the last wait.
    pub(crate) fn wait_locked(&self, st: &mut DeviceState<A>, seq: Option<Seq>) -> Result<()> {
        let errors = st.in_flight.wait_through(&self.api, seq);
        st.pending_errors.extend(errors);
        self.take_errors(st)
    }

    fn take_errors(&self, st: &mut DeviceState<A>) -> Result<()> {
        if st.pending_errors.is_empty() {
            return Ok(());
        }
        let errors = std::mem::take(&mut st.pending_errors);
        let kind = command_buffer_fault_kind(&errors[0]);
        Err(Error::device_fault(
            &self.name,
            hcq_core::FaultReport::new(kind, errors.join("; ")),
        ))
    }

    /// Blocks until all submitted work has finished; reports a command buffer that failed.
    pub fn synchronize(&self) -> Result<()> {
        let mut st = lock(&self.state);
        self.wait_locked(&mut st, None)
    }

    /// Command buffers committed and not yet seen finished.
    pub fn in_flight(&self) -> usize {
        lock(&self.state).in_flight.len()
    }
}

impl<A: MetalApi> Drop for MetalDevice<A> {
    fn drop(&mut self) {
        // Queued work may still use buffers the caller is about to free.
        let _ = self.synchronize();
    }
}

/// GPU time from `GPUStartTime`/`GPUEndTime` (seconds); zero when Metal reports nonsense.
pub(crate) fn gpu_time(start: f64, end: f64) -> Duration {
    Duration::try_from_secs_f64(end - start).unwrap_or_default()
}

/// Validates a launch's sizes against Metal's and the pipeline's limits.
pub(crate) fn check_launch(
    name: &str,
    max_threads: u64,
    global: Size3,
    local: Size3,
) -> Result<()> {
    if global.contains(&0) || local.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "empty launch of {name}: global {global:?}, local {local:?}"
        )));
    }
    let threads: u64 = local.iter().map(|&x| x as u64).product();
    if threads > max_threads {
        return Err(Error::InvalidArgument(format!(
            "threadgroup of {threads} threads for {name} (its pipeline allows {max_threads})"
        )));
    }
    Ok(())
}

/// The kind of fault a failed command buffer's error stands for. Metal hands over only the
/// error's description (`[commandBuffer error]`, seen through [`crate::api`]), whose text for a
/// GPU page fault names it (`MTLCommandBufferErrorPageFault`: "Page Fault", "Address Fault");
/// every other failure (a timeout, an internal error, revoked access) is a hardware exception.
fn command_buffer_fault_kind(error: &str) -> hcq_core::FaultKind {
    let lower = error.to_ascii_lowercase();
    if ["page fault", "pagefault", "address fault"]
        .iter()
        .any(|needle| lower.contains(needle))
    {
        hcq_core::FaultKind::MemoryFault
    } else {
        hcq_core::FaultKind::HardwareException
    }
}

#[cfg(test)]
mod fault_kind_tests {
    use super::*;

    #[test]
    fn a_page_fault_is_a_memory_fault_and_anything_else_a_hardware_exception() {
        assert_eq!(
            command_buffer_fault_kind(
                "Caused GPU Address Fault Error (0000000b:kIOGPUCommandBufferCallbackErrorPageFault)"
            ),
            hcq_core::FaultKind::MemoryFault
        );
        assert_eq!(
            command_buffer_fault_kind("Internal Error (0000000e:Internal Error)"),
            hcq_core::FaultKind::HardwareException
        );
    }
}
