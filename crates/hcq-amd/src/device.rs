//! [`AmdDevice`] (one GPU): its queues, timeline and kernel-argument ring, its buffers, and
//! waits for its work, with the faults the kernel reports meanwhile.
//!
//! The process-wide state every device shares is in [`crate::driver`]; launches are encoded
//! in `dispatch`, traced commands' GPU timestamps kept in `trace_stamps`.

use crate::allocator::BufferCache;
use crate::compiler::HipCompiler;
use crate::driver::OwnedSignal;
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::queue::{HwQueue, QueueKind};
use crate::signal::{ExceptionEvents, GpuException};
use crate::stream::Progress;
use crate::topology::GpuNode;
use crate::trace_stamps::TraceStamps;
use hcq_amd_sys::pm4::Pm4Builder;
use hcq_amd_sys::regs;
use hcq_amd_sys::sdma::SdmaBuilder;
use hcq_amd_sys::seam::Fd;
use hcq_core::{CompileCache, DeviceInfo, Error, Result};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

pub use crate::dispatch::validate_dims;
pub use crate::driver::{wait_timeout, AmdDriver};

const KERNARGS_BYTES: u64 = 0x100_0000;
/// The timeline swaps to its shadow signal past this value, because `WAIT_REG_MEM` compares
/// only the low 32 bits.
const TIMELINE_LIMIT: u64 = 1 << 31;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How device buffers are allocated.
const BUFFER_FLAGS: AllocFlags = AllocFlags {
    uncached: false,
    public: true,
};

/// A buffer in device memory. Dropping it returns its memory to the device's cache.
#[derive(Debug)]
pub struct AmdBuffer {
    mem: Option<GpuMemory>,
    /// Bytes requested (the allocation is rounded up to pages).
    pub size: u64,
    cache: Arc<BufferCache>,
}

impl AmdBuffer {
    /// The buffer object behind this buffer (it may be larger: sizes round up to pages, and
    /// a cached buffer may be reused for a smaller request).
    pub fn memory(&self) -> &GpuMemory {
        self.mem.as_ref().expect("present until drop")
    }

    /// The buffer's address in the GPU's virtual address space (what a kernel argument holds).
    pub fn gpu_address(&self) -> u64 {
        self.memory().va
    }

    /// Whether the buffer is host memory ([`AmdDevice::alloc_host`]), which the host reads
    /// and writes directly.
    pub fn is_host(&self) -> bool {
        self.memory().kind != MemoryKind::Vram
    }
}

impl Drop for AmdBuffer {
    fn drop(&mut self) {
        if let Some(m) = self.mem.take() {
            self.cache.put(m, BUFFER_FLAGS);
        }
    }
}

/// Host-visible buffers that copies pass through, each reusable once the timeline reaches
/// the value in `done`.
pub(crate) struct Staging {
    pub slots: Vec<GpuMemory>,
    pub done: Vec<u64>,
    pub next: usize,
}

/// Mutable device state, behind one lock: the launch path takes it once.
pub(crate) struct DeviceState {
    // The queues come first: fields drop in order, and a queue must be destroyed (stopping
    // whatever still runs on it) before the memory its commands use is freed.
    pub(crate) queue: HwQueue,
    /// The copy queue; `None` when KFD had no SDMA queue to give (they are few, and shared by
    /// every process): copies then run on the compute queue as CP DMA.
    pub(crate) sdma: Option<HwQueue>,
    pub(crate) sdma_builder: SdmaBuilder,
    pub(crate) staging: Option<Staging>,
    pub(crate) timeline_swaps: u64,
    pub(crate) trace: Option<TraceStamps>,
    pub(crate) timeline: OwnedSignal,
    shadow_timeline: OwnedSignal,
    /// The value the next submission will signal.
    pub(crate) timeline_value: u64,
    pub(crate) kernargs_next: u64,
    /// Host buffer the next launch's arguments are built in (kept to reuse its allocation).
    pub(crate) kernarg_image: Vec<u8>,
    pub(crate) builder: Pm4Builder,
    /// The scratch ring dispatches use; replaced by a larger one when a program needs more.
    /// Graphs hold the ring they were built with, and queued work holds a replaced ring
    /// through `retired`, so neither ever runs on freed memory.
    pub(crate) scratch: Option<Arc<GpuMemory>>,
    /// Bytes each wave's slot of `scratch` holds (0 until it exists).
    pub(crate) scratch_wave_bytes: u64,
    /// `COMPUTE_TMPRING_SIZE` for `scratch` (0 until it exists).
    pub(crate) tmpring_size: u32,
    pub(crate) dispatch_id: u64,
    /// Set when a wait timed out: the first timeline value the GPU had not reached. Until the
    /// timeline reaches it, waits that need it fail at once with `Timeout` instead of waiting
    /// a full timeout again.
    stuck_at: Option<u64>,
    /// Memory dropped while queued work may still use it (a program's code, host pages
    /// registered for an in-place copy whose wait failed), freed once that work has finished
    /// (or, with the queues, declared first, destroyed, when the device goes).
    pub(crate) retired: Vec<Arc<GpuMemory>>,
    /// The timeline's progress as other streams and the buffer cache read it.
    progress: Arc<Progress>,
}

