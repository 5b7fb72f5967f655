//! [`AmdDriver`] (one per kernel: the process's KFD state) and [`AmdDevice`] (one GPU).

use crate::allocator::BufferCache;
use crate::compiler::HipCompiler;
use crate::kfd::{Kfd, Release};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::program::{
    check_arg_layout, validate_descriptor, AlignedCodeObject, AmdProgram, CodeObject,
};
use crate::queue::{HwQueue, QueueKind};
use crate::signal::{ExceptionEvents, GpuException, Signal};
use crate::stream::Progress;
use crate::topology::{self, GpuNode};
use crate::GPU_TIMESTAMP_HZ;
use hcq_amd_sys::kd::{self, KernelDescriptor};
use hcq_amd_sys::pm4::{DispatchSetup, Pm4Builder};
use hcq_amd_sys::regs;
use hcq_amd_sys::sdma::SdmaBuilder;
use hcq_amd_sys::seam::{Fd, Kernel};
use hcq_amd_sys::signal::{AmdSignal, SIGNAL_SIZE};
use hcq_core::{Arg, CompileCache, DeviceInfo, Error, Result};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

const SIGNAL_COUNT: usize = 16384;
const EVENT_PAGE_BYTES: u64 = 0x8000;
const KERNARGS_BYTES: u64 = 0x100_0000;
/// Lanes of a wave: the driver loads wave32 kernels only.
const WAVE_LANES: u64 = 32;
/// The scratch ring never takes more than this fraction of VRAM; past it, fewer waves get a
/// slot at once (the hardware holds the others back until a slot frees).
const SCRATCH_VRAM_FRACTION: u64 = 8;
/// Waves per shader engine the scratch ring keeps at least: a 1024-work-item workgroup, which
/// runs within one shader engine.
const SCRATCH_MIN_WAVES_PER_SE: u32 = 32;
/// The timeline swaps to its shadow signal past this value, because `WAIT_REG_MEM` compares
/// only the low 32 bits.
const TIMELINE_LIMIT: u64 = 1 << 31;

/// How long a wait may take: `HCQ_WAIT_TIMEOUT_MS`, default 30 s. Unset or empty gives the
/// default; anything but a whole number of milliseconds from 1 up is an error naming it.
pub fn wait_timeout() -> Result<Duration> {
    wait_timeout_from(std::env::var("HCQ_WAIT_TIMEOUT_MS").ok().as_deref())
}

fn wait_timeout_from(value: Option<&str>) -> Result<Duration> {
    let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Duration::from_millis(30_000));
    };
    text.parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0 && text.bytes().all(|b| b.is_ascii_digit()))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "HCQ_WAIT_TIMEOUT_MS={text:?} is not valid: expected a whole number of \
                 milliseconds, at least 1"
            ))
        })
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pages every device of the process shares: signals and the event page.
struct SharedPages {
    signals: GpuMemory,
    events: GpuMemory,
    /// Whether KFD has taken `events` as the process's event page (done once, by the first
    /// signal event created).
    event_page_set: bool,
    free_slots: Vec<usize>,
}

/// A signal of a device, with its slot and event given back to the driver when dropped.
pub(crate) struct OwnedSignal {
    signal: Signal,
    slot: usize,
    driver: Arc<AmdDriver>,
}

impl std::ops::Deref for OwnedSignal {
    type Target = Signal;
    fn deref(&self) -> &Signal {
        &self.signal
    }
}

impl Drop for OwnedSignal {
    fn drop(&mut self) {
        // SAFETY: destroying an event releases no memory.
        unsafe {
            self.driver.kfd.release(vec![Release::DestroyEvent {
                event_id: self.signal.event_id,
            }])
        };
        if let Some(pages) = lock(&self.driver.shared).as_mut() {
            pages.free_slots.push(self.slot);
        }
    }
}

/// The process's connection to one kernel (real or emulated): `/dev/kfd`, the GPU list, the
/// shared signal and event pages, and the exception events.
pub struct AmdDriver {
    /// The open `/dev/kfd`, shared by every device and stream of this driver.
    pub kfd: Arc<Kfd>,
    /// The GPU nodes of the KFD topology, in node order (the CPU node left out).
    pub gpus: Vec<GpuNode>,
    /// Prefix of device names: `amd` or `amd-emu`.
    pub prefix: String,
    /// Whether the kernel behind the seam is the emulated one (for names and reports only:
    /// the driver's code is the same).
    pub emulated: bool,
    /// The KFD ioctl interface version (major, minor), asked once at open.
    pub kfd_version: (u32, u32),
    shared: Mutex<Option<SharedPages>>,
    exceptions: Mutex<Option<Arc<ExceptionEvents>>>,
    /// Exceptions seen by any wait, not yet reported to their device.
    pending: Mutex<Vec<GpuException>>,
    /// Render-node descriptors by GPU, opened and bound with `acquire_vm` once per process:
    /// KFD ties a process's GPU VM to one DRM file and refuses another.
    render_nodes: Mutex<Vec<(u32, Fd)>>,
}

