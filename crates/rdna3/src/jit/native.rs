//! Compiled blocks on this host: the shared cache of them, the per-thread arrival counts, the
//! executable memory, and the helper through which compiled code runs the interpreter.

use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::translate::{
    Translator, BRANCHED, ENDED, FELL_THROUGH, FRAME_LDS, FRAME_LDS_LEN, FRAME_SCC, FRAME_SGPR,
    FRAME_VGPR, STOPPED,
};
use super::{ends_block, BlockExit, BlockRun, JitMode, MAX_BLOCK_INSTRUCTIONS};
use crate::code_cache::{CachedInst, LocalCodeCache, PcMap};
use crate::exec::{ExecContext, Flow, Wave};
use crate::memory::Memory;
use crate::CodeCache;

/// The compiled blocks of one [`CodeCache`].
pub(crate) struct Jit {
    pub(crate) mode: JitMode,
    /// Made on the first compile (`None`: this CPU lacks what compiled code needs).
    translator: OnceLock<Option<Translator>>,
    blocks: RwLock<PcMap<Arc<Block>>>,
    /// Arrivals at block starts not compiled yet, summed over the dispatches that ended (each
    /// host thread counts its own during a dispatch: [`LocalBlocks`]).
    arrivals: Mutex<PcMap<u32>>,
    /// One compile at a time: two threads reaching a new block build it once.
    compiling: Mutex<()>,
}

impl std::fmt::Debug for Jit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jit")
            .field("mode", &self.mode)
            .field("compiled_blocks", &self.compiled_blocks())
            .finish()
    }
}

impl Jit {
    pub(crate) fn new(mode: JitMode) -> Self {
        Self {
            mode,
            translator: OnceLock::new(),
            blocks: RwLock::new(PcMap::default()),
            arrivals: Mutex::new(PcMap::default()),
            compiling: Mutex::new(()),
        }
    }

    /// Drops the compiled blocks with code in `[start, end)`.
    pub(crate) fn forget(&self, start: u64, end: u64) {
        if let Ok(mut map) = self.blocks.write() {
            map.retain(|_, block| block.end_pc <= start || block.insts[0].pc >= end);
        }
        if let Ok(mut arrivals) = self.arrivals.lock() {
            arrivals.retain(|pc, _| !(start..end).contains(pc));
        }
    }

    /// What a thread starts from at a block start it has not seen in this dispatch: the
    /// compiled block if there is one, else the arrivals counted so far.
    fn first_look(&self, pc: u64) -> Slot {
        if let Some(block) = self
            .blocks
            .read()
            .ok()
            .and_then(|map| map.get(&pc).cloned())
        {
            return Slot::Ready(block);
        }
        Slot::Cold(
            self.arrivals
                .lock()
                .ok()
                .and_then(|map| map.get(&pc).copied())
                .unwrap_or(0),
        )
    }

    /// Adds a finished dispatch's arrival counts (`LocalBlocks::counted`).
    pub(crate) fn add_arrivals(&self, local: &mut LocalBlocks) {
        let Ok(mut arrivals) = self.arrivals.lock() else {
            return;
        };
        for (&pc, slot) in &local.slots {
            // Threads start from the same sum and each adds its own; the largest is kept (an
            // undercount only delays a compile).
            if let Slot::Cold(count) = *slot {
                let total = arrivals.entry(pc).or_insert(0);
                *total = (*total).max(count);
            }
        }
        local.slots.clear();
    }

    pub(crate) fn compiled_blocks(&self) -> usize {
        self.blocks.read().map_or(0, |map| map.len())
    }

