//! An emulated AMD GPU that plugs in below the driver, at the Linux kernel boundary.
//!
//! [`EmuKernel`] implements [`hcq_amd_sys::seam::Syscalls`], the driver's only way to reach the
//! kernel, and plays the part of the `amdkfd` kernel driver and of the GPUs behind it:
//!
//! - **Device nodes**: `open("/dev/kfd")` and `open("/dev/dri/renderD<128+i>")` return
//!   descriptors at or above `0x4000_0000`, which no real descriptor of the process reaches.
//! - **sysfs**: the KFD topology, `/sys/devices/virtual/kfd/kfd/topology/nodes/N/{gpu_id,name,
//!   properties,mem_banks/0/properties}` (node 0 is the CPU; nodes `1..=n` are gfx1100 GPUs
//!   with an RX 7900 XTX's properties, or the model [`GpuArch`] names, and `local_mem_size`
//!   the configured VRAM), the `kfd` and
//!   `drm` classes, and each GPU's PCI device directory (`/sys/class/drm/renderD<minor>/device`)
//!   with its IP discovery table (`ip_discovery/die/0/<hw_id>/<instance>/{major,minor,
//!   revision,...}`: GC 11.0.0, SDMA 6.0.0, NBIF 4.3.0, ...). One immutable tree answers both
//!   `read_dir` and `read_to_string`, following symbolic links as the kernel would.
//! - **ioctls** on `/dev/kfd`, with the request numbers and `#[repr(C)]` structs of
//!   `linux/kfd_ioctl.h`, reporting ABI 1.16 (Linux 6.12) or 1.14 (Linux 6.6; [`KfdRules`]), or
//!   the version configured ([`EmuConfig::kfd_version`], without the ioctls added after it):
//!   `GET_VERSION`, `ACQUIRE_VM`, `ALLOC_MEMORY_OF_GPU` (VRAM, GTT, USERPTR),
//!   `FREE_MEMORY_OF_GPU` (`EBUSY` while the BO is mapped to a GPU), `MAP_MEMORY_TO_GPU`,
//!   `UNMAP_MEMORY_FROM_GPU` (`EBUSY`, under 6.12, for a BO a queue holds), `CREATE_EVENT`,
//!   `DESTROY_EVENT`, `SET_EVENT`, `RESET_EVENT`, `WAIT_EVENTS` (with 1.14's event ages),
//!   `CREATE_QUEUE` (PM4 compute queues and SDMA copy queues; under 6.12 with
//!   `kfd_queue_acquire_buffers`' checks), `DESTROY_QUEUE`, `GET_CLOCK_COUNTERS`,
//!   `AVAILABLE_MEMORY` (free VRAM, but no more than the host can back now), `RUNTIME_ENABLE`
//!   (`EBUSY` when enabled twice, `EEXIST` once queues exist). As `kfd_ioctl`
//!   does, a request is found by its number alone (type byte and direction bits are not
//!   checked), and the size the caller encodes is reconciled with the struct's: a shorter
//!   argument (an older header) is zero-extended, a longer one (a newer header) has its tail
//!   left as the caller wrote it, and exactly the caller's size is copied back, whether or not
//!   the request failed. A number KFD does not define, or one this emulator does not model,
//!   is `EINVAL`.
//! - **ioctls** on a render node: DRM's `VERSION` (amdgpu 3.49) and amdgpu's `AMDGPU_INFO`
//!   queries `ACCEL_WORKING`, `DEV_INFO`, `VRAM_GTT` and `MEMORY`, with `drm_ioctl`'s size
//!   rules; anything else is `EINVAL` (`drm.rs`).
//! - **Memory**: GPU memory is host memory at the virtual address the driver chose. A VRAM or
//!   GTT buffer is backed when it is allocated, over the driver's `PROT_NONE` reservation; the
//!   render-node `mmap` at its `mmap_offset` then just exposes it. Every GPU access is checked
//!   against that GPU's page table (the buffers mapped to it); an access outside is a VM fault,
//!   never a crash. The host must be able to back it: each GPU's VRAM (`local_mem_size`) is
//!   at most half of the tightest memory limit on the process, and an allocation the host
//!   cannot back now fails with `ENOMEM` carrying the reason ([`host_memory`] has the policy
//!   and the limits it reads). CPU protections of buffer mappings are not enforced (buffers stay
//!   read-write), and a render-node `mmap` can only place a buffer at its own address.
//! - **Doorbells**: `mmap` of `/dev/kfd` at a queue's `doorbell_offset & !0x1fff` gives the
//!   GPU's doorbell pages (every mapping is the same memory). A queue's engine watches its
//!   slot: a plain store by any thread through any mapping is a doorbell, seen within about a
//!   millisecond at worst (the engine spins, then yields, then sleeps ever longer between
//!   polls while idle; see `queue.rs`); [`Syscalls::write_doorbell`] stores and wakes the
//!   engine at once.
//! - **Command processors**: one thread per compute queue executes the PM4 ring: `SET_SH_REG`,
//!   `ACQUIRE_MEM`, `RELEASE_MEM` (32/64-bit data, GPU clock, end-of-pipe interrupts that
//!   signal events), `WAIT_REG_MEM`, `DISPATCH_DIRECT` (the kernel runs on the `rdna3`
//!   interpreter, reading its code, arguments and data from GPU memory), `INDIRECT_BUFFER`,
//!   `EVENT_WRITE`, `NOP`.
//! - **SDMA engines**: one thread per SDMA queue executes its ring (read/write pointers and
//!   doorbell values in bytes): `COPY_LINEAR` (memmove semantics, both ranges checked against
//!   the GPU's page table), `FENCE`, `TRAP` (the same interrupt path as `RELEASE_MEM`),
//!   `POLL_REGMEM` on memory (polled until the condition holds or the queue is destroyed; the
//!   interval and retry-count fields do not bound it), `TIMESTAMP` (get global), `CONST_FILL`,
//!   `ATOMIC` (64-bit add), and `GCR`, HDP flush and `NOP` (zero dwords included), which need
//!   no work in a functional model. An engine belongs to one GPU and uses its page table: a
//!   transfer between GPUs needs the other GPU's buffer mapped on the engine's GPU too
//!   (`MAP_MEMORY_TO_GPU` with both ids; a BO may be mapped on any number of GPUs). Engines are
//!   ordered against compute queues only through memory (signals).
//! - **Faults are data**: an unknown or truncated packet, a VM fault or an interpreter fault is
//!   recorded as a report (its kind, address, PC and instruction, and an account in words:
//!   [`Syscalls::take_fault_report`]) and raises the
//!   process's memory-exception (VM faults, with the address) or hardware-exception events.
//!   A VM fault then does what KFD's interrupt handler does (`kfd_dqm_evict_pasid`): every
//!   queue of the process on that GPU, compute and SDMA, is evicted and never restored, so no
//!   engine of the GPU takes another packet from them or from queues created later, for the
//!   life of the [`EmuKernel`] (one process; reopening `/dev/kfd` gives the same one).
//!   Dispatches already running on other queues finish. After the faults a real GPU does not
//!   report this way (an unknown packet, an instruction the interpreter lacks, an LDS access
//!   out of range, a wave past `max_steps`) the queue goes on with the next packet.
//!
//! # Memory model
//!
//! GPU memory is ordinary host memory that several threads use at once: the driver (and the
//! user through it), each queue's command processor, the worker threads a dispatch runs its
//! workgroups on, and each SDMA engine. A plain load or store racing with another thread's
//! access is undefined behaviour in Rust whatever the values, so the rule is: **every access
//! to GPU memory is atomic**, and no Rust reference (`&[u8]`, `&mut [u8]`) ever covers it.
//!
//! | who | what it touches | how |
//! | --- | --- | --- |
//! | driver (`hcq-amd`) | ring packets, kernel arguments, graph streams and patches, staging buffers, buffer contents | [`hcq_amd_sys::shared`]: relaxed loads and stores of naturally aligned 8/4/2/1-byte pieces (`GpuMemory::read`/`write`, ring `put`) |
//! | driver | signal values, queue read/write pointers, event mailboxes | `AtomicU64`/`AtomicI64`: release stores, acquire loads |
//! | command processor | packet fetch; `RELEASE_MEM` data and timestamps; `WAIT_REG_MEM` polls | `memory::Snapshot` accessors: acquire 32-bit loads, release 32/64-bit stores |
//! | dispatch workers (`rdna3`) | code, kernel arguments, global/scratch data | `rdna3::memory`: plain data through `shared` (relaxed), `*_atomic_*` instructions as sequentially consistent compare-exchange loops |
//! | SDMA engine | packet fetch; `COPY_LINEAR`, `CONST_FILL`, `INDIRECT` contents; `FENCE`, `TIMESTAMP`, `ATOMIC`, `POLL_REGMEM` | acquire loads for packets and polls; `shared::{copy, fill, load}` between sequentially consistent fences; release stores; `fetch_add` |
//! | event mailboxes | written by `RELEASE_MEM`/`TRAP`, read by `WAIT_EVENTS` | `AtomicU64` |
//! | doorbell pages | stored by the client (plain stores, or [`Syscalls::write_doorbell`]: a release store), polled by each queue's engine | `AtomicU64` acquire loads of the engine's slot |
//!
//! **Why results are seen**: every hand-over has a happens-before edge. Driver → command
//! processor: the ring and arguments are stored before the doorbell, whose value the queue
//! thread loads with acquire ordering (a client storing it without release ordering relies on
//! x86's store order, as it does on hardware). Command processor → workers: thread spawn; workers →
//! command processor: the scoped threads' join. GPU → driver: `RELEASE_MEM` and SDMA `FENCE`
//! store the signal with release ordering after the work (SDMA copies are followed by a
//! sequentially consistent fence), and the driver loads it with acquire ordering (or wakes
//! from `WAIT_EVENTS`, behind a mutex) before it reads results. Between engines, ordering
//! exists only through memory (signals), as on hardware. Data the program races on without
//! synchronising (two workgroups writing one word) gets some value a writer stored, as on a
//! GPU, not undefined behaviour.
//!
//! **Why pointers stay valid**: [`rdna3::Memory`] is an `unsafe trait`; `memory::Snapshot`
//! implements it by translating only inside one mapped BO, and a snapshot holds a reference
//! to the storage of every BO it maps, kept for a whole packet (a whole dispatch or copy). A
//! BO freed or unmapped meanwhile stays backed, and the driver's `munmap` of it is deferred,
//! until the last snapshot is dropped (see `memory.rs`).
//!
//! **What is still relied on**:
//! - *Mixed-size atomics*: a wave's 4-byte store and a host copy's 8-byte load of the same
//!   bytes are atomics of different sizes. The C++ model Rust inherits leaves such accesses
//!   undefined when they race (Miri reports them); x86-64 and AArch64 perform each aligned
//!   piece single-copy atomically. Only unsynchronised races mix sizes; synchronised programs
//!   never do.
//! - *The driver's own ordering*: it waits for the GPU before reusing a ring slot, an
//!   argument slot or a staging buffer, and before freeing a buffer the GPU still uses (the
//!   emulator keeps such memory mapped anyway, so a mistake there is a wrong result, not a
//!   crash).
//! - *In-place transfers*: copies of 16 MiB or more register the caller's `&[u8]`/`&mut [u8]`
//!   as USERPTR memory and the engine reads or writes it while the caller's borrow is alive,
//!   like any DMA; the caller does not touch it until the copy's signal.
//! - *Mappings outlive their users*: host memory of a USERPTR BO belongs to its user, who must
//!   keep it mapped while the GPU may access it.
//!
//! **GPU clock**: monotonic, **100 MHz** (one tick per 10 ns; [`GPU_CLOCK_HZ`]), the same for
//! `RELEASE_MEM` timestamps and `GET_CLOCK_COUNTERS`.
//!
//! **Configuration** ([`kernel`] reads it on first use; [`EmuKernel::new`] takes it directly):
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `HCQ_EMU_GPUS` | number of gfx1100 GPUs (0..=64) | 1 |
//! | `HCQ_EMU_MAX_STEPS` | instruction budget of each wave of a dispatch | 100 000 000 |
//! | `HCQ_EMU_VRAM` | VRAM bytes per GPU; suffixes `K`, `M`, `G`, `T` (binary); capped by the host | 16G |
//! | `HCQ_EMU_WRAPPED_RPTR` | `1`: the engines report their read pointers as offsets within the ring (as a PM4 queue's `CP_HQD_PQ_RPTR` holds it), not as running counts | 0 |
//! | `HCQ_EMU_SDMA_QUEUES` | SDMA queues each GPU gives out (0 to all of them: 2 engines × 6 on a gfx1100, as the topology says; fewer stand for other processes' queues); one more is `ENOMEM`, as KFD says when its bitmap is empty | all: 12 |
//! | `HCQ_EMU_SMALL_BAR` | `1`: a board without Resizable BAR, whose host-visible (`PUBLIC`) VRAM allocations KFD refuses with `EINVAL` | 0 |
//! | `HCQ_EMU_CUS` | compute units per GPU, a multiple of 12 up to 96 (84: an RX 7900 XT) | 96 |
//! | `HCQ_EMU_KERNEL` | the Linux release whose KFD rules apply, `6.12` or `6.6` ([`KfdRules`]) | 6.12 |
//! | `HCQ_EMU_KFD_VERSION` | the KFD version `GET_VERSION` reports instead of the release's (`1.3`); the ioctls KFD added after it are `EINVAL` ([`KfdVersion`]) | the release's |
//! | `HCQ_EMU_ARCH` | which GPU each is: `gfx1100` (run) or `gfx1030`, a Radeon RX 6900 XT published as the kernel driver publishes one but not run: its dispatches and register accesses are reported as not modelled ([`GpuArch`]) | gfx1100 |
//!
//! An unset or empty variable leaves the default; any other value that is not accepted (a
//! fraction such as `1.5G`, `HCQ_EMU_GPUS=65`, `HCQ_EMU_MAX_STEPS=-1`) makes [`kernel`] fail
//! with a [`ConfigError`] naming the variable, its value and what it accepts.
//!
//! **Conventions the driver can rely on** (as in `amdkfd`): signal events get ids (and mailbox
//! slots) from 1 below 4096; memory- and hardware-exception events get ids from 4096 on. A
//! mailbox slot holds `u64::MAX` while its event is unsignaled; the first `CREATE_EVENT` with a
//! non-zero `event_page_offset` (a buffer handle) designates the event page. `RELEASE_MEM`
//! with an interrupt signals the event whose id is `int_ctx`, or else every signal event whose
//! mailbox was written. A compute queue's doorbell value is its write pointer in dwords, an
//! SDMA queue's in bytes (never wrapping); the read pointer, in the same unit, is written back
//! (64-bit) after every packet. Every queue of a GPU gets its own doorbell slot in the GPU's
//! doorbell page.
//!
//! **The process's KFD context** (its VMs, BOs, queues, events and event page) ends when its
//! last `/dev/kfd` descriptor is closed, as amdkfd's ends when the process exits: whatever the
//! driver left is reclaimed then, and a later `open("/dev/kfd")` starts afresh (a new
//! `ACQUIRE_VM`, a new event page). [`EmuKernel::live_objects`] counts what the process holds
//! now and [`EmuKernel::last_reclaimed`] what the last teardown had to reclaim, so a test can
//! tell a driver that releases everything from one that leaves it to the kernel. (KFD refuses
//! to free the event page, `EPERM`, so a correct driver leaves exactly that BO.)
//!
//! **Not emulated (yet)**: AQL queues (`CREATE_QUEUE` answers `EINVAL`), SDMA packets other
//! than those above (e.g. `COPY_LINEAR_RECT`, register-space `POLL_REGMEM`), doorbell
//! and MMIO buffers, register-space `WAIT_REG_MEM` other than the HDP flush, CPU protections
//! of buffer mappings, and placing a buffer's CPU view anywhere but at its own address.

