//! One block of decoded instructions → one Cranelift function.
//!
//! The function is `extern "C" fn(frame: *mut Frame, helper: usize) -> u32`. Instructions with
//! a plan (`plan.rs`) become host code: vector ALU operations as 128-bit vectors over the VGPR
//! rows, four lanes each (`vector.rs`), scalar ALU operations on the scalar file and SCC
//! (`scalar.rs`), whole-dword global and LDS loads and stores and scalar loads (`memory.rs`;
//! consecutive global accesses as one run), a final branch or
//! `s_endpgm` as the block's exit, timing-only instructions as nothing. Every other instruction
//! becomes a call of `helper(frame, index)`, which runs the interpreter on it; a helper
//! answering nonzero ends the block with that answer. Wave state stays in memory (the `Wave`'s
//! register files) between instructions, so the interpreter and the compiled code always see
//! the same registers.

mod memory;
mod plan;
mod scalar;
mod vector;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockArg, Function, InstBuilder, MemFlags, SigRef, Signature,
    UserFuncName, Value,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{control::ControlPlane, Context};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

use crate::decode::Inst;
use crate::exec::{timing_only, WAVE_SIZE};
use crate::isa::SoppOp;
use crate::operand::{EXEC_LO, VCC_LO};
use plan::{
    plan, plan_lds, plan_memory, plan_scalar, plan_scalar_load, plan_shift64, MemoryPlan, Plan,
    Src, Uniform,
};

/// Byte offsets of the register-file pointers in `Frame` (`#[repr(C)]`, pointers first).
pub(super) const FRAME_SGPR: i32 = 0;
pub(super) const FRAME_VGPR: i32 = 8;
pub(super) const FRAME_SCC: i32 = 16;
pub(super) const FRAME_LDS: i32 = 24;
pub(super) const FRAME_LDS_LEN: i32 = 32;

/// What a compiled block answers: it ran to its end, or a helper stopped it (the frame says
/// why), or its last instruction branched to its target, or ended the wave.
pub(super) const FELL_THROUGH: u32 = 0;
pub(super) const STOPPED: u32 = 1;
pub(super) const BRANCHED: u32 = 2;
pub(super) const ENDED: u32 = 3;

const ROW_BYTES: i32 = (WAVE_SIZE * 4) as i32;
const GROUPS: usize = WAVE_SIZE / 4;

/// The vector of lane masks for each 4-bit nibble of EXEC: entry `n` has lane `k` all ones if
/// bit `k` of `n` is set. Read by compiled code at its address.
#[repr(C, align(16))]
pub(super) struct NibbleMasks(pub(super) [[u32; 4]; 16]);

pub(super) static NIBBLE_MASKS: NibbleMasks = {
    let mut table = [[0u32; 4]; 16];
    let mut n = 0;
    while n < 16 {
        let mut k = 0;
        while k < 4 {
            if n >> k & 1 != 0 {
                table[n][k] = u32::MAX;
            }
            k += 1;
        }
        n += 1;
    }
    NibbleMasks(table)
};

/// What a compiled block needs from the wave it runs on.
pub(super) struct Compiled {
    /// Machine code (position independent, no relocations).
    pub(super) code: Vec<u8>,
    /// VGPR rows the inlined code touches: the wave must have at least this many.
    pub(super) vgpr_rows: usize,
    /// Whether inlined f32 arithmetic assumes MODE keeps f32 denormals.
    pub(super) needs_f32_denormals: bool,
    /// Instructions the block hands to the interpreter every time (no inlined form).
    pub(super) interpreted: usize,
}

/// The host code generator.
pub(super) struct Translator {
    isa: OwnedTargetIsa,
    fma: bool,
}