    /// The current compiled block at `pc`, compiling it if needed; `None` if it cannot be.
    fn block_at(&self, cache: &CodeCache, mem: &dyn Memory, pc: u64) -> Option<Arc<Block>> {
        let generation = cache.generation();
        let current = |block: &Arc<Block>| block.is_current(cache, mem, generation);
        let found = self.blocks.read().ok()?.get(&pc).cloned();
        if let Some(block) = found.filter(current) {
            return Some(block);
        }
        let _one_at_a_time = self.compiling.lock().ok()?;
        let found = self.blocks.read().ok()?.get(&pc).cloned();
        if let Some(block) = found.filter(current) {
            return Some(block);
        }
        let translator = self.translator.get_or_init(Translator::for_host).as_ref()?;
        let block = Arc::new(Block::build(translator, cache, mem, pc, generation)?);
        self.blocks.write().ok()?.insert(pc, Arc::clone(&block));
        Some(block)
    }
}

/// What a thread knows about one block start.
enum Slot {
    /// Reached this many times, not compiled.
    Cold(u32),
    Ready(Arc<Block>),
    /// Could not be compiled: always interpreted.
    Refused,
}

/// A host thread's view of the compiled blocks during a dispatch (no lock on the hot path);
/// its arrival counts go back to the [`Jit`] when the dispatch ends.
#[derive(Default)]
pub(crate) struct LocalBlocks {
    slots: PcMap<Slot>,
    /// The mappings (`Memory::region`) the last compiled global accesses fell in: translated
    /// once for the accesses to those buffers that follow. Valid for the dispatch.
    recent_regions: RecentRegions,
}

/// A mapping as `Memory::region` gives it: GPU start, length, host pointer of its start.
type Region = (u64, u64, *mut u8);
/// The last few mappings used, most recent first.
type RecentRegions = [Option<Region>; 4];

/// A compiled block.
pub(crate) struct Block {
    insts: Vec<Arc<CachedInst>>,
    /// Address after the last instruction.
    end_pc: u64,
    /// Target of the last instruction if it is a branch.
    branch_target: u64,
    code: ExecutableCode,
    vgpr_rows: usize,
    needs_f32_denormals: bool,
    /// Instructions run through the interpreter on every run.
    interpreted: usize,
    /// Generation of the code cache in which every instruction was last known to match memory.
    checked_generation: AtomicU64,
}

type BlockFn = unsafe extern "C" fn(*mut Frame, usize) -> u32;

impl Block {
    fn build(
        translator: &Translator,
        cache: &CodeCache,
        mem: &dyn Memory,
        pc: u64,
        generation: u64,
    ) -> Option<Block> {
        let mut insts = Vec::new();
        let mut at = pc;
        while insts.len() < MAX_BLOCK_INSTRUCTIONS {
            // The block stops before an instruction that cannot be fetched: the interpreter
            // reaches it and reports the fault.
            let Ok(entry) = cache.fetch(mem, at) else {
                break;
            };
            at = at.wrapping_add(entry.size_bytes());
            let last = ends_block(&entry.inst);
            insts.push(entry);
            if last {
                break;
            }
        }
        if insts.is_empty() {
            return None;
        }
        let decoded: Vec<&crate::Inst> = insts.iter().map(|entry| &entry.inst).collect();
        let compiled = translator.compile(&decoded)?;
        let last = insts.last()?;
        let branch_target = match &last.inst {
            crate::Inst::Sopp(i) => crate::exec::branch_target(last.pc, i.simm16),
            _ => at,
        };
        Some(Block {
            end_pc: at,
            branch_target,
            code: ExecutableCode::new(&compiled.code)?,
            vgpr_rows: compiled.vgpr_rows,
            interpreted: compiled.interpreted,
            needs_f32_denormals: compiled.needs_f32_denormals,
            insts,
            checked_generation: AtomicU64::new(generation),
        })
    }

    fn is_current(&self, cache: &CodeCache, mem: &dyn Memory, generation: u64) -> bool {
        if self.checked_generation.load(Ordering::Acquire) == generation {
            return true;
        }
        let current = self
            .insts
            .iter()
            .all(|entry| matches!(cache.revalidate(mem, entry, generation), Ok(true)));
        if current {
            self.checked_generation.store(generation, Ordering::Release);
        }
        current
    }

