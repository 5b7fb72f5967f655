//! One emulated GPU: its page table, instruction cache, VRAM accounting and fault log.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use hcq_amd_sys::queue_areas::NodeShape;
use hcq_amd_sys::seam::Fd;

use crate::dispatch::CodeCache;
use crate::events::Events;
use crate::memory::PageTable;
use crate::queue::QueueShared;
use crate::registers::Registers;
use crate::util::{lock, wait_timeout, MemWatch};

/// Fault reports kept per GPU before the oldest are dropped.
const MAX_REPORTS: usize = 1024;

/// What kind of fault an engine raises, and so which exception events it signals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FaultClass {
    /// A GPU access to unmapped memory at `va`: memory-exception events.
    Vm { va: u64 },
    /// A command packet the engine cannot execute: hardware-exception events.
    BadPacket,
    /// A fault with no finer account (a write pointer outside the ring, an interpreter
    /// panic): hardware-exception events.
    Hw,
    /// A shader's fault, as the interpreter describes it: memory-exception events for a VM
    /// fault, hardware-exception events otherwise.
    Shader {
        kind: hcq_core::FaultKind,
        address: Option<u64>,
        pc: u64,
        instruction: Option<String>,
    },
}

impl FaultClass {
    /// The class of an interpreter fault.
    pub fn of_shader(fault: &rdna3::Fault) -> FaultClass {
        use hcq_core::FaultKind as Kind;
        use rdna3::FaultKind as Raised;
        let (kind, address) = match fault.kind {
            Raised::VmFault { addr, .. } => (Kind::MemoryFault, Some(addr)),
            Raised::Undecodable { .. }
            | Raised::IllegalOperand { .. }
            | Raised::VgprOutOfRange { .. } => (Kind::IllegalInstruction, None),
            Raised::Unimplemented { .. } => (Kind::UnimplementedInstruction, None),
            Raised::LdsOutOfRange { addr } => (Kind::LdsOutOfRange, Some(addr)),
            Raised::StepBudgetExceeded { .. } => (Kind::StepBudgetExhausted, None),
            Raised::Unsupported(_) => (Kind::Unsupported, None),
            Raised::Trap { .. } => (Kind::Trap, None),
            Raised::Aborted => (Kind::HardwareException, None),
        };
        FaultClass::Shader {
            kind,
            address,
            pc: fault.pc,
            instruction: fault.instruction.clone(),
        }
    }

    /// The report of this fault, with `message` as its account.
    fn report(self, message: String) -> hcq_core::FaultReport {
        use hcq_core::{FaultKind, FaultReport};
        match self {
            FaultClass::Vm { va } => {
                FaultReport::new(FaultKind::MemoryFault, message).at_address(va)
            }
            FaultClass::BadPacket => FaultReport::new(FaultKind::BadCommandPacket, message),
            FaultClass::Hw => FaultReport::new(FaultKind::HardwareException, message),
            FaultClass::Shader {
                kind,
                address,
                pc,
                instruction,
            } => FaultReport {
                kind,
                address,
                pc: Some(pc),
                instruction,
                message,
            },
        }
    }
}

/// The state of one GPU shared by its command processors and the ioctl handlers.
pub(crate) struct Gpu {
    /// Which GPU it is; only a model the emulator runs has working engines.
    pub arch: crate::GpuArch,
    /// What its topology node says it is.
    pub shape: NodeShape,
    pub index: usize,
    pub gpu_id: u32,
    pub render_minor: u32,
    pub vram_bytes: u64,
    pub vram_used: Mutex<u64>,
    /// Bytes of GTT buffer objects allocated on this GPU (amdgpu's GTT heap usage).
    pub gtt_used: std::sync::atomic::AtomicU64,
    /// The render node descriptor `ACQUIRE_VM` bound to this GPU.
    pub vm_fd: Mutex<Option<Fd>>,
    pub page_table: PageTable,
    pub code_cache: CodeCache,
    /// The registers the engines reach (HDP flush, GRBM_GFX_INDEX).
    pub registers: Registers,
    pub events: Arc<Events>,
    pub watch: Arc<MemWatch>,
    pub max_steps: u64,
    /// Read pointers are reported modulo the ring size ([`crate::EmuConfig`]).
    pub wrapped_read_pointers: bool,
    /// What the shader engines have executed, for benchmarks.
    pub stats: ShaderStats,
    /// Benchmarks hold the engines to time the host's side of a submission alone.
    pub hold: Arc<EngineHold>,
    reports: Mutex<VecDeque<hcq_core::FaultReport>>,
    /// Also writes each report to the process's standard error, after this prefix.
    pub echo_reports: Mutex<Option<String>>,
}

/// Whether a GPU's engines (command processors and copy engines) take new commands. While
/// held, submissions queue up in the rings untouched; a CPU-emulated GPU would otherwise take
/// the host's cores the moment a doorbell rings, which a benchmark of the host's submission
/// cost must leave out (a real GPU runs on its own silicon).
#[derive(Debug, Default)]
pub struct EngineHold {
    held: AtomicBool,
    /// Set by a VM fault: KFD evicts every queue the process has on the GPU
    /// (`kfd_dqm_evict_pasid`) and nothing ever restores them, so no engine takes another
    /// packet, from the queues that exist or from queues created later, for the life of the
    /// process (the emulated kernel's).
    evicted: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    /// The GPU's queues, to wake those whose doorbell rang while held.
    queues: Mutex<Vec<Weak<QueueShared>>>,
}

