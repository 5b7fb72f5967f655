//! An emulated AMD GPU that plugs in below the driver, at the Linux kernel boundary.
//!
//! [`EmuKernel`] implements [`hcq_amd_sys::seam::Kernel`], the driver's only way to reach the
//! kernel, and plays the part of the `amdkfd` kernel driver and of the GPUs behind it:
//!
//! - **Device nodes**: `open("/dev/kfd")` and `open("/dev/dri/renderD<128+i>")` return
//!   descriptors at or above `0x4000_0000`, which no real descriptor of the process reaches.
//! - **Topology**: `/sys/devices/virtual/kfd/kfd/topology/nodes/N/{gpu_id,name,properties,
//!   mem_banks/0/properties}`. Node 0 is the CPU; nodes `1..=n` are gfx1100 GPUs (an RX 7900
//!   XTX's properties, with `local_mem_size` the configured VRAM).
//! - **ioctls** on `/dev/kfd`, with the request numbers and `#[repr(C)]` structs of
//!   `linux/kfd_ioctl.h` (ABI 1.11): `GET_VERSION`, `ACQUIRE_VM`, `ALLOC_MEMORY_OF_GPU` (VRAM,
//!   GTT, USERPTR), `FREE_MEMORY_OF_GPU`, `MAP_MEMORY_TO_GPU`, `UNMAP_MEMORY_FROM_GPU`,
//!   `CREATE_EVENT`, `DESTROY_EVENT`, `SET_EVENT`, `RESET_EVENT`, `WAIT_EVENTS`,
//!   `CREATE_QUEUE` (PM4 compute queues and SDMA copy queues), `DESTROY_QUEUE`, `GET_CLOCK_COUNTERS`,
//!   `AVAILABLE_MEMORY`.
//! - **Memory**: GPU memory is host memory at the virtual address the driver chose. A VRAM or
//!   GTT buffer is backed when it is allocated, over the driver's `PROT_NONE` reservation; the
//!   render-node `mmap` at its `mmap_offset` then just exposes it. Every GPU access is checked
//!   against that GPU's page table (the buffers mapped to it); an access outside is a VM fault,
//!   never a crash. CPU protections of buffer mappings are not enforced (buffers stay
//!   read-write), and a render-node `mmap` can only place a buffer at its own address.
//! - **Doorbells**: `mmap` of `/dev/kfd` at a queue's `doorbell_offset & !0x1fff` gives the
//!   doorbell page; [`Kernel::write_doorbell`] wakes the queue's command processor.
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
//!   recorded as a human-readable report ([`Kernel::take_fault_report`]) and raises the
//!   process's memory-exception (VM faults, with the address) or hardware-exception events;
//!   the queue then goes on with the next packet.
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
//! | `HCQ_EMU_VRAM` | VRAM bytes per GPU; suffixes `K`, `M`, `G`, `T` (binary) | 16G |
//!
//! A malformed value leaves the default.
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
//! **Not emulated (yet)**: AQL queues (`CREATE_QUEUE` answers `EINVAL`), SDMA packets other
//! than those above (e.g. `COPY_LINEAR_RECT`, register-space `POLL_REGMEM`), doorbell
//! and MMIO buffers, register-space `WAIT_REG_MEM` other than the HDP flush, CPU protections
//! of buffer mappings, and placing a buffer's CPU view anywhere but at its own address.

mod clock;
mod config;
mod cp;
mod dispatch;
mod events;
mod fds;
#[doc(hidden)]
pub mod fuzzing;
mod gpu;
mod hostmaps;
mod ioctl;
mod memory;
mod queue;
mod ring;
mod sdma;
mod topology;
mod util;

use std::ffi::c_void;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use hcq_amd_sys::seam::{Fd, Kernel};

pub use clock::GPU_CLOCK_HZ;
pub use config::{parse_size, EmuConfig};
pub use fds::FIRST_FD;

use events::Events;
use fds::{FdTable, Node};
use gpu::Gpu;
use memory::{AddressSpace, BoTable};
use queue::{Doorbells, QueueTable};
use topology::{GpuNode, Topology};
use util::{errno, lock, MemWatch};

/// The process-global emulated kernel, configured from the environment on first use.
pub fn kernel() -> &'static EmuKernel {
    static KERNEL: OnceLock<EmuKernel> = OnceLock::new();
    KERNEL.get_or_init(|| EmuKernel::new(EmuConfig::from_env()))
}

/// Totals of the dispatches a GPU has completed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShaderCounts {
    pub dispatches: u64,
    pub waves: u64,
    pub instructions: u64,
}

/// An emulated KFD kernel driver and its GPUs. Dropping it stops every queue.
pub struct EmuKernel {
    config: EmuConfig,
    topology: Topology,
    fds: FdTable,
    gpus: Vec<Arc<Gpu>>,
    bos: Mutex<BoTable>,
    space: Arc<AddressSpace>,
    events: Arc<Events>,
    queues: Mutex<QueueTable>,
    doorbells: Doorbells,
    watch: Arc<MemWatch>,
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
        let gpus: Vec<Arc<Gpu>> = (0..config.gpus)
            .map(|i| {
                let id = Topology::gpu_id_for(i);
                Arc::new(Gpu::new(
                    i as usize,
                    id,
                    config.vram_bytes,
                    config.max_steps,
                    Arc::clone(&events),
                    Arc::clone(&watch),
                ))
            })
            .collect();
        let topology = Topology {
            gpus: gpus
                .iter()
                .map(|g| GpuNode {
                    gpu_id: g.gpu_id,
                    render_minor: g.render_minor,
                    vram_bytes: g.vram_bytes,
                })
                .collect(),
            cpu_cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        };
        EmuKernel {
            config,
            topology,
            fds: FdTable::default(),
            gpus,
            bos: Mutex::new(BoTable::default()),
            space: Arc::new(AddressSpace::default()),
            events,
            queues: Mutex::new(QueueTable::default()),
            doorbells: Doorbells::default(),
            watch,
        }
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

    /// `gpu_id`s of the emulated GPUs, in topology order (nodes 1..=n).
    pub fn gpu_ids(&self) -> Vec<u32> {
        self.gpus.iter().map(|g| g.gpu_id).collect()
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

impl Kernel for EmuKernel {
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
        self.fds.close(fd);
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
        self.topology.read_to_string(path)
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        self.topology.read_dir(path)
    }

    unsafe fn write_doorbell(&self, doorbell: *mut u64, value: u64) {
        self.doorbells.write(doorbell, value);
    }

    fn take_fault_report(&self, gpu_id: u32) -> Option<String> {
        self.gpu_by_id(gpu_id)?.take_report()
    }
}