#![deny(missing_docs)]

mod chip;
mod clock;
mod config;
mod cp;
mod dispatch;
mod drm;
mod events;
mod fds;
#[doc(hidden)]
pub mod fuzzing;
mod gpu;
pub mod host_memory;
mod hostmaps;
mod ioctl;
mod memory;
mod queue;
mod registers;
mod ring;
mod sdma;
mod sysfs;
mod topology;
mod util;

use std::ffi::c_void;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use hcq_amd_sys::seam::{EmulatorControl, Fd, Syscalls};

pub use chip::GpuArch;
pub use clock::GPU_CLOCK_HZ;
pub use config::{parse_size, ConfigError, EmuConfig, KfdRules, KfdVersion};
pub use fds::FIRST_FD;

use events::Events;
use fds::{FdTable, Node};
use gpu::Gpu;
use memory::{AddressSpace, BoTable};
use queue::{Doorbells, QueueTable};
use sysfs::Sysfs;
pub use sysfs::{SysfsEntry, SysfsKind};
use topology::{GpuNode, Topology};
use util::{errno, lock, MemWatch};

/// The process-global emulated kernel, configured from the environment on first use; every
/// call gives the same kernel, or the same error when a variable is malformed.
pub fn kernel() -> Result<&'static EmuKernel, ConfigError> {
    static KERNEL: OnceLock<Result<EmuKernel, ConfigError>> = OnceLock::new();
    KERNEL
        .get_or_init(|| EmuConfig::from_env().map(EmuKernel::new))
        .as_ref()
        .map_err(Clone::clone)
}