impl DeviceState {
    /// Moves past a submission that signals `timeline_value`.
    pub(crate) fn advance(&mut self) {
        self.progress
            .submitted(self.timeline_swaps, self.timeline_value);
        self.timeline_value += 1;
    }
}

/// What the device and the streams opened from it share: they are queues of one GPU.
pub(crate) struct GpuShared {
    /// Set when the kernel reported a fault that stops the process's queues on the GPU for
    /// good (a VM fault): what it was. From then on nothing is submitted and waits for work
    /// the GPU has not finished fail at once with `DeviceLost`, on every stream.
    lost: OnceLock<String>,
    /// Numbers the streams in their names.
    pub(crate) next_stream: AtomicU32,
    /// The streams opened from the device, for [`AmdDevice::synchronize_streams`].
    pub(crate) children: Mutex<Vec<Weak<AmdDevice>>>,
}

/// One AMD GPU, real or emulated.
pub struct AmdDevice {
    /// The driver connection this device was opened from.
    pub driver: Arc<AmdDriver>,
    /// The GPU's topology node (its `gpu_id` and properties).
    pub node: GpuNode,
    /// The device's name: `amd:N` or `amd-emu:N` (`amd-emu:0 stream 1` for a stream's queue).
    pub name: String,
    drm_fd: Fd,
    // Before `kernargs` (fields drop in order): the queues inside go before any memory.
    pub(crate) state: Mutex<DeviceState>,
    pub(crate) kernargs: GpuMemory,
    exceptions: Arc<ExceptionEvents>,
    /// Compiles HIP source for this GPU's architecture.
    pub compiler: HipCompiler,
    pub(crate) timeout: Duration,
    pub(crate) cache: Arc<BufferCache>,
    /// The timeline swaps to its shadow signal once it passes this value (2^31 in use).
    timeline_limit: u64,
    /// Why the device has no SDMA queue (copies then run on the compute queue).
    no_copy_engine: Option<String>,
    pub(crate) shared: Arc<GpuShared>,
    pub(crate) progress: Arc<Progress>,
}

/// Settings of a device that tests need to change; [`Default`] is what [`AmdDevice::open`] uses.
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Bytes of the kernel-argument ring.
    pub kernargs_bytes: u64,
    /// First timeline value (to exercise the wrap without two billion submissions).
    pub timeline_start: u64,
    /// Value past which the timeline swaps to its shadow signal.
    pub timeline_limit: u64,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            kernargs_bytes: KERNARGS_BYTES,
            timeline_start: 1,
            timeline_limit: TIMELINE_LIMIT,
        }
    }
}

impl AmdDevice {
    /// Opens GPU number `index` (in topology order); a GPU hcq cannot drive
    /// ([`GpuNode::unsupported`]) is an [`Error::Unsupported`] saying why.
    pub fn open(driver: &Arc<AmdDriver>, index: usize) -> Result<AmdDevice> {
        Self::open_with(driver, index, DeviceOptions::default())
    }