    /// Whether running the block on `wave` computes what interpreting it would.
    fn fits(&self, wave: &Wave, budget: u64) -> bool {
        self.insts.len() as u64 <= budget
            && self.vgpr_rows <= wave.vgpr.len()
            && (!self.needs_f32_denormals || wave.keeps_f32_denormals())
    }

    fn run(
        &self,
        wave: &mut Wave,
        ctx: &mut ExecContext<'_>,
        recent_regions: &mut RecentRegions,
    ) -> BlockRun {
        wave.note_vgpr_use(self.vgpr_rows);
        let wave: *mut Wave = wave;
        let mut frame = Frame {
            // SAFETY: `wave` comes from a live `&mut Wave`; these are pointers into it (and
            // its VGPR buffer), not references.
            sgpr: unsafe { (*wave).sgpr.as_mut_ptr() },
            // SAFETY: as above.
            vgpr: unsafe { (*wave).vgpr.as_mut_ptr().cast() },
            // SAFETY: as above.
            scc: unsafe { &raw mut (*wave).scc },
            // A pointer, not a reference: `run_instruction` reaches the LDS through `ctx`
            // while compiled code is stopped in it.
            lds: ctx.lds.as_mut_ptr(),
            lds_len: ctx.lds.len() as u64,
            wave,
            ctx: (ctx as *mut ExecContext<'_>).cast(),
            block: self,
            recent_regions,
            stop: None,
            panic: None,
        };
        // SAFETY: the code was compiled from this block's instructions by `Translator` for
        // the `BlockFn` ABI; it reads and writes only the register files the frame points
        // to, within the `vgpr_rows` rows `fits` checked the wave has, and the scalar file
        // (fixed size), and calls `run_instruction` with this frame and indices below
        // `insts.len()`.
        let answer =
            unsafe { (self.code.entry())(&mut frame, run_instruction as *const () as usize) };
        if let Some(payload) = frame.panic.take() {
            resume_unwind(payload);
        }
        let whole = |exit| BlockRun {
            executed: self.insts.len() as u64,
            exit,
        };
        match (answer, frame.stop.take()) {
            (FELL_THROUGH, _) => whole(BlockExit::Continue(self.end_pc)),
            (BRANCHED, _) => whole(BlockExit::Continue(self.branch_target)),
            (ENDED, _) => whole(BlockExit::End),
            (_, Some(run)) => run,
            (_, None) => BlockRun {
                executed: 0,
                exit: BlockExit::Fault(
                    crate::FaultKind::Unsupported(
                        "compiled block stopped without a reason (emulator defect)".to_string(),
                    ),
                    self.insts[0].pc,
                    None,
                ),
            },
        }
    }
}

/// What compiled code and `run_instruction` share. The register-file pointers come first,
/// at the offsets `translate.rs` reads them from.
#[repr(C)]
pub(super) struct Frame {
    sgpr: *mut u32,
    vgpr: *mut u32,
    scc: *mut bool,
    /// The workgroup's LDS and its size in bytes.
    lds: *mut u8,
    lds_len: u64,
    wave: *mut Wave,
    /// `*mut ExecContext<'_>`, lifetime erased.
    ctx: *mut c_void,
    block: *const Block,
    /// The mappings the last global accesses of this thread's dispatch fell in.
    recent_regions: *mut RecentRegions,
    stop: Option<BlockRun>,
    panic: Option<Box<dyn Any + Send>>,
}

const _: () = {
    assert!(std::mem::offset_of!(Frame, sgpr) == FRAME_SGPR as usize);
    assert!(std::mem::offset_of!(Frame, vgpr) == FRAME_VGPR as usize);
    assert!(std::mem::offset_of!(Frame, scc) == FRAME_SCC as usize);
    assert!(std::mem::offset_of!(Frame, lds) == FRAME_LDS as usize);
    assert!(std::mem::offset_of!(Frame, lds_len) == FRAME_LDS_LEN as usize);
};

/// The host address of the GPU range `[lo, hi + bytes)` if it is mapped (one translation,
/// as the interpreter's `wave_span`), else null: the compiled code then has the interpreter
/// run the instruction, which reports what it finds.
pub(super) unsafe extern "C" fn translate_span(
    frame: *mut Frame,
    lo: u64,
    hi: u64,
    bytes: u64,
) -> *mut u8 {
    // SAFETY: compiled code passes the frame `Block::run` made; its context outlives the
    // call and is not otherwise in use while compiled code runs.
    let frame = unsafe { &mut *frame };
    // SAFETY: as above.
    let ctx = unsafe { &*frame.ctx.cast::<ExecContext<'_>>() };
    let Some(end) = hi.checked_add(bytes).filter(|&end| end >= lo) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `Block::run`'s caller lends the thread's recent regions for the run.
    let recent = unsafe { &mut *frame.recent_regions };
    let inside = |&(start, len, _): &Region| {
        lo >= start && end.checked_sub(start).is_some_and(|span| span <= len)
    };
    if let Some(hit) = recent.iter().position(|r| r.as_ref().is_some_and(inside)) {
        // Most recent first: a loop reading two buffers in turn hits every time.
        recent[..=hit].rotate_right(1);
        if let Some((start, _, base)) = recent[0] {
            // `Memory::region`'s guarantees for the whole mapping cover `[lo, end)`.
            return base.wrapping_add((lo - start) as usize);
        }
    }
    // A panicking `Memory` must not unwind through compiled code: answering null has the
    // interpreter translate again, and panic where it may.
    catch_unwind(AssertUnwindSafe(|| {
        if let Some(region) = ctx.mem.region(lo).filter(inside) {
            recent.rotate_right(1);
            recent[0] = Some(region);
            return Some(region.2.wrapping_add((lo - region.0) as usize));
        }
        ctx.mem.translate(lo, end - lo)
    }))
    .ok()
    .flatten()
    .unwrap_or(std::ptr::null_mut())
}

/// Runs instruction `index` of the frame's block in the interpreter. Answers 0 to go on, or
/// `STOPPED` (with `frame.stop` set) to leave the block. A panic is caught here and resumed by
/// [`Block::run`] once the compiled code has returned (it must not unwind through it).
unsafe extern "C" fn run_instruction(frame: *mut Frame, index: u32) -> u32 {
    // SAFETY: compiled code passes the frame `Block::run` made, which outlives the call.
    let frame = unsafe { &mut *frame };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the frame's pointers come from the `&mut Wave`, `&mut ExecContext` and
        // `&Block` of `Block::run`, which uses none of them until the compiled code returns;
        // compiled code does not touch memory while this runs.
        let (wave, ctx, block) = unsafe {
            (
                &mut *frame.wave,
                &mut *frame.ctx.cast::<ExecContext<'_>>(),
                &*frame.block,
            )
        };
        let entry = &block.insts[index as usize];
        let next = entry.pc.wrapping_add(entry.size_bytes());
        wave.pc = entry.pc;
        let exit = match wave.execute(ctx, &entry.inst, entry.size_bytes()) {
            Ok(Flow::Next) if block.needs_f32_denormals && !wave.keeps_f32_denormals() => {
                Some(BlockExit::Continue(next))
            }
            Ok(Flow::Next) => None,
            Ok(Flow::Jump(target)) => Some(BlockExit::Continue(target)),
            Ok(Flow::Barrier) => Some(BlockExit::Barrier(next)),
            Ok(Flow::End) => Some(BlockExit::End),
            Err(kind) => Some(BlockExit::Fault(
                kind,
                entry.pc,
                Some(entry.inst.to_string()),
            )),
        };
        // Fresh pointers for the compiled code, derived after this function's accesses.
        frame.sgpr = wave.sgpr.as_mut_ptr();
        frame.vgpr = wave.vgpr.as_mut_ptr().cast();
        frame.scc = &raw mut wave.scc;
        exit.map(|exit| BlockRun {
            executed: u64::from(index) + 1,
            exit,
        })
    }));
    match outcome {
        Ok(None) => 0,
        Ok(Some(run)) => {
            frame.stop = Some(run);
            STOPPED
        }
        Err(payload) => {
            frame.panic = Some(payload);
            STOPPED
        }
    }
}