pub use hcq_amd_sys::seam::ShaderCounts;

/// Starts a thread: its name, stack size and body; answers its handle.
pub type ThreadStarter =
    fn(String, usize, Box<dyn FnOnce() + Send>) -> io::Result<std::thread::JoinHandle<()>>;

static THREAD_STARTER: OnceLock<ThreadStarter> = OnceLock::new();

/// Has the emulator's engine threads (a command processor or an SDMA engine per queue, and
/// through them the threads that run waves) started by `starter` instead of by the thread
/// creating the queue, for the process's lifetime. A new thread takes its scheduling priority
/// from the thread that makes it, and the queue is created on a thread of the program:
/// `hcq exec` lowers the program's priority and starts the engines from a thread of its own
/// that kept the original one. Answers `false` if a starter was already set (it stays).
pub fn set_thread_starter(starter: ThreadStarter) -> bool {
    THREAD_STARTER.set(starter).is_ok()
}

/// Starts one of the emulator's engine threads ([`set_thread_starter`]).
pub(crate) fn start_engine_thread(
    name: String,
    stack: usize,
    body: Box<dyn FnOnce() + Send>,
) -> io::Result<std::thread::JoinHandle<()>> {
    match THREAD_STARTER.get() {
        Some(starter) => starter(name, stack, body),
        None => std::thread::Builder::new()
            .name(name)
            .stack_size(stack)
            .spawn(body),
    }
}