impl Translator {
    /// A translator for this host, if Cranelift supports it with the vector instructions the
    /// compiled code uses (SSE4.1).
    pub(super) fn for_host() -> Option<Self> {
        if !std::arch::is_x86_feature_detected!("sse4.1") {
            return None;
        }
        let mut flags = settings::builder();
        flags.set("opt_level", "speed").ok()?;
        // The IR is the emitters' own, checked by the tests; verifying it again on every compile
        // would cost a fifth of the compile time.
        flags.set("enable_verifier", "false").ok()?;
        let isa = cranelift_native::builder()
            .ok()?
            .finish(settings::Flags::new(flags))
            .ok()?;
        Some(Self {
            isa,
            fma: std::arch::is_x86_feature_detected!("fma"),
        })
    }

    /// Compiles a block; `None` if Cranelift refuses it (the block is then interpreted).
    pub(super) fn compile(&self, insts: &[&Inst]) -> Option<Compiled> {
        let pointer = self.isa.pointer_type();
        let mut sig = Signature::new(self.isa.default_call_conv());
        sig.params.push(AbiParam::new(pointer));
        sig.params.push(AbiParam::new(pointer));
        sig.returns.push(AbiParam::new(types::I32));
        let mut func = Function::with_name_signature(UserFuncName::user(0, 0), sig);
        let mut builder_context = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut builder_context);

        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let frame = b.block_params(entry)[0];
        let helper = b.block_params(entry)[1];
        let exit = b.create_block();
        b.append_block_param(exit, types::I32);

        let mut helper_sig = Signature::new(self.isa.default_call_conv());
        helper_sig.params.push(AbiParam::new(pointer));
        helper_sig.params.push(AbiParam::new(types::I32));
        helper_sig.returns.push(AbiParam::new(types::I32));
        let helper_sig = b.import_signature(helper_sig);

        let mut e = Emitter {
            b,
            call_conv: self.isa.default_call_conv(),
            frame,
            helper,
            helper_sig,
            exit,
            sgpr: frame,
            vgpr: frame,
            scc: frame,
        };
        e.load_register_files();
        let mut vgpr_rows = 0;
        let mut needs_f32_denormals = false;
        let mut interpreted = 0;
        let mut pending = Pending::default();
        for (index, inst) in insts.iter().enumerate() {
            if let Inst::Sopp(i) = inst {
                if timing_only(i.op) {
                    continue;
                }
            }
            if let Some(p) = plan_memory(inst) {
                pending.emit_fused(&mut e);
                // The run's addresses are all read before its first access.
                if pending.accesses.iter().any(|(_, a)| a.loads_address_of(&p)) {
                    pending.emit_accesses(&mut e);
                }
                vgpr_rows = vgpr_rows.max(p.rows());
                pending.accesses.push((index as u32, p));
                continue;
            }
            pending.emit_accesses(&mut e);
            let plans = plan(inst, self.fma);
            if let Some(plans) = plans.as_ref().filter(|p| p.iter().all(Plan::is_fusable)) {
                // The run reads scalar values before its loop: one that an earlier instruction
                // of the run writes is read after the run.
                let reads_a_write = plans
                    .iter()
                    .flat_map(Plan::scalar_reads)
                    .any(|(slot, as_set)| !as_set && pending.lane_sets.contains(&slot));
                if reads_a_write {
                    pending.emit_fused(&mut e);
                }
                for p in plans {
                    vgpr_rows = vgpr_rows.max(p.rows());
                    needs_f32_denormals |= p.is_float();
                    pending.lane_sets.extend(p.writes_lane_set());
                }
                pending.fused.push(plans.clone());
                continue;
            }
            pending.emit_fused(&mut e);
            if let Inst::Sopp(i) = inst {
                if index + 1 == insts.len() && e.block_exit(i.op) {
                    continue;
                }
            }
            if let Some(p) = plan_scalar(inst) {
                e.emit_scalar(p);
                continue;
            }
            if let Some(p) = plan_shift64(inst) {
                e.emit_shift64(p);
                continue;
            }
            if let Some(p) = plan_lds(inst) {
                vgpr_rows = vgpr_rows.max(p.rows());
                e.emit_lds(index as u32, p);
                continue;
            }
            if let Some(p) = plan_scalar_load(inst) {
                e.emit_scalar_load(index as u32, p);
                continue;
            }
            match plans {
                Some(plans) => {
                    for p in &plans {
                        vgpr_rows = vgpr_rows.max(p.rows());
                        needs_f32_denormals |= p.is_float();
                    }
                    e.emit(&plans);
                }
                None => {
                    interpreted += 1;
                    e.call_helper(index as u32);
                }
            }
        }
        pending.emit_fused(&mut e);
        pending.emit_accesses(&mut e);
        e.leave(FELL_THROUGH);
        e.b.switch_to_block(e.exit);
        let result = e.b.block_params(e.exit)[0];
        e.b.ins().return_(&[result]);
        e.b.seal_all_blocks();
        e.b.finalize();