    /// Opens GPU number `index` with non-default settings (tests).
    pub fn open_with(
        driver: &Arc<AmdDriver>,
        index: usize,
        options: DeviceOptions,
    ) -> Result<AmdDevice> {
        wait_timeout()?;
        let name = format!("{}:{index}", driver.prefix);
        let node = driver.gpus.get(index).cloned().ok_or_else(|| {
            Error::NoDevice(format!(
                "{name} (this machine has {} {} GPU(s))",
                driver.gpus.len(),
                driver.prefix
            ))
        })?;
        // Listed, but not one hcq can drive: said here, before anything is asked of it.
        if let Some(why) = &node.unsupported {
            return Err(Error::Unsupported(format!("{name} cannot be used: {why}")));
        }
        if options.timeline_start == 0
            || options.timeline_start > options.timeline_limit
            || options.timeline_limit > u32::MAX as u64
        {
            return Err(Error::InvalidArgument(format!(
                "timeline options {options:?}"
            )));
        }
        Self::assemble(driver, node, name, options, None)
    }

    /// A device on `node`: queues, timeline, argument ring. A stream (`parent` given) shares
    /// the parent's buffer cache, compiler and fault state, and asks for no SDMA queue.
    pub(crate) fn assemble(
        driver: &Arc<AmdDriver>,
        node: GpuNode,
        name: String,
        options: DeviceOptions,
        parent: Option<&AmdDevice>,
    ) -> Result<AmdDevice> {
        let timeout = wait_timeout()?;
        // A trace file HCQ_TRACE names that cannot be written fails here, before any work.
        crate::trace::start_from_env()?;
        let drm_fd = driver.render_node(&node)?;
        let timeline = driver.new_signal(drm_fd, &node, &name)?;
        timeline.set(options.timeline_start - 1);
        let shadow_timeline = driver.new_signal(drm_fd, &node, &name)?;
        let exceptions = driver.exception_events()?;
        let vram = AllocFlags::default();
        let kernargs = GpuMemory::alloc(
            &driver.kfd,
            drm_fd,
            node.gpu_id,
            &name,
            options.kernargs_bytes,
            MemoryKind::Vram,
            vram,
        )?;
        let queue = HwQueue::create(&driver.kfd, drm_fd, &node, &name, QueueKind::Compute)?;
        // tinygrad learned on real GPUs that the SDMA queue may not be there (its PRs #13920
        // and #14036): any refusal leaves the device working, with copies on the compute
        // queue.
        let (sdma, no_copy_engine) = match parent {
            Some(_) => (
                None,
                Some("a stream copies on its own compute queue".to_string()),
            ),
            None => match HwQueue::create(&driver.kfd, drm_fd, &node, &name, QueueKind::Sdma) {
                Ok(q) => (Some(q), None),
                Err(e) => (None, Some(format!("KFD refused an SDMA queue: {e}"))),
            },
        };
        let (compiler, cache, shared) = match parent {
            Some(p) => (p.compiler.clone(), p.cache.clone(), p.shared.clone()),
            None => (
                HipCompiler::new(&node.arch, CompileCache::from_env()),
                Arc::new(BufferCache::default()),
                Arc::new(GpuShared {
                    lost: OnceLock::new(),
                    next_stream: AtomicU32::new(1),
                    children: Mutex::new(Vec::new()),
                }),
            ),
        };
        match &no_copy_engine {
            None => {
                tracing::info!(target: "hcq::device", "{name}: opened ({}, a compute queue and a copy engine)", node.arch)
            }
            Some(why) => {
                tracing::info!(target: "hcq::device", "{name}: opened ({}, a compute queue; copies on it: {why})", node.arch)
            }
        }
        let progress = Arc::new(Progress::new(
            driver.clone(),
            [timeline.value_addr(), shadow_timeline.value_addr()],
        ));
        progress.submitted(0, options.timeline_start - 1);
        if parent.is_none() {
            cache.streams.add(&progress);
        }
        Ok(AmdDevice {
            driver: driver.clone(),
            name: name.clone(),
            drm_fd,
            state: Mutex::new(DeviceState {
                queue,
                sdma,
                sdma_builder: SdmaBuilder::new(),
                staging: None,
                timeline_swaps: 0,
                trace: None,
                timeline,
                shadow_timeline,
                timeline_value: options.timeline_start,
                kernargs_next: kernargs.va,
                kernarg_image: Vec::new(),
                builder: Pm4Builder::new(),
                scratch: None,
                scratch_wave_bytes: 0,
                tmpring_size: 0,
                dispatch_id: 0,
                stuck_at: None,
                retired: Vec::new(),
                progress: progress.clone(),
            }),
            kernargs,
            exceptions,
            compiler,
            timeout,
            cache,
            timeline_limit: options.timeline_limit,
            no_copy_engine,
            shared,
            progress,
            node,
        })
    }