/// What the emulated kernel holds for the process, for leak checks ([`EmuKernel::live_objects`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveObjects {
    /// Buffer objects not yet freed.
    pub buffer_objects: usize,
    /// Entries of the GPUs' page tables (a BO mapped on two GPUs counts twice).
    pub gpu_mappings: usize,
    /// Host address ranges held for BO memory: live BOs, and freed ones a queue still uses.
    pub host_ranges: usize,
    /// Doorbell regions mapped into the process and not unmapped (a partly unmapped one counts
    /// once for each part left).
    pub doorbell_mappings: usize,
    /// GPUs whose doorbell memory the KFD context has (made on its first queue or doorbell
    /// `mmap`; released when the context ends).
    pub doorbell_regions: usize,
    /// User-mode queues (compute and SDMA) created with `CREATE_QUEUE` and not yet destroyed.
    pub queues: usize,
    /// Events created with `CREATE_EVENT` and not yet destroyed.
    pub events: usize,
    /// 1 while an event page is set.
    pub event_pages: usize,
    /// Open descriptors of the emulated device nodes.
    pub file_descriptors: usize,
    /// GPUs whose VM the process has acquired.
    pub acquired_vms: usize,
}

impl LiveObjects {
    /// Whether nothing at all is held.
    pub fn is_empty(&self) -> bool {
        *self == LiveObjects::default()
    }
}