/// The KFD version from which the driver makes the `RUNTIME_ENABLE` handshake (tinygrad's
/// bound; the call exists since 1.13).
const RUNTIME_ENABLE_SINCE: (u32, u32) = (1, 14);

impl AmdDriver {
    /// Opens `/dev/kfd` through `kernel` and reads its GPUs from the topology. Devices are
    /// opened from it one by one ([`AmdDevice::open`]).
    pub fn new(kernel: Arc<dyn Kernel>, prefix: &str, emulated: bool) -> Result<Arc<AmdDriver>> {
        let gpus = topology::gpu_nodes(kernel.as_ref())?;
        let kfd = Kfd::open(kernel)?;
        let v = kfd.get_version()?;
        if v.major_version != hcq_amd_sys::kfd::KFD_IOCTL_MAJOR_VERSION {
            return Err(Error::Unsupported(format!(
                "KFD ABI {}.{}, need 1.x",
                v.major_version, v.minor_version
            )));
        }
        // The runtime handshake of KFD 1.14 and later, before any queue exists. Upstream Linux
        // works without it; ROCm 7's kernel driver did not let tinygrad run until it made this
        // call (mode 0, no debugging: its PR #12502). Upstream accepts mode 0 whatever state
        // the process is in.
        if (v.major_version, v.minor_version) >= RUNTIME_ENABLE_SINCE {
            kfd.runtime_enable(0)?;
        }
        tracing::info!(
            target: "hcq::device",
            "{prefix}: KFD {}.{}, {} GPU(s){}",
            v.major_version,
            v.minor_version,
            gpus.len(),
            gpus.iter()
                .map(|g| format!(" {} (gpu_id {})", g.arch, g.gpu_id))
                .collect::<String>()
        );
        Ok(Arc::new(AmdDriver {
            kfd: Arc::new(kfd),
            gpus,
            prefix: prefix.to_string(),
            emulated,
            kfd_version: (v.major_version, v.minor_version),
            shared: Mutex::new(None),
            exceptions: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            render_nodes: Mutex::new(Vec::new()),
        }))
    }

    /// The render node of `node`, opened and bound to this process's VM on first use.
    pub(crate) fn render_node(&self, node: &GpuNode) -> Result<Fd> {
        let mut nodes = lock(&self.render_nodes);
        if let Some(&(_, fd)) = nodes.iter().find(|(id, _)| *id == node.gpu_id) {
            return Ok(fd);
        }
        let path = format!("/dev/dri/renderD{}", node.prop("drm_render_minor")?);
        let fd = self.kfd.open_node(&path)?;
        if let Err(e) = self.kfd.acquire_vm(fd, node.gpu_id) {
            self.kfd.kernel.close(fd);
            return Err(e);
        }
        nodes.push((node.gpu_id, fd));
        Ok(fd)
    }

    /// Takes a signal slot, creating the shared pages on the first device that asks.
    fn new_signal(self: &Arc<Self>, drm_fd: Fd, node: &GpuNode, name: &str) -> Result<OwnedSignal> {
        let mut shared = lock(&self.shared);
        if shared.is_none() {
            let uncached = AllocFlags {
                uncached: true,
                public: false,
            };
            let signals = GpuMemory::alloc(
                &self.kfd,
                drm_fd,
                node.gpu_id,
                name,
                (SIGNAL_SIZE * SIGNAL_COUNT) as u64,
                MemoryKind::Gtt,
                uncached,
            )?;
            let events = GpuMemory::alloc(
                &self.kfd,
                drm_fd,
                node.gpu_id,
                name,
                EVENT_PAGE_BYTES,
                MemoryKind::Gtt,
                uncached,
            )?;
            *shared = Some(SharedPages {
                signals,
                events,
                event_page_set: false,
                free_slots: (0..SIGNAL_COUNT).rev().collect(),
            });
        }
        let pages = shared.as_mut().expect("initialised above");
        pages.signals.map_to(node.gpu_id)?;
        pages.events.map_to(node.gpu_id)?;
        let slot = pages
            .free_slots
            .pop()
            .ok_or_else(|| Error::Unsupported("out of signal slots".into()))?;
        let event = match self.kfd.create_event(
            hcq_amd_sys::kfd::EVENT_SIGNAL,
            if pages.event_page_set {
                0
            } else {
                pages.events.handle
            },
            true,
        ) {
            Ok(event) => event,
            Err(e) => {
                pages.free_slots.push(slot);
                return Err(e);
            }
        };
        if !pages.event_page_set {
            pages.event_page_set = true;
            pages.events.leave_to_kernel();
        }
        let mailbox = pages.events.va + event.event_slot_index as u64 * 8;
        // SAFETY: `slot` indexes a 64-byte slot inside the live signal page, handed out once.
        let signal = unsafe {
            Signal::new(
                (pages.signals.va as *mut AmdSignal).add(slot),
                event.event_id,
                mailbox,
            )
        };
        Ok(OwnedSignal {
            signal,
            slot,
            driver: self.clone(),
        })
    }