    /// Before the timeline passes its limit, waits for all work and swaps to the shadow signal
    /// (`WAIT_REG_MEM` and SDMA fences compare and write 32 bits).
    pub(crate) fn wrap_timeline_if_due(&self, st: &mut DeviceState) -> Result<()> {
        if st.timeline_value > self.timeline_limit {
            self.wait_locked(st)?;
        }
        Ok(())
    }

    /// How often the timeline has swapped to its shadow signal (a diagnostic for tests).
    pub fn timeline_swaps(&self) -> u64 {
        lock(&self.state).timeline_swaps
    }

    /// The value the next submission will signal (a diagnostic for tests).
    pub fn timeline_value(&self) -> u64 {
        lock(&self.state).timeline_value
    }

    /// The device's identity and compute shape (`hcq devices -v`).
    pub fn info(&self) -> DeviceInfo {
        let memory = self
            .node
            .properties
            .get("local_mem_size")
            .copied()
            .unwrap_or(0);
        DeviceInfo {
            name: self.name.clone(),
            arch: self.node.arch.clone(),
            memory,
            emulated: self.driver.emulated,
            description: format!("AMD {} (gpu_id {})", self.node.arch, self.node.gpu_id),
            compute: Some(self.compute_info()),
        }
    }

    /// The node's compute shape from its topology properties, the free VRAM and the KFD
    /// version from the kernel.
    fn compute_info(&self) -> hcq_core::ComputeInfo {
        let p = |n: &str| self.node.properties.get(n).copied().unwrap_or(0);
        let simds_per_cu = p("simd_per_cu").max(1);
        let location = p("location_id");
        let (major, minor) = self.driver.kfd_version;
        let gtt = self.driver.kfd.memory_info(self.drm_fd).ok().map(|m| m.gtt);
        hcq_core::ComputeInfo {
            compute_units: (p("simd_count") / simds_per_cu) as u32,
            simds_per_cu: simds_per_cu as u32,
            wave_size: hcq_amd_sys::occupancy::WAVE_LANES,
            max_waves_per_cu: (p("max_waves_per_simd") * simds_per_cu) as u32,
            lds_per_workgroup: regs::LDS_MAX_BYTES.min((p("lds_size_in_kb") * 1024) as u32),
            shader_engines: (p("array_count") / p("simd_arrays_per_engine").max(1)) as u32,
            max_clock_mhz: p("max_engine_clk_fcompute") as u32,
            free_memory: self.driver.kfd.available_memory(self.node.gpu_id).ok(),
            gtt_memory: gtt.map(|h| h.total_heap_size),
            gtt_free: gtt.map(|h| h.usable_heap_size.saturating_sub(h.heap_usage)),
            // `location_id` is bus << 8 | device << 3 | function.
            pci_location: format!(
                "{:04x}:{:02x}:{:02x}.{}",
                p("domain"),
                (location >> 8) & 0xff,
                (location >> 3) & 0x1f,
                location & 7
            ),
            render_minor: p("drm_render_minor") as u32,
            driver_version: format!("KFD {major}.{minor}"),
            caches: self.node.caches.clone(),
            copy_engine_missing: self.no_copy_engine.clone(),
        }
    }

    pub(crate) fn alloc_mem(
        &self,
        size: u64,
        kind: MemoryKind,
        flags: AllocFlags,
    ) -> Result<GpuMemory> {
        GpuMemory::alloc(
            &self.driver.kfd,
            self.drm_fd,
            self.node.gpu_id,
            &self.name,
            size,
            kind,
            flags,
        )
    }