/// Compiles the block at the wave's PC (in any mode) and runs it once, if it fits.
pub(crate) fn run_once(
    cache: &CodeCache,
    mem: &dyn Memory,
    wave: &mut Wave,
    ctx: &mut ExecContext<'_>,
) -> Option<BlockRun> {
    let block = cache.jit.block_at(cache, mem, wave.pc)?;
    block
        .fits(wave, u64::MAX)
        .then(|| block.run(wave, ctx, &mut [None; 4]))
}

/// How many instructions of the compiled block at `pc` have no inlined form (compiling it if
/// need be); `None` if it does not compile.
pub(crate) fn interpreted_in_block(cache: &CodeCache, mem: &dyn Memory, pc: u64) -> Option<usize> {
    Some(cache.jit.block_at(cache, mem, pc)?.interpreted)
}

/// Runs the compiled block starting at the wave's PC if there is one that fits; `None` means
/// "interpret". Counts arrivals and compiles hot blocks.
pub(crate) fn run_block(
    code: &mut LocalCodeCache<'_>,
    mem: &dyn Memory,
    wave: &mut Wave,
    ctx: &mut ExecContext<'_>,
    budget: u64,
) -> Option<BlockRun> {
    let shared = code.shared;
    let threshold = shared.jit.mode.threshold()?;
    let pc = wave.pc;
    let generation = shared.generation();
    let LocalBlocks {
        slots,
        recent_regions,
    } = &mut code.blocks;
    let slot = slots.entry(pc).or_insert_with(|| shared.jit.first_look(pc));
    match slot {
        Slot::Ready(block) => {
            if !block.is_current(shared, mem, generation) {
                *slot = Slot::Cold(0);
                return None;
            }
            if !block.fits(wave, budget) {
                return None;
            }
            Some(block.run(wave, ctx, recent_regions))
        }
        Slot::Refused => None,
        Slot::Cold(arrivals) => {
            *arrivals += 1;
            if *arrivals < threshold {
                return None;
            }
            let Some(block) = shared.jit.block_at(shared, mem, pc) else {
                *slot = Slot::Refused;
                return None;
            };
            let fits = block.fits(wave, budget);
            *slot = Slot::Ready(block);
            let Slot::Ready(block) = slot else {
                return None;
            };
            fits.then(|| block.run(wave, ctx, recent_regions))
        }
    }
}