        let mut context = Context::for_function(func);
        let compiled = context
            .compile(&*self.isa, &mut ControlPlane::default())
            .ok()?;
        // The code is copied to wherever memory is free: anything it would need patched there
        // (a call to a symbol, an absolute address) makes it unusable.
        if !compiled.buffer.relocs().is_empty() {
            return None;
        }
        Some(Compiled {
            code: compiled.code_buffer().to_vec(),
            vgpr_rows,
            needs_f32_denormals,
            interpreted,
        })
    }
}

/// Instructions waiting to be emitted together (at most one kind at a time): a fused run of
/// vector operations (`emit_fused`) with the scalar registers it writes lane sets to, or a run
/// of global accesses (`emit_memory_run`).
#[derive(Default)]
struct Pending {
    fused: Vec<Vec<Plan>>,
    lane_sets: Vec<u8>,
    accesses: Vec<(u32, MemoryPlan)>,
}

impl Pending {
    fn emit_fused(&mut self, e: &mut Emitter<'_>) {
        if !self.fused.is_empty() {
            e.emit_fused(&self.fused);
            self.fused.clear();
            self.lane_sets.clear();
        }
    }

    fn emit_accesses(&mut self, e: &mut Emitter<'_>) {
        if !self.accesses.is_empty() {
            e.emit_memory_run(&self.accesses);
            self.accesses.clear();
        }
    }
}

struct Emitter<'f> {
    b: FunctionBuilder<'f>,
    call_conv: cranelift_codegen::isa::CallConv,
    frame: Value,
    helper: Value,
    helper_sig: SigRef,
    exit: Block,
    /// `*mut u32` to the scalar register file (reloaded after every helper call).
    sgpr: Value,
    /// `*mut u32` to VGPR row 0.
    vgpr: Value,
    /// `*mut bool`: SCC.
    scc: Value,
}

/// One group of four lanes inside a loop over the groups ([`Emitter::group_loop`]).
#[derive(Clone, Copy)]
pub(super) struct GroupAt {
    /// 4 × the group's index (an i64): the shift of its bits in a 32-lane mask.
    shift: Value,
    /// The group's first lane in VGPR row 0 (`*mut u32`).
    vgpr: Value,
}

/// Values as the arguments of a jump or branch.
fn block_args(values: &[Value]) -> Vec<BlockArg> {
    values.iter().map(|&v| BlockArg::from(v)).collect()
}

fn flags() -> MemFlags {
    MemFlags::trusted()
}