    fn exception_events(&self) -> Result<Arc<ExceptionEvents>> {
        let mut ex = lock(&self.exceptions);
        if let Some(e) = ex.as_ref() {
            return Ok(e.clone());
        }
        let e = Arc::new(ExceptionEvents::create(&self.kfd)?);
        *ex = Some(e.clone());
        Ok(e)
    }

    /// Moves exceptions for `gpu_id` out of the pending list.
    fn take_exceptions(&self, new: Vec<GpuException>, gpu_id: u32) -> Vec<GpuException> {
        let mut pending = lock(&self.pending);
        pending.extend(new);
        let (mine, rest): (Vec<_>, Vec<_>) = pending.drain(..).partition(|e| e.gpu_id == gpu_id);
        *pending = rest;
        mine
    }
}

impl Drop for AmdDriver {
    fn drop(&mut self) {
        // Every device is gone (each holds the driver): nothing waits on the exception events
        // or uses the shared pages. The render nodes go last, after the memory mapped
        // through them.
        if let Some(ex) = self
            .exceptions
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            ex.destroy(&self.kfd);
        }
        drop(
            self.shared
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let nodes = std::mem::take(
            self.render_nodes
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for (_, fd) in nodes {
            self.kfd.kernel.close(fd);
        }
    }
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

/// Pairs of timestamp slots per device for traced commands.
const TRACE_SLOTS: u64 = 4096;

/// A traced command whose timestamps the engine has yet to write.
pub(crate) struct PendingSpan {
    name: String,
    /// What the command did (launch dimensions, bytes), for the trace and the log.
    args: Vec<(&'static str, String)>,
    flow: u64,
    queue: &'static str,
    /// Its place in the sequence of reserved slots (the slot is `seq % TRACE_SLOTS`).
    seq: u64,
    /// The timeline value it signals: once the timeline reaches it, both stamps are written.
    value: u64,
}

impl PendingSpan {
    /// Its arguments as the log prints them: ` grid 2x1x1 block 64x1x1 lds 0`.
    fn detail(&self) -> String {
        self.args.iter().map(|(k, v)| format!(" {k} {v}")).collect()
    }
}

/// The timestamp slots reserved for one command: committed once it is submitted, so a command
/// that fails before reaching the GPU leaves no span behind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceSlot {
    seq: u64,
    /// The flow from the host's submission to the command's span.
    flow: u64,
    /// GPU addresses of the start and end stamps.
    pub start: u64,
    pub end: u64,
}

/// GPU timestamps of traced commands, and the clock pair to convert them to host time.
pub(crate) struct TraceStamps {
    stamps: GpuMemory,
    next: u64,
    pending: Vec<PendingSpan>,
    gpu0: u64,
    host0_us: f64,
}

impl TraceStamps {
    /// Reserves the stamps of a new traced command, or `None` when the next slot still holds
    /// a pending command's stamps (the caller synchronises first).
    pub(crate) fn begin(&mut self) -> Option<TraceSlot> {
        if let Some(oldest) = self.pending.first() {
            if self.next - oldest.seq >= TRACE_SLOTS {
                return None;
            }
        }
        let seq = self.next;
        // Zero stamps say "not written yet" (a GPU clock is never 0 once it has run a command)
        // to a trace settled while this command is still queued or running. The write is in
        // range by construction; were it to fail, the command goes untraced.
        self.stamps
            .write((seq % TRACE_SLOTS) * 16, &[0u8; 16])
            .ok()?;
        self.next += 1;
        let at = self.stamps.va + (seq % TRACE_SLOTS) * 16;
        Some(TraceSlot {
            seq,
            flow: 0,
            start: at,
            end: at + 8,
        })
    }

    /// Records the submitted command of `slot`, which signals timeline value `value`; its span
    /// is written once it has finished.
    pub(crate) fn commit(
        &mut self,
        slot: TraceSlot,
        name: &str,
        args: Vec<(&'static str, String)>,
        queue: &'static str,
        value: u64,
    ) {
        self.pending.push(PendingSpan {
            name: name.to_string(),
            args,
            flow: slot.flow,
            queue,
            seq: slot.seq,
            value,
        });
    }

    /// The start and end stamps of `p` (0 where not written yet).
    fn stamps_of(&self, p: &PendingSpan) -> (u64, u64) {
        let mut b = [0u8; 16];
        // The slot index is taken modulo the slots the buffer holds, so the read cannot fall
        // outside it; were it ever to, the stamps read as unwritten rather than made up.
        if self
            .stamps
            .read((p.seq % TRACE_SLOTS) * 16, &mut b)
            .is_err()
        {
            return (0, 0);
        }
        let start = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let end = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
        (start, end)
    }

    fn to_host_us(&self, gpu_ticks: u64) -> f64 {
        self.host0_us + (gpu_ticks as f64 - self.gpu0 as f64) * 1e6 / GPU_TIMESTAMP_HZ as f64
    }

    /// Turns every pending command the timeline has passed (`reached`) into a trace event.
    fn resolve(&mut self, device: &str, reached: u64) {
        let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.value <= reached);
        self.pending = running;
        for p in done {
            let (start, end) = self.stamps_of(&p);
            if start == 0 {
                continue;
            }
            crate::trace::span(crate::trace::SpanRecord {
                device,
                queue: p.queue,
                name: &p.name,
                start_us: self.to_host_us(start),
                end_us: self.to_host_us(end.max(start)),
                finished: true,
                flow: p.flow,
                args: &p.args,
            });
            let us = end.saturating_sub(start) as f64 * 1e6 / GPU_TIMESTAMP_HZ as f64;
            tracing::debug!(
                target: "hcq::kernel",
                "{device} {:<7} {}{}: {us:.2} us",
                p.queue,
                p.name,
                p.detail()
            );
        }
    }

    /// Resolves what has finished, and gives every command that started but has not finished
    /// (a kernel that hung) a span ending `now_us`, marked unfinished; forgets the rest.
    fn settle(&mut self, device: &str, reached: u64, now_us: f64) {
        self.resolve(device, reached);
        for p in std::mem::take(&mut self.pending) {
            let (start, _) = self.stamps_of(&p);
            if start != 0 {
                let start_us = self.to_host_us(start);
                crate::trace::span(crate::trace::SpanRecord {
                    device,
                    queue: p.queue,
                    name: &p.name,
                    start_us,
                    end_us: now_us.max(start_us),
                    finished: false,
                    flow: p.flow,
                    args: &p.args,
                });
                tracing::debug!(
                    target: "hcq::kernel",
                    "{device} {:<7} {}{}: started, never finished",
                    p.queue,
                    p.name,
                    p.detail()
                );
            }
        }
    }
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
    kernargs_next: u64,
    /// Host buffer the next launch's arguments are built in (kept to reuse its allocation).
    kernarg_image: Vec<u8>,
    pub(crate) builder: Pm4Builder,
    /// The scratch ring dispatches use; replaced by a larger one when a program needs more.
    /// Graphs hold the ring they were built with, and queued work holds a replaced ring
    /// through `retired`, so neither ever runs on freed memory.
    pub(crate) scratch: Option<Arc<GpuMemory>>,
    /// Bytes each wave's slot of `scratch` holds (0 until it exists).
    scratch_wave_bytes: u64,
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
    kernargs: GpuMemory,
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
    /// Opens GPU number `index` (in topology order).
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

    /// Timestamp slots for one traced command, when tracing is on; the caller commits them
    /// ([`AmdDevice::trace_commit`]) once the command is submitted.
    pub(crate) fn trace_begin(
        &self,
        st: &mut DeviceState,
        name: &str,
    ) -> Result<Option<TraceSlot>> {
        // The GPU stamps each command when a trace records it or the log prints its time.
        if !crate::trace::enabled()
            && !tracing::enabled!(target: "hcq::kernel", tracing::Level::DEBUG)
        {
            return Ok(None);
        }
        let flow = crate::trace::submit(&self.name, name);
        if st.trace.is_none() {
            let clocks = self.driver.kfd.clock_counters(self.node.gpu_id)?;
            let stamps = self.alloc_mem(
                TRACE_SLOTS * 16,
                MemoryKind::Gtt,
                AllocFlags {
                    uncached: true,
                    public: false,
                },
            )?;
            st.trace = Some(TraceStamps {
                stamps,
                next: 0,
                pending: Vec::new(),
                gpu0: clocks.gpu_clock_counter,
                host0_us: clocks.cpu_clock_counter as f64 / 1e3,
            });
        }
        let with_flow = |slot: TraceSlot| TraceSlot { flow, ..slot };
        if let Some(slot) = st.trace.as_mut().and_then(TraceStamps::begin) {
            return Ok(Some(with_flow(slot)));
        }
        self.wait_locked(st)?;
        Ok(st
            .trace
            .as_mut()
            .and_then(TraceStamps::begin)
            .map(with_flow))
    }

    /// Records the command submitted with `slot` (from [`AmdDevice::trace_begin`]).
    pub(crate) fn trace_commit(
        st: &mut DeviceState,
        slot: Option<TraceSlot>,
        name: &str,
        queue: &'static str,
    ) {
        Self::trace_commit_with(st, slot, name, Vec::new, queue);
    }

    /// [`AmdDevice::trace_commit`] with what the command did (`args`, made only when it is
    /// traced or logged): its launch dimensions, its bytes.
    pub(crate) fn trace_commit_with(
        st: &mut DeviceState,
        slot: Option<TraceSlot>,
        name: &str,
        args: impl FnOnce() -> Vec<(&'static str, String)>,
        queue: &'static str,
    ) {
        let value = st.timeline_value;
        if let (Some(slot), Some(t)) = (slot, st.trace.as_mut()) {
            t.commit(slot, name, args(), queue, value);
        }
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

    /// Uploads kernel `name` from a code object.
    ///
    /// A relocatable object (ELF type `ET_REL`: `clang -c` for OpenCL or C, LLVM's code
    /// generator) is linked with ld.lld first.
    pub fn load_program(&self, code_object: &[u8], name: &str) -> Result<AmdProgram> {
        let linked;
        let code_object = if crate::program::is_relocatable_amdgpu(code_object) {
            linked = self.compiler.link_relocatable(code_object)?;
            &linked[..]
        } else {
            code_object
        };
        let aligned = AlignedCodeObject::new(code_object);
        let co = CodeObject::parse(aligned.bytes())?;
        co.check_target(&self.node.arch, &self.name)?;
        // The caller's name (`scale`) for the program; its symbol (`_Z5scalePfPKffi` when C++
        // mangled it) for the lookups.
        let requested = name;
        let symbol = co.resolve_kernel(name)?;
        let name = symbol.as_str();
        let kd_offset = co.descriptor_offset(name)?;
        let image = self.alloc_mem(
            co.image_size,
            MemoryKind::Vram,
            AllocFlags {
                uncached: false,
                public: true,
            },
        )?;
        let bytes = co.image(image.va)?;
        let kd_bytes = bytes
            .get(kd_offset as usize..)
            .and_then(|b| b.get(..kd::KERNEL_DESCRIPTOR_SIZE))
            .ok_or_else(|| {
                Error::InvalidCodeObject(format!("descriptor of {name} lies outside the image"))
            })?;
        let descriptor = KernelDescriptor::parse(kd_bytes).expect("64 bytes were sliced");
        let entry = validate_descriptor(name, &descriptor, kd_offset, &co)?;
        let wave_scratch = scratch_wave_bytes(descriptor.private_segment_fixed_size);
        if wave_scratch > regs::TMPRING_MAX_WAVE_BYTES {
            return Err(Error::InvalidCodeObject(format!(
                "kernel {name}: private_segment_fixed_size asks for {} bytes of scratch per \
                 work-item; gfx11 gives a wave32 at most {} bytes, {} per work-item",
                descriptor.private_segment_fixed_size,
                regs::TMPRING_MAX_WAVE_BYTES,
                regs::TMPRING_MAX_WAVE_BYTES / WAVE_LANES
            )));
        }
        let meta = co.kernels.iter().find(|k| k.name == name);
        let (args, kernarg_size, kernarg_align, max_workgroup_size) = match meta {
            Some(m) => (
                m.args.clone(),
                m.kernarg_segment_size.max(descriptor.kernarg_size),
                m.kernarg_segment_align,
                m.max_flat_workgroup_size,
            ),
            None => (Vec::new(), descriptor.kernarg_size, 8, None),
        };
        // A quarter of the ring, so that several launches are in flight between waits.
        let kernarg_limit = self.kernargs.size / 4;
        if kernarg_size as u64 > kernarg_limit {
            return Err(Error::InvalidCodeObject(format!(
                "kernel {name} has a {kernarg_size}-byte argument segment (kernarg_size {} in \
                 the descriptor, {} in the metadata); {} takes at most {kernarg_limit}",
                descriptor.kernarg_size,
                meta.map_or(0, |m| m.kernarg_segment_size),
                self.name
            )));
        }
        check_arg_layout(
            name,
            &args,
            kernarg_size,
            "the larger of kernarg_size and .kernarg_segment_size",
        )?;
        image.write(0, &bytes)?;
        if wave_scratch > 0 {
            self.ensure_scratch(wave_scratch)?;
        }
        Ok(AmdProgram {
            name: requested.to_string(),
            code_entry: image.va + entry,
            image: Arc::new(image),
            user_sgprs: descriptor.user_sgpr_layout(),
            rsrc1: descriptor.compute_pgm_rsrc1 | regs::dispatch_rsrc1_bits(&self.node.arch),
            descriptor,
            args,
            kernarg_size,
            kernarg_align: kernarg_align.max(16),
            max_workgroup_size,
            info: crate::program::program_info(&self.node.arch, &descriptor, meta),
            device_gpu_id: self.node.gpu_id,
            wave_scratch,
        })
    }

    /// Makes the scratch ring give each wave at least `wave_bytes`, replacing it with a larger
    /// one when it is smaller. A ring that would take more than 1/8 of VRAM at full occupancy
    /// gets fewer slots per shader engine (`WAVES`), halved again while VRAM refuses it, down
    /// to one largest workgroup per engine. The replaced ring stays allocated until the work
    /// already queued has finished, and for as long as a graph built with it lives.
    fn ensure_scratch(&self, wave_bytes: u64) -> Result<()> {
        let mut st = lock(&self.state);
        if st.scratch_wave_bytes >= wave_bytes {
            return Ok(());
        }
        let p = |n| self.node.prop(n);
        let cus = p("simd_count")? / p("simd_per_cu")?.max(1);
        let slots = cus * p("max_slots_scratch_cu")?;
        // gfx11 counts the ring's waves per shader engine: all of them together must fit.
        let engines = (p("array_count")? / p("simd_arrays_per_engine")?.max(1)).max(1);
        let full = u32::try_from(slots / engines)
            .unwrap_or(u32::MAX)
            .min(regs::TMPRING_MAX_WAVES_PER_SE);
        let budget = p("local_mem_size")? / SCRATCH_VRAM_FRACTION;
        let within_budget = u32::try_from(budget / (wave_bytes * engines)).unwrap_or(u32::MAX);
        let mut waves_per_se = full
            .min(within_budget)
            .max(SCRATCH_MIN_WAVES_PER_SE.min(full));
        let ring = loop {
            let bytes = u64::from(waves_per_se) * engines * wave_bytes;
            match self.alloc_mem(bytes, MemoryKind::Vram, AllocFlags::default()) {
                Ok(ring) => break ring,
                Err(Error::OutOfMemory { .. }) if waves_per_se > SCRATCH_MIN_WAVES_PER_SE => {
                    waves_per_se = (waves_per_se / 2).max(SCRATCH_MIN_WAVES_PER_SE);
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(old) = st.scratch.replace(Arc::new(ring)) {
            st.retired.push(old);
        }
        st.scratch_wave_bytes = wave_bytes;
        st.tmpring_size = regs::tmpring_size(waves_per_se, wave_bytes);
        Ok(())
    }

    /// Launches `prg` over `global` workgroups of `local` work-items. With `wait`, blocks until it
    /// finishes and returns its GPU time.
    pub fn launch<B>(
        &self,
        prg: &AmdProgram,
        args: &[Arg<B>],
        address_of: impl Fn(&B) -> Result<u64>,
        global: [u32; 3],
        local: [u32; 3],
        wait: bool,
    ) -> Result<Option<Duration>> {
        self.launch_with_lds(prg, args, address_of, global, local, 0, wait)
    }

    /// [`AmdDevice::launch`] with `dynamic_lds` bytes of LDS per workgroup beyond what the
    /// kernel declares (HIP's `extern __shared__` arrays, sized at launch); the kernel's
    /// `hidden_dynamic_lds_size` argument, when it has one, says how many.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_with_lds<B>(
        &self,
        prg: &AmdProgram,
        args: &[Arg<B>],
        address_of: impl Fn(&B) -> Result<u64>,
        global: [u32; 3],
        local: [u32; 3],
        dynamic_lds: u32,
        wait: bool,
    ) -> Result<Option<Duration>> {
        let lds = lds_bytes(prg, dynamic_lds)?;
        if prg.device_gpu_id != self.node.gpu_id {
            return Err(Error::InvalidArgument(format!(
                "program {} was loaded on another device",
                prg.name
            )));
        }
        validate_dims(global, local)?;
        if prg.wave_scratch > 0 {
            // Loaded through another stream of the GPU, the program may need more scratch
            // than this queue's ring has.
            self.ensure_scratch(prg.wave_scratch)?;
        }
        let mut st = lock(&self.state);
        self.check_usable()?;
        // Before the kernel arguments are placed: both of these may synchronise.
        self.wrap_timeline_if_due(&mut st)?;
        let stamps = self.trace_begin(&mut st, &prg.name)?;
        // Kernel arguments: an optional dispatch packet first, then the argument segment.
        let dispatch_packet = prg.user_sgprs.dispatch_ptr.is_some();
        let need =
            (prg.kernarg_size as u64).next_multiple_of(64) + if dispatch_packet { 64 } else { 0 };
        let mut at = st.kernargs_next.next_multiple_of(prg.kernarg_align as u64);
        if at + need > self.kernargs.va + self.kernargs.size {
            // The ring is full: everything queued must finish before its arguments are reused.
            self.wait_locked(&mut st)?;
            at = self.kernargs.va;
        }
        let kernargs_addr = at;
        let off = kernargs_addr - self.kernargs.va;
        // The arguments are built in host memory and then stored into the ring: GPU memory is
        // never a Rust slice (a kernel may read past its own arguments while they are written).
        let mut segment = std::mem::take(&mut st.kernarg_image);
        segment.clear();
        segment.resize(prg.kernarg_size as usize, 0);
        let placed = prg
            .write_kernargs(args, address_of, global, local, &mut segment)
            .and_then(|()| {
                prg.write_dynamic_lds_size(dynamic_lds, &mut segment);
                self.kernargs.write(off, &segment)
            });
        st.kernarg_image = segment;
        placed?;
        let mut dispatch_ptr = 0;
        if dispatch_packet {
            dispatch_ptr = kernargs_addr + (prg.kernarg_size as u64).next_multiple_of(64);
            let packet = aql_dispatch_packet(&prg.descriptor, global, local, kernargs_addr, lds);
            self.kernargs
                .write(dispatch_ptr - self.kernargs.va, &packet)?;
        }
        st.kernargs_next = kernargs_addr + need;

        let setup = dispatch_setup(prg, &mut st, kernargs_addr, dispatch_ptr, lds);
        let room_wait = self.ring_wait(&st);
        let value = st.timeline_value;
        let st = &mut *st;
        let b = &mut st.builder;
        b.clear();
        b.wait(st.timeline.value_addr(), value - 1);
        if wait {
            b.timestamp(st.timeline.start_ts_addr());
        }
        if let Some(slot) = stamps {
            b.timestamp(slot.start);
        }
        b.exec(&setup, global, local);
        if let Some(slot) = stamps {
            b.timestamp(slot.end);
        }
        if wait {
            b.timestamp(st.timeline.end_ts_addr());
        }
        st.timeline.release_with(b, value);
        st.queue.submit(&b.words, room_wait)?;
        Self::trace_commit_with(
            st,
            stamps,
            &prg.name,
            || {
                let [g, l] = [global, local].map(|d| format!("{}x{}x{}", d[0], d[1], d[2]));
                vec![
                    ("grid", g),
                    ("block", l),
                    ("lds", lds.to_string()),
                    (
                        "code object",
                        format!("0x{:x} ({} bytes)", prg.image.va, prg.image.size),
                    ),
                ]
            },
            "compute",
        );
        st.advance();
        if !wait {
            return Ok(None);
        }
        self.wait_locked(st)?;
        let ticks = st.timeline.end_ts().saturating_sub(st.timeline.start_ts());
        Ok(Some(Duration::from_nanos(
            ticks.saturating_mul(1_000_000_000 / GPU_TIMESTAMP_HZ),
        )))
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

    /// Moves the traced commands that have finished into the trace and writes it, so that a
    /// failed wait leaves what ran before it in the file. A write error stays with the trace,
    /// which reports it when it ends.
    fn trace_progress(&self, st: &mut DeviceState) {
        let reached = st.timeline.value();
        if let Some(t) = st.trace.as_mut() {
            t.resolve(&self.name, reached);
            let _ = crate::trace::flush();
        }
    }

    /// Puts this device's traced commands into the trace, the ones still running as
    /// unfinished spans, and writes it; called when the trace ends or the device goes away.
    pub fn settle_trace(&self) -> Result<()> {
        let mut st = lock(&self.state);
        let reached = st.timeline.value();
        if let Some(t) = st.trace.as_mut() {
            t.settle(&self.name, reached, crate::trace::host_now_us());
        }
        crate::trace::flush()
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
        let mut messages = Vec::new();
        while let Some(m) = self.driver.kfd.kernel.take_fault_report(self.node.gpu_id) {
            messages.push(m);
        }
        if messages.is_empty() {
            messages = exceptions
                .iter()
                .map(|e| match e.va {
                    Some(va) => format!("GPU memory access fault in the page at 0x{va:x}"),
                    None => "GPU hardware exception".to_string(),
                })
                .collect();
        }
        let mut message = messages.join("; ");
        if exceptions.iter().any(|e| e.stops_queues) {
            let _ = self.shared.lost.set(message.clone());
            message.push_str(
                "; the kernel driver has stopped this process's queues on the GPU for good \
                 (KFD evicts them after a memory fault), so no further work runs on it",
            );
        }
        Error::DeviceFault {
            device: self.name.clone(),
            message,
        }
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

/// Checks launch dimensions: no empty axis, at most 1024 work-items per workgroup, and grids of
/// at most 2^32 - 1 work-items per axis.
pub fn validate_dims(global: [u32; 3], local: [u32; 3]) -> Result<()> {
    if global.contains(&0) || local.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "empty launch: global {global:?}, local {local:?}"
        )));
    }
    let threads: u64 = local.iter().map(|&x| x as u64).product();
    if threads > 1024 {
        return Err(Error::InvalidArgument(format!(
            "workgroup of {threads} work-items (at most 1024)"
        )));
    }
    for (g, l) in global.iter().zip(&local) {
        if (*g as u64) * (*l as u64) > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "grid of {g} x {l} work-items overflows 32 bits"
            )));
        }
    }
    Ok(())
}

/// LDS bytes per workgroup of `prg` with `dynamic` bytes beyond its own, checked against
/// what a workgroup can have.
pub(crate) fn lds_bytes(prg: &AmdProgram, dynamic: u32) -> Result<u32> {
    let fixed = prg.descriptor.group_segment_fixed_size;
    match fixed.checked_add(dynamic) {
        Some(total) if total <= regs::LDS_MAX_BYTES => Ok(total),
        _ => Err(Error::InvalidArgument(format!(
            "kernel {} declares {fixed} bytes of LDS; {dynamic} more make more than the {} \
             bytes a workgroup can have",
            prg.name,
            regs::LDS_MAX_BYTES
        ))),
    }
}

/// Scratch one wave of a kernel with `per_lane` bytes of private memory per work-item needs,
/// in `COMPUTE_TMPRING_SIZE.WAVESIZE`'s 256-byte units.
fn scratch_wave_bytes(per_lane: u32) -> u64 {
    (u64::from(per_lane) * WAVE_LANES).next_multiple_of(256)
}

/// The registers and user SGPRs of one dispatch of `prg` with its arguments at
/// `kernargs_addr` (and its AQL packet at `dispatch_ptr`, 0 when it has none) and
/// `group_segment_size` bytes of LDS per workgroup ([`lds_bytes`]); takes the next dispatch
/// id.
pub(crate) fn dispatch_setup(
    prg: &AmdProgram,
    st: &mut DeviceState,
    kernargs_addr: u64,
    dispatch_ptr: u64,
    group_segment_size: u32,
) -> DispatchSetup {
    let mut user_data = [0u32; 16];
    let mut put64 = |at: Option<u32>, v: u64| {
        if let Some(i) = at {
            user_data[i as usize] = v as u32;
            user_data[i as usize + 1] = (v >> 32) as u32;
        }
    };
    let l = prg.user_sgprs;
    put64(l.kernarg_segment_ptr, kernargs_addr);
    put64(l.dispatch_ptr, dispatch_ptr);
    st.dispatch_id += 1;
    put64(l.dispatch_id, st.dispatch_id);
    if let Some(i) = l.private_segment_size {
        user_data[i as usize] = prg.descriptor.private_segment_fixed_size;
    }
    DispatchSetup {
        code_entry: prg.code_entry,
        rsrc1: prg.rsrc1,
        rsrc2: prg.descriptor.compute_pgm_rsrc2,
        group_segment_size,
        scratch_base: st.scratch.as_ref().map_or(0, |s| s.va),
        tmpring_size: st.tmpring_size,
        user_data,
        user_data_count: regs::PgmRsrc2(prg.descriptor.compute_pgm_rsrc2).user_sgpr() as usize,
    }
}

/// An `hsa_kernel_dispatch_packet_t` for kernels that read their launch through the dispatch
/// pointer: sizes in work-items, the kernarg address, segment sizes.
pub(crate) fn aql_dispatch_packet(
    descriptor: &KernelDescriptor,
    global: [u32; 3],
    local: [u32; 3],
    kernargs: u64,
    group_segment_size: u32,
) -> [u8; hcq_amd_sys::aql::KERNEL_DISPATCH_PACKET_BYTES] {
    hcq_amd_sys::aql::KernelDispatchPacket::for_launch(
        global,
        local,
        descriptor.private_segment_fixed_size,
        group_segment_size,
        kernargs,
    )
    .to_bytes()
}

#[cfg(test)]
mod wait_timeout_tests {
    use super::*;

    #[test]
    fn wait_timeout_takes_whole_milliseconds_and_names_bad_values() {
        assert_eq!(wait_timeout_from(None).unwrap(), Duration::from_secs(30));
        assert_eq!(
            wait_timeout_from(Some(" ")).unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(
            wait_timeout_from(Some("250")).unwrap(),
            Duration::from_millis(250)
        );
        for bad in [
            "abc",
            "0",
            "-5",
            "+5",
            "1.5",
            "1e3",
            "99999999999999999999999",
        ] {
            let e = wait_timeout_from(Some(bad)).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("HCQ_WAIT_TIMEOUT_MS") && text.contains(bad),
                "{text}"
            );
        }
    }
}