/// An emulated KFD kernel driver and its GPUs. Dropping it stops every queue.
pub struct EmuKernel {
    config: EmuConfig,
    topology: Topology,
    /// Built on first use: most kernels (one per fuzz input, per test) never read it.
    sysfs: OnceLock<Sysfs>,
    fds: FdTable,
    gpus: Vec<Arc<Gpu>>,
    bos: Mutex<BoTable>,
    space: Arc<AddressSpace>,
    events: Arc<Events>,
    queues: Mutex<QueueTable>,
    doorbells: Doorbells,
    watch: Arc<MemWatch>,
    /// What the last end of the process's KFD context reclaimed.
    reclaimed: Mutex<LiveObjects>,
    /// Whether a runtime announced itself with `RUNTIME_ENABLE`.
    runtime_enabled: std::sync::atomic::AtomicBool,
    /// Every `RUNTIME_ENABLE` call of the KFD context so far ([`EmuKernel::runtime_enable_calls`]).
    runtime_enable_calls: Mutex<Vec<RuntimeEnableCall>>,
}

/// One `RUNTIME_ENABLE` call as the emulated KFD saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeEnableCall {
    /// The call's `mode_mask` (0: the runtime withdraws, or says it is there without asking
    /// for debugging, as tinygrad does).
    pub mode_mask: u32,
    /// User queues the process had when it called.
    pub queues: usize,
    /// What the call returned: 0 or the errno.
    pub errno: i32,
}