impl Emitter<'_> {
    fn load_register_files(&mut self) {
        let pointer = types::I64;
        self.sgpr = self.b.ins().load(pointer, flags(), self.frame, FRAME_SGPR);
        self.vgpr = self.b.ins().load(pointer, flags(), self.frame, FRAME_VGPR);
        self.scc = self.b.ins().load(pointer, flags(), self.frame, FRAME_SCC);
    }

    /// Returns `answer` from the block.
    fn leave(&mut self, answer: u32) {
        let answer = self.b.ins().iconst(types::I32, i64::from(answer));
        self.b.ins().jump(self.exit, &[answer.into()]);
    }

    /// The block's last instruction as its exit, if it is a branch or `s_endpgm` (anything
    /// else answers `false` and is left to the interpreter).
    fn block_exit(&mut self, op: SoppOp) -> bool {
        use SoppOp::*;
        let taken = match op {
            S_BRANCH | S_ENDPGM => {
                self.leave(if op == S_BRANCH { BRANCHED } else { ENDED });
                // Whatever follows is unreachable; it goes in a block of its own.
                let rest = self.b.create_block();
                self.b.switch_to_block(rest);
                return true;
            }
            S_CBRANCH_SCC0 | S_CBRANCH_SCC1 => {
                let scc = self.b.ins().load(types::I8, flags(), self.scc, 0);
                let cc = if op == S_CBRANCH_SCC1 {
                    IntCC::NotEqual
                } else {
                    IntCC::Equal
                };
                self.b.ins().icmp_imm(cc, scc, 0)
            }
            S_CBRANCH_VCCZ | S_CBRANCH_VCCNZ | S_CBRANCH_EXECZ | S_CBRANCH_EXECNZ => {
                let slot = if matches!(op, S_CBRANCH_VCCZ | S_CBRANCH_VCCNZ) {
                    VCC_LO
                } else {
                    EXEC_LO
                };
                let value = self.scalar(Uniform::Sgpr(slot));
                let cc = if matches!(op, S_CBRANCH_VCCZ | S_CBRANCH_EXECZ) {
                    IntCC::Equal
                } else {
                    IntCC::NotEqual
                };
                self.b.ins().icmp_imm(cc, value, 0)
            }
            _ => return false,
        };
        let branched = self.b.ins().iconst(types::I32, i64::from(BRANCHED));
        let next = self.b.create_block();
        self.b
            .ins()
            .brif(taken, self.exit, &[branched.into()], next, &[]);
        self.b.switch_to_block(next);
        true
    }

    /// `helper(frame, index)`; leaves the block with its answer if nonzero.
    fn call_helper(&mut self, index: u32) {
        let index = self.b.ins().iconst(types::I32, i64::from(index));
        let call = self
            .b
            .ins()
            .call_indirect(self.helper_sig, self.helper, &[self.frame, index]);
        let answer = self.b.inst_results(call)[0];
        let next = self.b.create_block();
        self.b
            .ins()
            .brif(answer, self.exit, &[answer.into()], next, &[]);
        self.b.switch_to_block(next);
        self.load_register_files();
    }

    fn scalar(&mut self, u: Uniform) -> Value {
        match u {
            Uniform::Const(c) => self.b.ins().iconst(types::I32, i64::from(c as i32)),
            Uniform::Sgpr(slot) => {
                self.b
                    .ins()
                    .load(types::I32, flags(), self.sgpr, i32::from(slot) * 4)
            }
        }
    }

    fn store_scalar(&mut self, slot: u8, value: Value) {
        self.b
            .ins()
            .store(flags(), value, self.sgpr, i32::from(slot) * 4);
    }

    /// A new block with a parameter of each value's type.
    fn block_taking(&mut self, values: &[Value]) -> Block {
        let block = self.b.create_block();
        for &v in values {
            let ty = self.b.func.dfg.value_type(v);
            self.b.append_block_param(block, ty);
        }
        block
    }

    /// Starts a loop whose header takes an i64 (`first` on entry) and `N` carried values;
    /// answers the loop's block and its parameters.
    fn loop_head<const N: usize>(
        &mut self,
        first: Value,
        initial: [Value; N],
    ) -> (Block, Value, [Value; N]) {
        let mut entry = vec![first];
        entry.extend(initial);
        let looped = self.block_taking(&entry);
        self.b.ins().jump(looped, &block_args(&entry));
        self.b.switch_to_block(looped);
        let params = self.b.block_params(looped).to_vec();
        (looped, params[0], std::array::from_fn(|i| params[i + 1]))
    }

    /// Ends a loop of [`Emitter::loop_head`]: back to it with `following` and the carried
    /// values' next state while `more` is nonzero; answers their final values.
    fn loop_back<const N: usize>(
        &mut self,
        looped: Block,
        following: Value,
        more: Value,
        next: [Value; N],
    ) -> [Value; N] {
        let after = self.block_taking(&next);
        let mut again = vec![following];
        again.extend(next);
        self.b
            .ins()
            .brif(more, looped, &block_args(&again), after, &block_args(&next));
        self.b.switch_to_block(after);
        let params = self.b.block_params(after).to_vec();
        std::array::from_fn(|i| params[i])
    }

    /// Starts a loop of iterations carrying `N` values; answers the loop's block, the
    /// iteration (an i64 from 0) and the carried values. Code emitted until
    /// [`Emitter::end_counted_loop`] is the loop's body.
    fn counted_loop<const N: usize>(&mut self, initial: [Value; N]) -> (Block, Value, [Value; N]) {
        let zero = self.b.ins().iconst(types::I64, 0);
        self.loop_head(zero, initial)
    }

    /// Closes a loop of [`Emitter::counted_loop`] after `count` iterations, with the carried
    /// values' next state; answers their final values.
    fn end_counted_loop<const N: usize>(
        &mut self,
        looped: Block,
        iteration: Value,
        count: usize,
        next: [Value; N],
    ) -> [Value; N] {
        let following = self.b.ins().iadd_imm(iteration, 1);
        let more = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedLessThan, following, count as i64);
        self.loop_back(looped, following, more, next)
    }

    /// A loop over the eight groups of four lanes; see [`Emitter::counted_loop`].
    fn group_loop<const N: usize>(
        &mut self,
        initial: [Value; N],
    ) -> (Block, Value, GroupAt, [Value; N]) {
        let (looped, index, carried) = self.counted_loop(initial);
        let offset = self.b.ins().ishl_imm(index, 4);
        let vgpr = self.b.ins().iadd(self.vgpr, offset);
        let shift = self.b.ins().ishl_imm(index, 2);
        (looped, index, GroupAt { shift, vgpr }, carried)
    }

    fn end_group_loop<const N: usize>(
        &mut self,
        looped: Block,
        index: Value,
        next: [Value; N],
    ) -> [Value; N] {
        self.end_counted_loop(looped, index, GROUPS, next)
    }

    fn load_group(&mut self, row: u8, g: GroupAt) -> Value {
        self.b
            .ins()
            .load(types::I32X4, flags(), g.vgpr, i32::from(row) * ROW_BYTES)
    }

    fn store_group(&mut self, row: u8, g: GroupAt, value: Value) {
        self.b
            .ins()
            .store(flags(), value, g.vgpr, i32::from(row) * ROW_BYTES);
    }

    /// A group's four bits of a 32-bit lane set (an i64).
    fn nibble(&mut self, set: Value, g: GroupAt) -> Value {
        let wide = self.b.ins().uextend(types::I64, set);
        let shifted = self.b.ins().ushr(wide, g.shift);
        self.b.ins().band_imm(shifted, 15)
    }

    /// The lane-mask vector (all ones where set) of four bits of a lane set.
    fn nibble_mask(&mut self, nibble: Value) -> Value {
        let table = self
            .b
            .ins()
            .iconst(types::I64, &NIBBLE_MASKS as *const NibbleMasks as i64);
        let offset = self.b.ins().ishl_imm(nibble, 4);
        let at = self.b.ins().iadd(table, offset);
        self.b.ins().load(types::I32X4, flags(), at, 0)
    }

    /// The lane-mask vector (all ones where set) of a group's four lanes of a 32-bit lane
    /// set.
    fn lane_mask(&mut self, set: Value, g: GroupAt) -> Value {
        let nibble = self.nibble(set, g);
        self.nibble_mask(nibble)
    }

    /// Inside a group loop: `body` (given the group's lane mask of `set`) only for a group
    /// with a lane in `set`; for any other, the carried values go on unchanged. A wave of a
    /// small workgroup, or a branch taken by a few lanes, does only its own groups' work.
    fn if_group_active<const N: usize>(
        &mut self,
        set: Value,
        g: GroupAt,
        carried: [Value; N],
        body: impl FnOnce(&mut Self, Value) -> [Value; N],
    ) -> [Value; N] {
        let nibble = self.nibble(set, g);
        let work = self.b.create_block();
        let join = self.block_taking(&carried);
        self.b
            .ins()
            .brif(nibble, work, &[], join, &block_args(&carried));
        self.b.switch_to_block(work);
        let mask = self.nibble_mask(nibble);
        let next = body(self, mask);
        self.b.ins().jump(join, &block_args(&next));
        self.b.switch_to_block(join);
        let params = self.b.block_params(join).to_vec();
        std::array::from_fn(|i| params[i])
    }

    /// Starts a loop over the set bits of `set` (a nonzero i64), lowest first, carrying `N`
    /// values; answers the loop's block, the bits not yet visited (this one included), this
    /// bit's index (an i64) and the carried values. Code emitted until
    /// [`Emitter::end_bit_loop`] is the loop's body.
    fn bit_loop<const N: usize>(
        &mut self,
        set: Value,
        initial: [Value; N],
    ) -> (Block, Value, Value, [Value; N]) {
        let (looped, remaining, carried) = self.loop_head(set, initial);
        let index = self.b.ins().ctz(remaining);
        (looped, remaining, index, carried)
    }

    /// Closes a loop of [`Emitter::bit_loop`] with the carried values' next state; answers
    /// their final values.
    fn end_bit_loop<const N: usize>(
        &mut self,
        looped: Block,
        remaining: Value,
        next: [Value; N],
    ) -> [Value; N] {
        let less_one = self.b.ins().iadd_imm(remaining, -1);
        let following = self.b.ins().band(remaining, less_one);
        self.loop_back(looped, following, following, next)
    }

    fn exec(&mut self) -> Value {
        self.b
            .ins()
            .load(types::I32, flags(), self.sgpr, i32::from(EXEC_LO) * 4)
    }

    /// Per source: the scalar splatted once, with its input modifiers (uniform sources), or
    /// `None` (rows).
    fn splats(&mut self, src: &[Src], modifiers: (u8, u8)) -> Vec<Option<Value>> {
        src.iter()
            .enumerate()
            .map(|(n, s)| match *s {
                Src::Uniform(u) => {
                    let x = self.scalar(u);
                    let x = self.b.ins().splat(types::I32X4, x);
                    Some(self.modify(x, n, modifiers))
                }
                Src::Row(_) => None,
            })
            .collect()
    }

    /// Source `n`'s input modifiers (abs, then neg) applied to its lanes.
    fn modify(&mut self, mut x: Value, n: usize, (abs, neg): (u8, u8)) -> Value {
        if abs >> n & 1 != 0 {
            let magnitude = self.b.ins().iconst(types::I32, 0x7fff_ffff);
            let magnitude = self.b.ins().splat(types::I32X4, magnitude);
            x = self.b.ins().band(x, magnitude);
        }
        if neg >> n & 1 != 0 {
            let sign = self.b.ins().iconst(types::I32, i64::from(i32::MIN));
            let sign = self.b.ins().splat(types::I32X4, sign);
            x = self.b.ins().bxor(x, sign);
        }
        x
    }

    fn group_of(
        &mut self,
        src: Src,
        splat: Option<Value>,
        g: GroupAt,
        n: usize,
        modifiers: (u8, u8),
    ) -> Value {
        match (src, splat) {
            (_, Some(v)) => v,
            (Src::Row(r), None) => {
                let x = self.load_group(r, g);
                self.modify(x, n, modifiers)
            }
            (Src::Uniform(_), None) => unreachable!("uniform sources are splatted"),
        }
    }

    fn float(&mut self, v: Value) -> Value {
        self.b.ins().bitcast(types::F32X4, MemFlags::new(), v)
    }

    fn int(&mut self, v: Value) -> Value {
        self.b.ins().bitcast(types::I32X4, MemFlags::new(), v)
    }
}