    /// Allocates a device buffer of `size` bytes, reusing a freed one of the same size when the
    /// cache has one.
    pub fn alloc(&self, size: u64) -> Result<AmdBuffer> {
        self.alloc_buffer(size, MemoryKind::Vram)
    }

    /// A buffer of `kind` through the cache.
    fn alloc_buffer(&self, size: u64, kind: MemoryKind) -> Result<AmdBuffer> {
        let fresh = || {
            tracing::debug!(target: "hcq::memory", "{}: {size} bytes of {kind:?} from the kernel driver", self.name);
            self.alloc_mem(size, kind, BUFFER_FLAGS)
        };
        let mem = self.cache.alloc(size, kind, BUFFER_FLAGS, fresh, || {
            self.synchronize_streams()
        })?;
        tracing::debug!(target: "hcq::memory", "{}: buffer of {size} bytes of {kind:?} at 0x{:x}", self.name, mem.va);
        Ok(AmdBuffer {
            mem: Some(mem),
            size,
            cache: self.cache.clone(),
        })
    }

    /// Allocates `size` bytes of host memory the GPU reaches over the bus (GTT, as ROCm's
    /// `hipHostMalloc`): kernels read and write it directly, copies to and from it need no
    /// staging, and the host accesses it in place ([`AmdBuffer::is_host`]).
    pub fn alloc_host(&self, size: u64) -> Result<AmdBuffer> {
        self.alloc_buffer(size, MemoryKind::Gtt)
    }

    /// Frees the buffers the cache holds, once no queued work can still use them; returns the
    /// bytes released.
    pub fn free_cached(&self) -> Result<u64> {
        self.synchronize_streams()?;
        Ok(self.cache.clear())
    }

