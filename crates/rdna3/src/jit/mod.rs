//! Block compiler: straight runs of instructions compiled to host code with Cranelift.
//!
//! A *block* starts where a wave's control arrives from elsewhere (the kernel entry, a branch
//! target, the instruction after a branch or a barrier) and runs to the first instruction that
//! may change the flow ([`ends_block`]) or to [`MAX_BLOCK_INSTRUCTIONS`]. The interpreter
//! counts how often each block start is reached; once a block is hot ([`JitMode`]) it is
//! compiled: the common vector and scalar ALU operations, whole-dword global and LDS loads
//! and stores, and scalar loads become host code, timing-only instructions (`s_waitcnt`, `s_delay_alu`, ...) become
//! nothing, a final branch or `s_endpgm` becomes the block's exit, and every other
//! instruction becomes a call back into the interpreter for that one instruction. The two
//! share the wave's registers in memory, so a block may mix them freely; every fault (a
//! memory access the compiled code cannot translate is handed to the interpreter) and every
//! rare operation keeps exactly one implementation: the interpreter's.
//!
//! A compiled block runs only when it cannot change what the wave computes:
//! - the wave has the VGPRs its inlined code touches (otherwise the interpreter runs and
//!   faults on the register, as it would have);
//! - MODE keeps f32 denormals when the block inlines f32 arithmetic (the interpreter flushes
//!   otherwise); an instruction that changes MODE ends the block;
//! - the step budget has room for the whole block (so the budget fault lands on the same
//!   instruction);
//! - the code in memory is still what was compiled (checked once per [`CodeCache`]
//!   generation, like the decode cache).
//!
//! Compiled code exists only on x86-64 Unix hosts, where memory written and then made
//! executable needs no instruction-cache maintenance; elsewhere every wave is interpreted.
//!
//! `HCQ_EMU_JIT` chooses the mode of every [`CodeCache::new`] ([`JitMode`]): `off`, `eager`
//! (compile each block the first time it is reached; what the tests use to run everything
//! compiled), or unset / `on` for the default, compiling a block on its [`TIER_THRESHOLD`]th
//! arrival (summed over dispatches).

#[cfg(all(target_arch = "x86_64", unix))]
mod native;
#[cfg(all(target_arch = "x86_64", unix))]
mod translate;

use crate::decode::Inst;
use crate::isa::{Sop1Op, SopkOp};

#[cfg(all(target_arch = "x86_64", unix))]
pub(crate) use native::{interpreted_in_block, run_block, run_once, Jit, LocalBlocks};
#[cfg(not(all(target_arch = "x86_64", unix)))]
pub(crate) use portable::{interpreted_in_block, run_block, run_once, Jit, LocalBlocks};

use crate::exec::{ExecContext, Wave};
use crate::CodeCache;

/// Compiles the block at `wave.pc` (whatever `cache`'s mode) and runs it once on `wave`;
/// answers the instructions executed and the exit. `None` where there is no block compiler,
/// or the block cannot be compiled or does not fit the wave. The hook through which the tests
/// hold compiled code to the interpreter.
#[doc(hidden)]
pub fn run_compiled_block(
    cache: &CodeCache,
    wave: &mut Wave,
    ctx: &mut ExecContext<'_>,
) -> Option<(u64, BlockExit)> {
    let mem = ctx.mem;
    run_once(cache, mem, wave, ctx).map(|run| (run.executed, run.exit))
}
/// How many instructions of the block at `pc` the compiled code hands to the interpreter
/// every time it runs (they have no inlined form); `None` where there is no block compiler or
/// the block does not compile. The hook through which the tests check that what they hold
/// to the interpreter is compiled code.
#[doc(hidden)]
pub fn interpreted_in_compiled_block(
    cache: &CodeCache,
    mem: &dyn crate::Memory,
    pc: u64,
) -> Option<usize> {
    interpreted_in_block(cache, mem, pc)
}

/// Longest block, in instructions.
pub const MAX_BLOCK_INSTRUCTIONS: usize = 256;

/// Arrivals at a block start before the block is compiled in [`JitMode::Tiered`]. Compiling
/// a block costs about as much as interpreting it several hundred times (Cranelift spends
/// ~50 µs per instruction; compiled code saves ~50-90 ns per instruction run), so a block
/// reached between this many times and that, and never again, costs more than it saves. The
/// threshold is set low for the programs that matter most, which repeat their work (a
/// training loop, a replayed graph: tinygrad's MLP step under `hcq exec` ran in 31-33 ms with
/// 1000, 17-20 ms with 100, on a 2-core host). Counted per host thread during a dispatch and
/// summed across dispatches.
pub const TIER_THRESHOLD: u32 = 100;