impl EngineHold {
    pub fn set(&self, held: bool) {
        {
            let _g = lock(&self.lock);
            self.held.store(held, Ordering::SeqCst);
            self.cv.notify_all();
        }
        if !held {
            let mut queues = lock(&self.queues);
            queues.retain(|q| q.strong_count() > 0);
            for q in queues.iter().filter_map(Weak::upgrade) {
                q.wake_if_rung();
            }
        }
    }

    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// Stops every engine of the GPU for good (see `evicted`).
    pub fn evict(&self) {
        let _g = lock(&self.lock);
        self.evicted.store(true, Ordering::SeqCst);
        self.cv.notify_all();
    }

    /// Whether a VM fault has evicted the process's queues.
    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::SeqCst)
    }

    /// Forgets an eviction: for harnesses that run many independent inputs on one GPU, each
    /// standing for a process of its own.
    pub(crate) fn readmit(&self) {
        self.evicted.store(false, Ordering::SeqCst);
    }

    pub(crate) fn register(&self, queue: &Arc<QueueShared>) {
        let mut queues = lock(&self.queues);
        // Destroyed queues leave only a dead reference: drop those here, or every queue ever
        // created would stay in the list (with its allocation) for the GPU's lifetime.
        queues.retain(|q| q.strong_count() > 0);
        queues.push(Arc::downgrade(queue));
    }

    /// Queues registered and not yet gone.
    pub(crate) fn registered_queues(&self) -> usize {
        lock(&self.queues).len()
    }

    /// Blocks while the engines are held or evicted, or until `stopped` says the queue is
    /// gone.
    pub fn wait(&self, stopped: impl Fn() -> bool) {
        let blocked = || self.held.load(Ordering::SeqCst) || self.evicted.load(Ordering::SeqCst);
        if !blocked() {
            return;
        }
        let mut g = lock(&self.lock);
        while blocked() && !stopped() {
            g = wait_timeout(&self.cv, g, Duration::from_millis(10));
        }
    }
}

/// Counters of completed dispatches on one GPU.
#[derive(Debug, Default)]
pub struct ShaderStats {
    pub dispatches: AtomicU64,
    pub waves: AtomicU64,
    pub instructions: AtomicU64,
    /// Dispatches whose `COMPUTE_PGM_RSRC1` lacked `PRIV` ([`crate::EmuKernel::unprivileged_dispatches`]).
    pub unprivileged: AtomicU64,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("gpu_id", &self.gpu_id)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Stores an engine's read pointer where the driver reads it and wakes engines polling
    /// memory; false when that address is not mapped for this GPU.
    pub fn publish_read_pointer(&self, addr: u64, value: u64) -> bool {
        let ok = self.page_table.snapshot().store_u64(addr, value).is_some();
        if ok {
            self.watch.notify();
        }
        ok
    }

    /// Makes this GPU a `arch` (a gfx1100 when not said): a model the emulator does not run
    /// has no register model.
    pub fn set_arch(&mut self, arch: crate::GpuArch) {
        self.arch = arch;
        if !arch.runs() {
            self.registers = Registers::unmodelled();
        }
    }

    pub fn new(
        index: usize,
        gpu_id: u32,
        vram_bytes: u64,
        max_steps: u64,
        shape: NodeShape,
        events: Arc<Events>,
        watch: Arc<MemWatch>,
    ) -> Self {
        Gpu {
            arch: crate::GpuArch::Gfx1100,
            shape,
            index,
            gpu_id,
            render_minor: 128 + index as u32,
            vram_bytes,
            vram_used: Mutex::new(0),
            gtt_used: Default::default(),
            vm_fd: Mutex::new(None),
            page_table: PageTable::default(),
            code_cache: CodeCache::new(),
            registers: Registers::default(),
            events,
            watch,
            max_steps,
            wrapped_read_pointers: false,
            stats: ShaderStats::default(),
            hold: Arc::default(),
            reports: Mutex::new(VecDeque::new()),
            echo_reports: Mutex::new(None),
        }
    }

    /// Records a fault report and signals the matching exception events.
    pub fn raise(&self, class: FaultClass, what: &str) {
        let report = class.report(format!("gpu {}: {what}", self.gpu_id));
        let memory_fault = (report.kind == hcq_core::FaultKind::MemoryFault)
            .then_some(report.address)
            .flatten();
        {
            let mut r = lock(&self.reports);
            if r.len() >= MAX_REPORTS {
                r.pop_front();
            }
            if let Some(prefix) = lock(&self.echo_reports).as_deref() {
                eprintln!("{prefix}{report}");
            }
            r.push_back(report);
        }
        match memory_fault {
            Some(va) => {
                // As KFD's interrupt handler: evict the process's queues, then signal.
                self.hold.evict();
                self.events.memory_exception(self.gpu_id, va)
            }
            None => self.events.hw_exception(self.gpu_id),
        }
    }

    /// Pops the oldest fault report.
    pub fn take_report(&self) -> Option<hcq_core::FaultReport> {
        lock(&self.reports).pop_front()
    }

    /// VRAM bytes not allocated.
    pub fn vram_available(&self) -> u64 {
        self.vram_bytes.saturating_sub(*lock(&self.vram_used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destroyed_queues_do_not_stay_registered() {
        let hold = Arc::new(EngineHold::default());
        let doorbells = crate::queue::Doorbells::default();
        let slot = || doorbells.slot(0, 0).unwrap();
        let live = QueueShared::new(&hold, slot());
        for _ in 0..100 {
            drop(QueueShared::new(&hold, slot()));
        }
        // The live queue and at most the last destroyed one.
        assert!(
            hold.registered_queues() <= 2,
            "{}",
            hold.registered_queues()
        );
        drop(live);
    }
}