    pub(crate) fn check_range(buf: &AmdBuffer, offset: u64, len: usize) -> Result<()> {
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > buf.size)
        {
            return Err(Error::InvalidArgument(format!(
                "copy of {len} bytes at offset {offset} exceeds the {}-byte buffer",
                buf.size
            )));
        }
        Ok(())
    }

    /// Compiles HIP source for this device (through the compile cache).
    pub fn compile(&self, source: &str) -> Result<Vec<u8>> {
        self.compiler.compile(source)
    }

    /// Compiles a HIP source file for this device, its `#include`s resolved next to it
    /// (through the compile cache).
    pub fn compile_file(&self, path: &std::path::Path) -> Result<Vec<u8>> {
        self.compiler.compile_file(path)
    }

    /// [`AmdDevice::compile`] with `options` (`-I`, `-D`, `-O`, other flags).
    pub fn compile_with(
        &self,
        source: &str,
        options: &hcq_core::CompileOptions,
    ) -> Result<Vec<u8>> {
        self.compiler.compile_with(source, options)
    }

    /// [`AmdDevice::compile_file`] with `options`.
    pub fn compile_file_with(
        &self,
        path: &std::path::Path,
        options: &hcq_core::CompileOptions,
    ) -> Result<Vec<u8>> {
        self.compiler.compile_file_with(path, options)
    }

    /// Waits until the timeline reaches `target`; reports any fault the GPU raised meanwhile.
    pub(crate) fn wait_value_locked(&self, st: &mut DeviceState, target: u64) -> Result<()> {
        if st.timeline.value() >= target {
            return Ok(());
        }
        let r = self.wait_timeline(st, target);
        if r.is_err() {
            self.trace_progress(st);
        }
        r
    }

    /// Waits until the timeline reaches `target`, bounded by the device's timeout.
    ///
    /// After a wait times out, the device is stuck until the GPU reaches the value it stopped
    /// short of (the kernel ends, or faults: on the emulator after `HCQ_EMU_MAX_STEPS`
    /// instructions per wave; a real GPU's hang needs a reset). Meanwhile a wait that needs
    /// that value fails at once with the same `Timeout` instead of waiting a full timeout
    /// again; one for an earlier value works; once the timeline moves past it, the device
    /// works as before.
    fn wait_timeline(&self, st: &mut DeviceState, target: u64) -> Result<()> {
        if self.shared.lost.get().is_some() && st.timeline.value() < target {
            return Err(self.lost_error());
        }
        if let Some(stuck) = st.stuck_at {
            if st.timeline.value() >= stuck {
                st.stuck_at = None;
            } else if target >= stuck {
                // A fault that ended the stuck work is still worth reporting.
                let mut seen = Vec::new();
                self.exceptions.poll(&self.driver.kfd, &mut seen)?;
                let mine = self.driver.take_exceptions(seen, self.node.gpu_id);
                if !mine.is_empty() {
                    return Err(self.fault_error(&mine));
                }
                return Err(Error::Timeout {
                    what: format!(
                        "{} to reach timeline value {target} (an earlier wait timed out with \
                         the GPU short of {stuck}, and it still is)",
                        self.name
                    ),
                    ms: self.timeout.as_millis() as u64,
                });
            }
        }
        let mut seen = Vec::new();
        let r = self.exceptions.wait_signal(
            &self.driver.kfd,
            &st.timeline,
            target,
            self.timeout,
            &|| format!("{} to reach timeline value {target}", self.name),
            &mut seen,
        );
        let mine = self.driver.take_exceptions(seen, self.node.gpu_id);
        if !mine.is_empty() {
            return Err(self.fault_error(&mine));
        }
        if let Err(Error::Timeout { .. }) = &r {
            let reached = st.timeline.value();
            if reached < target {
                st.stuck_at = Some(reached + 1);
            }
        }
        r
    }

    /// How long a submission may wait for room in a ring: the device's timeout, or nothing
    /// while the device is stuck (a full ring would only drain once the GPU moves on).
    pub(crate) fn ring_wait(&self, st: &DeviceState) -> Duration {
        match st.stuck_at {
            Some(stuck) if st.timeline.value() < stuck => Duration::ZERO,
            _ => self.timeout,
        }
    }

    /// Waits for everything submitted so far, then recycles what only in-flight work could
    /// still be using: the kernel-argument ring, and the timeline itself before it nears 2^31.
    pub(crate) fn wait_locked(&self, st: &mut DeviceState) -> Result<()> {
        let target = st.timeline_value - 1;
        let r = self.wait_timeline(st, target);
        self.trace_progress(st);
        r?;
        st.retired.clear();
        st.kernargs_next = self.kernargs.va;
        if st.timeline_value > self.timeline_limit {
            std::mem::swap(&mut st.timeline, &mut st.shadow_timeline);
            st.timeline.set(0);
            st.timeline_value = 1;
            st.timeline_swaps += 1;
            st.progress.submitted(st.timeline_swaps, 0);
            if let Some(staging) = st.staging.as_mut() {
                staging.done.fill(0);
            }
        }
        Ok(())
    }

    /// The error for `exceptions` the kernel reported on this GPU, with the emulator's
    /// account of them when it gives one. A fault that stopped the queues marks the device
    /// lost.
    fn fault_error(&self, exceptions: &[GpuException]) -> Error {
        use hcq_core::{FaultKind, FaultReport};
        let mut reports = Vec::new();
        while let Some(r) = self.driver.kfd.kernel.take_fault_report(self.node.gpu_id) {
            reports.push(r);
        }
        if reports.is_empty() {
            // No account but KFD's own: a memory exception says its page, anything else is a
            // hardware exception.
            reports = exceptions
                .iter()
                .map(|e| match e.va {
                    Some(va) => FaultReport::new(
                        FaultKind::MemoryFault,
                        format!("GPU memory access fault in the page at 0x{va:x}"),
                    )
                    .at_address(va),
                    None => {
                        FaultReport::new(FaultKind::HardwareException, "GPU hardware exception")
                    }
                })
                .collect();
        }
        // The first fault is the one the typed fields describe; the message names them all.
        let mut message = reports
            .iter()
            .map(|r| r.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        if exceptions.iter().any(|e| e.stops_queues) {
            let _ = self.shared.lost.set(message.clone());
            message.push_str(
                "; the kernel driver has stopped this process's queues on the GPU for good \
                 (KFD evicts them after a memory fault), so no further work runs on it",
            );
        }
        let first = reports
            .into_iter()
            .next()
            .unwrap_or_else(|| FaultReport::new(FaultKind::HardwareException, ""));
        Error::device_fault(&self.name, FaultReport { message, ..first })
    }

    fn lost_error(&self) -> Error {
        Error::DeviceLost {
            device: self.name.clone(),
            message: format!(
                "the kernel driver stopped its queues after a fault ({}); KFD never restarts a \
                 process's queues on a GPU after a memory fault, so only a new process can use \
                 it again",
                self.shared.lost.get().map_or("unknown", String::as_str)
            ),
        }
    }

    /// Fails with `DeviceLost` once a fault has stopped the queues: work submitted then would
    /// never run.
    pub(crate) fn check_usable(&self) -> Result<()> {
        match self.shared.lost.get() {
            Some(_) => Err(self.lost_error()),
            None => Ok(()),
        }
    }

    /// Blocks until all work submitted to this queue has finished.
    pub fn synchronize(&self) -> Result<()> {
        let mut st = lock(&self.state);
        self.wait_locked(&mut st)
    }

    /// Blocks until the work of this queue and of every stream opened from it has finished;
    /// the first error, after waiting for all of them.
    pub fn synchronize_streams(&self) -> Result<()> {
        let streams: Vec<Arc<AmdDevice>> = {
            let mut children = lock(&self.shared.children);
            children.retain(|c| c.strong_count() > 0);
            children.iter().filter_map(Weak::upgrade).collect()
        };
        let mine = self.synchronize();
        streams
            .iter()
            .map(|s| s.synchronize())
            .fold(mine, |first, r| first.and(r))
    }

    /// Bytes of the kernel-argument ring.
    pub(crate) fn kernargs_bytes(&self) -> u64 {
        self.kernargs.size
    }

    /// Frees `memory` (the last reference to it) once no queued work can still use it: for the
    /// owner of memory whose wait for that work failed, such as a program dropped after a
    /// timeout while its kernel may still be running.
    pub fn free_after_work(&self, memory: Arc<GpuMemory>) {
        lock(&self.state).retired.push(memory);
    }

    /// Dwords the last submission wrote to the ring.
    pub fn last_submission_dwords(&self) -> u64 {
        lock(&self.state).queue.last_submission_dwords
    }

    /// Capacity of the compute ring in dwords.
    pub fn ring_capacity_dwords(&self) -> u64 {
        lock(&self.state).queue.capacity_dwords()
    }

    /// Bytes written so far to the compute ring and to the copy ring, padding included (they
    /// go round their rings: see [`crate::queue::COMPUTE_RING_BYTES`]).
    pub fn ring_bytes_written(&self) -> (u64, u64) {
        let st = lock(&self.state);
        (
            st.queue.bytes_written(),
            st.sdma.as_ref().map_or(0, HwQueue::bytes_written),
        )
    }

    /// Why the device has no copy engine (KFD refused its SDMA queue, e.g. with every one
    /// taken): its copies then run on the compute queue as CP DMA, in the same order and with
    /// the same results, beside its kernels rather than overlapping them. `None` when it has
    /// one.
    pub fn copy_engine_missing(&self) -> Option<&str> {
        self.no_copy_engine.as_deref()
    }
}

impl Drop for AmdDevice {
    fn drop(&mut self) {
        // Queued work may still use the device's memory; let it finish before freeing it. A
        // device stuck since a wait timed out fails this at once instead of waiting again.
        let finished = self.synchronize().is_ok();
        let _ = self.settle_trace();
        if !finished {
            // Work may still be running: destroying the queues stops it, and must come before
            // any memory goes. What the kernel reports about that (the aborted dispatch) has
            // no one left to tell, and must not reach the next device on this GPU.
            let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
            st.queue.destroy();
            if let Some(sdma) = &mut st.sdma {
                sdma.destroy();
            }
            let mut seen = Vec::new();
            let _ = self.exceptions.poll(&self.driver.kfd, &mut seen);
            let _ = self.driver.take_exceptions(seen, self.node.gpu_id);
            while self
                .driver
                .kfd
                .kernel
                .take_fault_report(self.node.gpu_id)
                .is_some()
            {}
        }
    }
}