impl std::fmt::Debug for EmuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuKernel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl EmuKernel {
    /// A fresh emulated kernel with its own GPUs, memory, events and queues.
    pub fn new(config: EmuConfig) -> Self {
        let events = Arc::new(Events::default());
        let watch = Arc::new(MemWatch::default());
        let vram_bytes = host_memory::vram_for(config.vram_bytes, &host_memory::current_limits());
        let gpus: Vec<Arc<Gpu>> = (0..config.gpus)
            .map(|i| {
                let id = Topology::gpu_id_for(i);
                let mut gpu = Gpu::new(
                    i as usize,
                    id,
                    vram_bytes,
                    config.max_steps,
                    config.arch.shape(config.cus),
                    Arc::clone(&events),
                    Arc::clone(&watch),
                );
                gpu.set_arch(config.arch);
                gpu.wrapped_read_pointers = config.wrapped_read_pointers;
                if let Some(mode) = config.jit {
                    gpu.code_cache = rdna3::CodeCache::with_jit(mode);
                }
                Arc::new(gpu)
            })
            .collect();
        let topology = Topology {
            gpus: gpus
                .iter()
                .map(|g| GpuNode {
                    arch: g.arch,
                    gpu_id: g.gpu_id,
                    render_minor: g.render_minor,
                    vram_bytes: g.vram_bytes,
                    shape: g.shape,
                })
                .collect(),
            cpu_cores: host_cpu_cores(),
        };
        EmuKernel {
            config,
            topology,
            sysfs: OnceLock::new(),
            fds: FdTable::default(),
            gpus,
            bos: Mutex::new(BoTable::default()),
            space: Arc::new(AddressSpace::default()),
            events,
            queues: Mutex::new(QueueTable::default()),
            doorbells: Doorbells::default(),
            watch,
            reclaimed: Mutex::default(),
            runtime_enabled: Default::default(),
            runtime_enable_calls: Mutex::new(Vec::new()),
        }
    }

    fn sysfs(&self) -> &Sysfs {
        self.sysfs.get_or_init(|| self.topology.sysfs())
    }

    /// Every directory, file and symbolic link of the emulated sysfs, each directory before
    /// its contents (what `hcq exec` writes out for a program to read).
    pub fn sysfs_entries(&self) -> &[SysfsEntry] {
        self.sysfs().entries()
    }

    /// The directories whose whole subtree the emulated sysfs defines.
    pub fn sysfs_roots(&self) -> &[String] {
        self.sysfs().roots()
    }

    /// Also writes every fault report to standard error as it is recorded, after `prefix`
    /// (`None`: stop). A program that knows nothing of the emulator (under `hcq exec`) never
    /// asks for [`Syscalls::take_fault_report`], so this is how its user learns why its GPU work
    /// died.
    pub fn echo_fault_reports(&self, prefix: Option<&str>) {
        for g in &self.gpus {
            *lock(&g.echo_reports) = prefix.map(str::to_string);
        }
    }

    /// The live queues of GPU `gpu_id` as (is an SDMA queue, `queue_priority`), in creation
    /// order.
    pub fn queue_priorities(&self, gpu_id: u32) -> Vec<(bool, u32)> {
        let Some(gpu) = self.gpu_by_id(gpu_id) else {
            return Vec::new();
        };
        lock(&self.queues)
            .queues
            .values()
            .filter(|q| q.gpu == gpu.index)
            .map(|q| (q.sdma, q.priority))
            .collect()
    }

    /// End-of-pipe interrupts (from `RELEASE_MEM` or SDMA `TRAP`) whose context named none of
    /// the process's signal events, so that KFD scanned the mailbox slot of every one of them
    /// (`kfd_signal_event_interrupt`'s slow path). A driver whose signals cause these makes
    /// the kernel do that work for every signal.
    pub fn event_scans(&self) -> u64 {
        self.events.event_scans()
    }