/// Machine code in pages of its own, executable and not writable.
struct ExecutableCode {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the pages are immutable after `new` and freed only by `Drop`; sharing the pointer
// between threads shares read-only code.
unsafe impl Send for ExecutableCode {}
// SAFETY: as above.
unsafe impl Sync for ExecutableCode {}

impl ExecutableCode {
    fn new(code: &[u8]) -> Option<Self> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        let len = code.len().max(1).div_ceil(page) * page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        let this = Self {
            ptr: NonNull::new(ptr.cast())?,
            len,
        };
        // SAFETY: the mapping is `len >= code.len()` writable bytes, ours alone.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), this.ptr.as_ptr(), code.len()) };
        // SAFETY: changes the protection of our own mapping only.
        let protected = unsafe { libc::mprotect(ptr, len, libc::PROT_READ | libc::PROT_EXEC) } == 0;
        protected.then_some(this)
    }

    fn entry(&self) -> BlockFn {
        // SAFETY: the pages hold a function compiled for the `BlockFn` ABI at offset 0
        // (Cranelift places the entry first) and are executable.
        unsafe { std::mem::transmute::<*mut u8, BlockFn>(self.ptr.as_ptr()) }
    }
}

impl Drop for ExecutableCode {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `new` made; no code runs from it any more (every block
        // run holds an `Arc` of its block).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