/// When blocks are compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JitMode {
    /// Never: every instruction is interpreted.
    Off,
    /// A block once it has been reached [`TIER_THRESHOLD`] times (the default).
    Tiered,
    /// Every block the first time it is reached.
    Eager,
}

impl JitMode {
    /// Parses an `HCQ_EMU_JIT` value: `off` (or `0`), `on` (or `1`, `tiered`), `eager`.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "off" | "0" => Some(JitMode::Off),
            "on" | "1" | "tiered" => Some(JitMode::Tiered),
            "eager" => Some(JitMode::Eager),
            _ => None,
        }
    }

    /// The mode `HCQ_EMU_JIT` asks for; unset, empty or not a mode ([`JitMode::parse`]):
    /// [`JitMode::Tiered`] (an embedder that wants a bad value refused checks it with
    /// `parse`, as `hcq-emu`'s configuration does).
    pub fn from_env() -> Self {
        std::env::var("HCQ_EMU_JIT")
            .ok()
            .and_then(|v| Self::parse(&v))
            .unwrap_or(JitMode::Tiered)
    }

    fn threshold(self) -> Option<u32> {
        match self {
            JitMode::Off => None,
            JitMode::Tiered => Some(TIER_THRESHOLD),
            JitMode::Eager => Some(1),
        }
    }
}

/// Whether a block ends after `inst`: it may branch, end the wave, wait at a barrier, or
/// change MODE (the next block's checks must see the new MODE).
pub fn ends_block(inst: &Inst) -> bool {
    match inst {
        Inst::Sopp(i) => !crate::exec::timing_only(i.op),
        Inst::Sop1(i) => matches!(i.op, Sop1Op::S_SETPC_B64 | Sop1Op::S_SWAPPC_B64),
        Inst::Sopk(i) => matches!(
            i.op,
            SopkOp::S_CALL_B64 | SopkOp::S_SETREG_B32 | SopkOp::S_SETREG_IMM32_B32
        ),
        _ => false,
    }
}

/// How a compiled block left the wave.
#[derive(Debug, PartialEq)]
pub enum BlockExit {
    /// Continue at this address.
    Continue(u64),
    /// Wait at a barrier, then continue at this address.
    Barrier(u64),
    /// The wave ended.
    End,
    /// An instruction faulted: the fault, its address and its disassembly.
    Fault(crate::FaultKind, u64, Option<String>),
}

/// One run of a compiled block.
#[derive(Debug)]
pub(crate) struct BlockRun {
    /// Instructions executed (including a faulting one).
    pub(crate) executed: u64,
    /// Where the wave goes next.
    pub(crate) exit: BlockExit,
}

#[cfg(not(all(target_arch = "x86_64", unix)))]
mod portable {
    use super::{BlockRun, JitMode};
    use crate::code_cache::LocalCodeCache;
    use crate::exec::{ExecContext, Wave};
    use crate::memory::Memory;

    /// No compiler on this host: the mode is kept for [`crate::CodeCache::jit_mode`].
    #[derive(Debug)]
    pub(crate) struct Jit {
        pub(crate) mode: JitMode,
    }

    impl Jit {
        pub(crate) fn new(mode: JitMode) -> Self {
            Self { mode }
        }
        pub(crate) fn compiled_blocks(&self) -> usize {
            0
        }
        pub(crate) fn forget(&self, _start: u64, _end: u64) {}
        pub(crate) fn add_arrivals(&self, _local: &mut LocalBlocks) {}
    }

    #[derive(Default)]
    pub(crate) struct LocalBlocks;

    pub(crate) fn run_block(
        _code: &mut LocalCodeCache<'_>,
        _mem: &dyn Memory,
        _wave: &mut Wave,
        _ctx: &mut ExecContext<'_>,
        _budget: u64,
    ) -> Option<BlockRun> {
        None
    }

    pub(crate) fn run_once(
        _cache: &crate::CodeCache,
        _mem: &dyn Memory,
        _wave: &mut Wave,
        _ctx: &mut ExecContext<'_>,
    ) -> Option<BlockRun> {
        None
    }

    pub(crate) fn interpreted_in_block(
        _cache: &crate::CodeCache,
        _mem: &dyn Memory,
        _pc: u64,
    ) -> Option<usize> {
        None
    }
}