    /// Dispatches GPU `gpu_id` took from a PM4 queue whose `COMPUTE_PGM_RSRC1` lacked `PRIV`.
    /// The emulated gfx1100 runs them alike, but tinygrad found context save and restore
    /// (CWSR, how KFD preempts queues: on eviction, between processes, at suspend) failing
    /// on real gfx11 GPUs for such waves (its PR #6950), so a driver meant for them should
    /// leave this at 0. The emulator has no context save to show the failure itself.
    pub fn unprivileged_dispatches(&self, gpu_id: u32) -> u64 {
        self.gpu_by_id(gpu_id).map_or(0, |g| {
            g.stats
                .unprivileged
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// The process's `RUNTIME_ENABLE` calls since its KFD context began, in order. tinygrad
    /// found that ROCm 7's kernel driver needs one before user queues work (its PR #12502;
    /// upstream Linux does not), so a driver meant for both makes one, first.
    pub fn runtime_enable_calls(&self) -> Vec<RuntimeEnableCall> {
        lock(&self.runtime_enable_calls).clone()
    }

    /// Whether a VM fault has evicted the process's queues on GPU `gpu_id` (KFD never
    /// restores them: no engine of that GPU takes another packet while this kernel lives).
    pub fn queues_evicted(&self, gpu_id: u32) -> bool {
        self.gpu_by_id(gpu_id).is_some_and(|g| g.hold.is_evicted())
    }

    /// The configuration this kernel was built with.
    pub fn config(&self) -> &EmuConfig {
        &self.config
    }

    /// What GPU number `index` (topology order) has executed so far: dispatches, waves and
    /// wave-instructions. For benchmarks; the driver never sees it.
    pub fn shader_stats(&self, index: usize) -> Option<ShaderCounts> {
        let g = self.gpus.get(index)?;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Some(ShaderCounts {
            dispatches: load(&g.stats.dispatches),
            waves: load(&g.stats.waves),
            instructions: load(&g.stats.instructions),
        })
    }

    /// Holds (`true`) or releases the engines of GPU number `index`: while held, its command
    /// processors and copy engines take no new commands, so a benchmark can time the host's
    /// side of a submission without the emulator competing for the cores. Work waited for on
    /// a held GPU times out. `false` when there is no such GPU.
    pub fn hold_engines(&self, index: usize, held: bool) -> bool {
        match self.gpus.get(index) {
            Some(g) => {
                g.hold.set(held);
                true
            }
            None => false,
        }
    }

    /// Whether any of `[addr, addr + len)` is memory this kernel holds: a buffer's pages (live,
    /// or freed while a queue still uses them) or a mapped doorbell region. A process that
    /// intercepts its own `munmap` and `mmap(MAP_FIXED)` calls (`hcq exec`) asks this to tell
    /// which belong to the emulated driver. Takes only the kernel's own locks and allocates
    /// nothing.
    pub fn holds_range(&self, addr: u64, len: u64) -> bool {
        let end = addr.saturating_add(len.max(1));
        self.space.overlaps(addr, end) || self.doorbells.overlaps(addr, end)
    }

    /// `gpu_id`s of the emulated GPUs, in topology order (nodes 1..=n).
    pub fn gpu_ids(&self) -> Vec<u32> {
        self.gpus.iter().map(|g| g.gpu_id).collect()
    }

    /// What the process holds in this kernel right now.
    pub fn live_objects(&self) -> LiveObjects {
        let (events, page) = self.events.counts();
        LiveObjects {
            buffer_objects: lock(&self.bos).len(),
            gpu_mappings: self.gpus.iter().map(|g| g.page_table.len()).sum(),
            host_ranges: self.space.held_count(),
            doorbell_mappings: self.doorbells.mapping_count(),
            doorbell_regions: self.doorbells.region_count(),
            queues: lock(&self.queues).queues.len(),
            events,
            event_pages: usize::from(page),
            file_descriptors: self.fds.counts().0,
            acquired_vms: self
                .gpus
                .iter()
                .filter(|g| lock(&g.vm_fd).is_some())
                .count(),
        }
    }

    /// What the last end of the process's KFD context (the close of its last `/dev/kfd`
    /// descriptor) found still held and reclaimed; all zero before the first.
    pub fn last_reclaimed(&self) -> LiveObjects {
        *lock(&self.reclaimed)
    }

    /// The process's last `/dev/kfd` descriptor closed: stops and destroys its queues, destroys
    /// its events and frees its BOs, as amdkfd does when a process exits. Mappings in the
    /// process's address space are the process's to unmap and stay.
    fn end_process(&self) {
        let held = self.live_objects();
        let queues = std::mem::take(&mut lock(&self.queues).queues);
        for q in queues.values() {
            self.doorbells.unbind(q.gpu, q.slot);
            q.shared.stop();
        }
        self.watch.notify();
        for (_, mut q) in queues {
            if let Some(t) = q.thread.take() {
                let _ = t.join();
            }
        }
        self.doorbells.end_context();
        self.events.clear();
        let bos = lock(&self.bos).drain();
        for bo in &bos {
            for &g in &bo.mapped_on {
                if let Some(gpu) = self.gpus.get(g) {
                    gpu.page_table.unmap(bo.va);
                    gpu.code_cache.forget(bo.va, bo.size);
                }
            }
        }
        // The memory is released as each BO's storage goes (now, or once a page-table
        // snapshot still in use is dropped).
        drop(bos);
        for g in &self.gpus {
            *lock(&g.vram_used) = 0;
            g.gtt_used.store(0, std::sync::atomic::Ordering::Relaxed);
            *lock(&g.vm_fd) = None;
        }
        self.runtime_enabled
            .store(false, std::sync::atomic::Ordering::Relaxed);
        lock(&self.runtime_enable_calls).clear();
        // Doorbell memory has no call to release it: every context leaves it to the end, so
        // counting it would tell nothing about the driver.
        *lock(&self.reclaimed) = LiveObjects {
            doorbell_mappings: 0,
            doorbell_regions: 0,
            file_descriptors: 0,
            ..held
        };
    }

    fn gpu_by_id(&self, gpu_id: u32) -> Option<&Arc<Gpu>> {
        self.gpus.iter().find(|g| g.gpu_id == gpu_id)
    }
}

impl Drop for EmuKernel {
    fn drop(&mut self) {
        let queues = std::mem::take(&mut lock(&self.queues).queues);
        for q in queues.values() {
            q.shared.stop();
        }
        self.watch.notify();
        for (_, mut q) in queues {
            if let Some(t) = q.thread.take() {
                let _ = t.join();
            }
        }
    }
}

impl EmulatorControl for EmuKernel {
    fn shader_counts(&self, gpu_id: u32) -> Option<ShaderCounts> {
        let index = self.gpus.iter().position(|g| g.gpu_id == gpu_id)?;
        self.shader_stats(index)
    }
    fn hold_engines(&self, gpu_id: u32, held: bool) -> bool {
        match self.gpus.iter().position(|g| g.gpu_id == gpu_id) {
            Some(index) => EmuKernel::hold_engines(self, index, held),
            None => false,
        }
    }
}

impl Syscalls for EmuKernel {
    fn open(&self, path: &str) -> io::Result<Fd> {
        let node = if path == "/dev/kfd" {
            Node::Kfd
        } else {
            let minor = path
                .strip_prefix("/dev/dri/renderD")
                .and_then(|m| m.parse::<u32>().ok());
            match minor.and_then(|m| self.gpus.iter().find(|g| g.render_minor == m)) {
                Some(g) => Node::Render(g.index),
                None => return Err(errno(libc::ENOENT)),
            }
        };
        self.fds.open(node).ok_or_else(|| errno(libc::EMFILE))
    }

    fn close(&self, fd: Fd) {
        let node = self.fds.get(fd);
        if self.fds.close(fd) && node == Some(Node::Kfd) && self.fds.counts().1 == 0 {
            self.end_process();
        }
    }

    unsafe fn ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> io::Result<()> {
        // SAFETY: forwarded with the caller's guarantee about `arg`.
        unsafe { self.do_ioctl(fd, request, arg) }
    }

    unsafe fn mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> io::Result<*mut c_void> {
        // SAFETY: forwarded with the caller's guarantee about `MAP_FIXED` ranges.
        unsafe { self.do_mmap(addr, len, prot, flags, fd, offset) }
    }

    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> io::Result<()> {
        self.do_munmap(addr as usize as u64, len as u64)
    }

    fn read_to_string(&self, path: &str) -> io::Result<String> {
        self.sysfs().read_to_string(path)
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        self.sysfs().read_dir(path)
    }

    unsafe fn write_doorbell(&self, doorbell: *mut u64, value: u64) {
        self.doorbells.write(doorbell, value);
    }

    fn emulator(&self) -> Option<&dyn EmulatorControl> {
        Some(self)
    }
    fn take_fault_report(&self, gpu_id: u32) -> Option<hcq_core::FaultReport> {
        self.gpu_by_id(gpu_id)?.take_report()
    }
}

/// The CPU node's core count. Asked once: the answer comes from the cgroup's CPU quota files
/// and the affinity mask, which a process does not change under a running emulator.
fn host_cpu_cores() -> u32 {
    static CORES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}
