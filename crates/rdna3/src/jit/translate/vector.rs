//! Vector ALU emitters: 32-lane operations as eight 128-bit vectors (four lanes each) over
//! the VGPR rows, results merged into the destination under EXEC.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, Signature, StackSlot, StackSlotData, StackSlotKind, Value,
};

use super::plan::{Cond, Plan, RowOp, Src, Uniform};
use super::{flags, Emitter, GroupAt, ROW_BYTES};
use crate::exec::{f32_unit, flush_f32, WAVE_SIZE};
use crate::isa::Vop3Op;
use crate::operand::NULL;

/// How many operations of a fused run a row value loaded or computed for a group is reused
/// for; past that, the row is read from the register file again. Cranelift keeps every value
/// it is given live in a register, and a run longer than the host's sixteen vector registers
/// then spills to the stack, which costs what reading the row again costs, plus the spill
/// (tinygrad's matmul loop, 80 operations a group: every value kept 1.2 ms a dispatch, twelve
/// operations 1.0 ms, none 1.25 ms).
const REUSE_WINDOW: usize = 12;

/// Records `value` as row `r`'s current group in a fused run, as of operation `k`.
fn remember(rows: &mut Vec<(u8, Value, usize)>, r: u8, value: Value, k: usize) {
    match rows.iter_mut().find(|(at, _, _)| *at == r) {
        Some(known) => (known.1, known.2) = (value, k),
        None => rows.push((r, value, k)),
    }
}

impl Emitter<'_> {
    /// Setup an operation needs once per instruction (uniform scalars).
    pub(super) fn row_setup(&mut self, op: RowOp, src: &[Src; 3]) -> RowSetup {
        let scalar_of = |s: Src| match s {
            Src::Uniform(u) => u,
            Src::Row(_) => Uniform::Const(0),
        };
        match op {
            RowOp::ShlRev | RowOp::ShrRev | RowOp::AshrRev => {
                let amount = self.scalar(scalar_of(src[0]));
                RowSetup::Amount(self.b.ins().band_imm(amount, 31))
            }
            RowOp::ShlAdd | RowOp::ShlOr => {
                let amount = self.scalar(scalar_of(src[1]));
                RowSetup::Amount(self.b.ins().band_imm(amount, 31))
            }
            RowOp::BfeU => {
                let offset = self.scalar(scalar_of(src[1]));
                let offset = self.b.ins().band_imm(offset, 31);
                let width = self.scalar(scalar_of(src[2]));
                let width = self.b.ins().band_imm(width, 31);
                // (1 << width) - 1 is also right for width 0.
                let one = self.b.ins().iconst(types::I32, 1);
                let bit = self.b.ins().ishl(one, width);
                let mask = self.b.ins().iadd_imm(bit, -1);
                let mask = self.b.ins().splat(types::I32X4, mask);
                RowSetup::Field(offset, mask)
            }
            RowOp::Cndmask(set) => RowSetup::Mask(self.scalar(set)),
            _ => RowSetup::None,
        }
    }

    /// Four zero lanes (standing for a source an operation does not read).
    pub(super) fn zero_group(&mut self) -> Value {
        let zero = self.b.ins().iconst(types::I32, 0);
        self.b.ins().splat(types::I32X4, zero)
    }

    /// One group of `op`'s lanes from its sources' groups and the destination's old group
    /// (read by `Fmac` only).
    pub(super) fn row_compute(
        &mut self,
        op: RowOp,
        setup: &RowSetup,
        [a, b, c, dst]: [Value; 4],
        g: GroupAt,
    ) -> Value {
        match op {
            RowOp::Mov => a,
            RowOp::AddF | RowOp::SubF | RowOp::MulF | RowOp::Fma | RowOp::Fmac => {
                let (x, y) = (self.float(a), self.float(b));
                let r = match op {
                    RowOp::AddF => self.b.ins().fadd(x, y),
                    RowOp::SubF => self.b.ins().fsub(x, y),
                    RowOp::MulF => self.b.ins().fmul(x, y),
                    RowOp::Fma => {
                        let z = self.float(c);
                        self.b.ins().fma(x, y, z)
                    }
                    _ => {
                        let z = self.float(dst);
                        self.b.ins().fma(x, y, z)
                    }
                };
                self.int(r)
            }
            RowOp::MinF | RowOp::MaxF => {
                let (x, y) = (self.float(a), self.float(b));
                let (wins, tie) = if op == RowOp::MaxF {
                    let wins = self.b.ins().fcmp(FloatCC::GreaterThan, x, y);
                    // Equal values differ at most in the sign of zero: +0 beats -0.
                    (wins, self.b.ins().band(a, b))
                } else {
                    let wins = self.b.ins().fcmp(FloatCC::LessThan, x, y);
                    (wins, self.b.ins().bor(a, b))
                };
                let equal = self.b.ins().fcmp(FloatCC::Equal, x, y);
                let x_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
                let y_nan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
                let r = self.b.ins().bitselect(wins, a, b);
                let r = self.b.ins().bitselect(equal, tie, r);
                let r = self.b.ins().bitselect(y_nan, a, r);
                self.b.ins().bitselect(x_nan, b, r)
            }
            RowOp::SqrtF => {
                let exponent = self.b.ins().iconst(types::I32, 0x7f80_0000);
                let exponent = self.b.ins().splat(types::I32X4, exponent);
                let exponent = self.b.ins().band(a, exponent);
                let zero = self.b.ins().iconst(types::I32, 0);
                let zero = self.b.ins().splat(types::I32X4, zero);
                let tiny = self.b.ins().icmp(IntCC::Equal, exponent, zero);
                let sign = self.b.ins().iconst(types::I32, i64::from(i32::MIN));
                let sign = self.b.ins().splat(types::I32X4, sign);
                let signed_zero = self.b.ins().band(a, sign);
                let flushed = self.b.ins().bitselect(tiny, signed_zero, a);
                let x = self.float(flushed);
                let r = self.b.ins().sqrt(x);
                self.int(r)
            }
            RowOp::Add => self.b.ins().iadd(a, b),
            RowOp::Sub => self.b.ins().isub(a, b),
            RowOp::Add3 => {
                let s = self.b.ins().iadd(a, b);
                self.b.ins().iadd(s, c)
            }
            RowOp::MulLo => self.b.ins().imul(a, b),
            RowOp::MulU24 | RowOp::MulI24 | RowOp::MadU24 | RowOp::MadI24 => {
                // Each factor's low 24 bits, zero- or sign-extended: the low 32 bits of the
                // product are those of the 32-bit product.
                let signed = matches!(op, RowOp::MulI24 | RowOp::MadI24);
                let [x, y] = [a, b].map(|v| {
                    let high = self.b.ins().ishl_imm(v, 8);
                    if signed {
                        self.b.ins().sshr_imm(high, 8)
                    } else {
                        self.b.ins().ushr_imm(high, 8)
                    }
                });
                let product = self.b.ins().imul(x, y);
                if matches!(op, RowOp::MadU24 | RowOp::MadI24) {
                    self.b.ins().iadd(product, c)
                } else {
                    product
                }
            }
            RowOp::And => self.b.ins().band(a, b),
            RowOp::Or => self.b.ins().bor(a, b),
            RowOp::Xor => self.b.ins().bxor(a, b),
            RowOp::MinI => self.b.ins().smin(a, b),
            RowOp::MaxI => self.b.ins().smax(a, b),
            RowOp::MinU => self.b.ins().umin(a, b),
            RowOp::MaxU => self.b.ins().umax(a, b),
            RowOp::ShlRev | RowOp::ShrRev | RowOp::AshrRev | RowOp::ShlAdd | RowOp::ShlOr => {
                let RowSetup::Amount(amount) = *setup else {
                    unreachable!("shifts are set up with their amount")
                };
                match op {
                    RowOp::ShlRev => self.b.ins().ishl(b, amount),
                    RowOp::ShrRev => self.b.ins().ushr(b, amount),
                    RowOp::AshrRev => self.b.ins().sshr(b, amount),
                    RowOp::ShlAdd => {
                        let s = self.b.ins().ishl(a, amount);
                        self.b.ins().iadd(s, c)
                    }
                    _ => {
                        let s = self.b.ins().ishl(a, amount);
                        self.b.ins().bor(s, c)
                    }
                }
            }
            RowOp::BfeU => {
                let RowSetup::Field(offset, mask) = *setup else {
                    unreachable!("bfe is set up with its field")
                };
                let s = self.b.ins().ushr(a, offset);
                self.b.ins().band(s, mask)
            }
            RowOp::Cndmask(_) => {
                let mask = match *setup {
                    RowSetup::Mask(set) => self.lane_mask(set, g),
                    RowSetup::Lanes(lanes) => lanes,
                    _ => unreachable!("cndmask is set up with its lane set"),
                };
                self.b.ins().bitselect(mask, b, a)
            }
        }
    }

    pub(super) fn emit(&mut self, plans: &[Plan]) {
        match plans {
            [Plan::Unit {
                op,
                src,
                dst,
                abs,
                neg,
            }] => self.emit_unit(*op, *src, *dst, (*abs, *neg)),
            _ => self.emit_fused(&[plans.to_vec()]),
        }
    }

    pub(super) fn emit_unit(&mut self, op: Vop3Op, src: Src, dst: u8, modifiers: (u8, u8)) {
        let row = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            ROW_BYTES as u32,
            4,
        ));
        let at = self.b.ins().stack_addr(types::I64, row, 0);
        let splat = self.splats(&[src], modifiers)[0];
        let exec = self.exec();
        let (looped, index, g, []) = self.group_loop([]);
        self.if_group_active(exec, g, [], |e, _| {
            let lanes = e.group_of(src, splat, g, 0, modifiers);
            let offset = e.b.ins().ishl_imm(index, 4);
            let slot = e.b.ins().iadd(at, offset);
            e.b.ins().store(flags(), lanes, slot, 0);
            []
        });
        self.end_group_loop(looped, index, []);
        let mut sig = Signature::new(self.call_conv);
        sig.params.push(AbiParam::new(types::I32));
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(types::I32));
        let sig = self.b.import_signature(sig);
        let function = self.b.ins().iconst(
            types::I64,
            unit_row as unsafe extern "C" fn(u32, *mut u32, u32) as usize as i64,
        );
        let code = self.b.ins().iconst(types::I32, i64::from(op.code()));
        self.b.ins().call_indirect(sig, function, &[code, at, exec]);
        let (looped, index, g, []) = self.group_loop([]);
        self.if_group_active(exec, g, [], |e, mask| {
            let offset = e.b.ins().ishl_imm(index, 4);
            let slot = e.b.ins().iadd(at, offset);
            let value = e.b.ins().load(types::I32X4, flags(), slot, 0);
            let old = e.load_group(dst, g);
            let merged = e.b.ins().bitselect(mask, value, old);
            e.store_group(dst, g, merged);
            []
        });
        self.end_group_loop(looped, index, []);
    }

    /// Consecutive fusable instructions (row operations, compares, carry operations, 64-bit
    /// shifts; a VOPD's two operations) in one loop over the lane groups: per group, the
    /// instructions in order, each reading all its sources before writing its results. The
    /// same as running them one after another: each touches only its own lanes of every row,
    /// and a lane set an instruction of the run writes (a compare's, a carry-out) is what the
    /// group's later selects and carry-ins read; it reaches its scalar register after the loop.
    /// `compile` ends a run before an instruction that reads such a register as a value.
    pub(super) fn emit_fused(&mut self, instructions: &[Vec<Plan>]) {
        let mut written: Vec<u8> = Vec::new();
        let mut ops: Vec<Fused> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        for plans in instructions {
            for p in plans {
                let op = self.fused_setup(p, &written);
                ops.push(op);
            }
            ends.push(ops.len());
            written.extend(plans.iter().filter_map(Plan::writes_lane_set));
        }
        let exec = self.exec();
        // Under a full EXEC (the common case) every lane takes its result as it is; otherwise
        // each result is merged into the destination's old lanes, and groups without an active
        // lane are skipped.
        let full = self.b.ins().icmp_imm(IntCC::Equal, exec, -1);
        let (whole, partial, after) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(full, whole, &[], partial, &[]);
        self.b.switch_to_block(whole);
        let (looped, index, g, []) = self.group_loop([]);
        self.fused_group(&ops, &ends, g, None);
        self.end_group_loop(looped, index, []);
        self.b.ins().jump(after, &[]);
        self.b.switch_to_block(partial);
        let (looped, index, g, []) = self.group_loop([]);
        self.if_group_active(exec, g, [], |e, mask| {
            e.fused_group(&ops, &ends, g, Some(mask));
            []
        });
        self.end_group_loop(looped, index, []);
        self.b.ins().jump(after, &[]);
        self.b.switch_to_block(after);
        // In program order: of two writes to one register, the later stays.
        for op in &ops {
            if let Fused::Compare {
                bits, dst: slot, ..
            }
            | Fused::Carry {
                bits, carry: slot, ..
            } = *op
            {
                if slot != NULL {
                    let set = self.b.ins().stack_load(types::I32, bits, 0);
                    self.store_scalar(slot, set);
                }
            }
        }
    }

    /// What an operation of a fused run needs before the loop; `written`: the lane sets the
    /// run's earlier instructions write.
    fn fused_setup(&mut self, p: &Plan, written: &[u8]) -> Fused {
        let set_source = |e: &mut Self, u: Uniform| match u {
            Uniform::Sgpr(slot) if written.contains(&slot) => SetSource::InRun(slot),
            u => SetSource::Loaded(e.scalar(u)),
        };
        let bits = |e: &mut Self| {
            let slot =
                e.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 4, 2));
            let zero = e.b.ins().iconst(types::I32, 0);
            e.b.ins().stack_store(zero, slot, 0);
            slot
        };
        match *p {
            Plan::Row {
                op,
                dst,
                src,
                abs,
                neg,
            } => {
                let setup = match op {
                    RowOp::Cndmask(set) => match set_source(self, set) {
                        SetSource::InRun(slot) => RowSetup::MaskInRun(slot),
                        SetSource::Loaded(v) => RowSetup::Mask(v),
                    },
                    _ => self.row_setup(op, &src),
                };
                let splats = self.splats(&src, (abs, neg));
                Fused::Row {
                    op,
                    dst,
                    src,
                    modifiers: (abs, neg),
                    setup,
                    splats,
                }
            }
            Plan::Compare {
                cond,
                src,
                dst,
                abs,
                neg,
            } => Fused::Compare {
                cond,
                src,
                dst,
                modifiers: (abs, neg),
                splats: self.splats(&src, (abs, neg)),
                bits: bits(self),
            },
            Plan::Carry {
                subtract,
                src,
                carry_in,
                dst,
                carry,
            } => Fused::Carry {
                subtract,
                src,
                carry_in: carry_in.map(|u| set_source(self, u)),
                dst,
                carry,
                splats: self.splats(&src, (0, 0)),
                bits: bits(self),
            },
            Plan::Shl64 { amount, src, dst } => {
                let s = self.scalar(amount);
                let s = self.b.ins().band_imm(s, 63);
                let big = self
                    .b
                    .ins()
                    .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, s, 32);
                let n = self.b.ins().band_imm(s, 31);
                let thirty_one = self.b.ins().iconst(types::I32, 31);
                let back = self.b.ins().isub(thirty_one, n);
                Fused::Shl64 {
                    src,
                    dst,
                    big,
                    n,
                    back,
                }
            }
            Plan::Unit { .. } => unreachable!("`compile` does not fuse unit operations"),
        }
    }

    /// One group of a fused run's operations, in order; each row is loaded at most once (a
    /// row written is used from the value stored, not reloaded), and only for what the
    /// operations read. `mask`: the group's active lanes, if not all.
    fn fused_group(&mut self, ops: &[Fused], ends: &[usize], g: GroupAt, mask: Option<Value>) {
        // This group's rows as loaded or last written (with the operation that did), and the
        // lane sets the run wrote (active lanes only).
        let mut rows: Vec<(u8, Value, usize)> = Vec::new();
        let mut sets: Vec<(u8, Value)> = Vec::new();
        // The operation being emitted.
        let now = std::cell::Cell::new(0usize);
        let row = |e: &mut Self, rows: &mut Vec<(u8, Value, usize)>, r: u8| {
            let k = now.get();
            if let Some(&(_, v, since)) = rows.iter().find(|(at, _, _)| *at == r) {
                if k - since <= REUSE_WINDOW {
                    return v;
                }
            }
            // Every result is in the register file by the end of its instruction (and an
            // instruction reads its sources before it writes): reading the row again is reading
            // its current value.
            let v = e.load_group(r, g);
            remember(rows, r, v, k);
            v
        };
        let source = |e: &mut Self,
                      rows: &mut Vec<(u8, Value, usize)>,
                      src: Src,
                      splat: Option<Value>,
                      n: usize,
                      modifiers: (u8, u8)| match (src, splat) {
            (_, Some(v)) => v,
            (Src::Row(r), None) => {
                let x = row(e, rows, r);
                e.modify(x, n, modifiers)
            }
            (Src::Uniform(_), None) => unreachable!("uniform sources are splatted"),
        };
        let set_lanes = |e: &mut Self, sets: &[(u8, Value)], slot: u8| {
            sets.iter()
                .rev()
                .find(|(at, _)| *at == slot)
                .map(|&(_, v)| v)
                // Every earlier operation of the run ran for this group.
                .unwrap_or_else(|| e.zero_group())
        };
        let merge = |e: &mut Self, value: Value, old: Value| match mask {
            Some(mask) => e.b.ins().bitselect(mask, value, old),
            None => value,
        };
        let active = |e: &mut Self, lanes: Value| match mask {
            Some(mask) => e.b.ins().band(lanes, mask),
            None => lanes,
        };
        let mut row_results: Vec<(u8, Value)> = Vec::with_capacity(2);
        let mut set_results: Vec<(u8, Value)> = Vec::new();
        for (k, op) in ops.iter().enumerate() {
            now.set(k);
            match op {
                Fused::Row {
                    op,
                    dst,
                    src,
                    modifiers,
                    setup,
                    splats,
                } => {
                    // Only what the operation reads is loaded: Cranelift keeps every load it
                    // is given.
                    let reads = op.reads();
                    let [a, b, c] = std::array::from_fn(|n| match src[n] {
                        Src::Row(_) if !reads[n] && splats[n].is_none() => self.zero_group(),
                        s => source(self, &mut rows, s, splats[n], n, *modifiers),
                    });
                    let old = if mask.is_some() || *op == RowOp::Fmac {
                        row(self, &mut rows, *dst)
                    } else {
                        self.zero_group()
                    };
                    let in_run;
                    let setup = match setup {
                        RowSetup::MaskInRun(slot) => {
                            in_run = RowSetup::Lanes(set_lanes(self, &sets, *slot));
                            &in_run
                        }
                        other => other,
                    };
                    let value = self.row_compute(*op, setup, [a, b, c, old], g);
                    let value = merge(self, value, old);
                    row_results.push((*dst, value));
                }
                Fused::Compare {
                    cond,
                    src,
                    dst,
                    modifiers,
                    splats,
                    bits,
                } => {
                    let a = source(self, &mut rows, src[0], splats[0], 0, *modifiers);
                    let b = source(self, &mut rows, src[1], splats[1], 1, *modifiers);
                    let lanes = match *cond {
                        Cond::Int(cc) => self.b.ins().icmp(cc, a, b),
                        Cond::Float(cc) => {
                            let (x, y) = (self.float(a), self.float(b));
                            self.b.ins().fcmp(cc, x, y)
                        }
                        Cond::FloatLg => {
                            let (x, y) = (self.float(a), self.float(b));
                            let below = self.b.ins().fcmp(FloatCC::LessThan, x, y);
                            let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, y);
                            self.b.ins().bor(below, above)
                        }
                        Cond::Class => self.class_test(a, b),
                    };
                    let lanes = active(self, lanes);
                    self.add_group_bits(*bits, lanes, g);
                    set_results.extend((*dst != NULL).then_some((*dst, lanes)));
                }
                Fused::Carry {
                    subtract,
                    src,
                    carry_in,
                    dst,
                    carry,
                    splats,
                    bits,
                } => {
                    let x = source(self, &mut rows, src[0], splats[0], 0, (0, 0));
                    let y = source(self, &mut rows, src[1], splats[1], 1, (0, 0));
                    // `cin` is all ones (-1) in lanes whose carry-in bit is set.
                    let cin = carry_in.as_ref().map(|c| match *c {
                        SetSource::Loaded(set) => self.lane_mask(set, g),
                        SetSource::InRun(slot) => set_lanes(self, &sets, slot),
                    });
                    let (value, out) = self.carry_lanes(*subtract, x, y, cin);
                    let old = row(self, &mut rows, *dst);
                    let value = merge(self, value, old);
                    row_results.push((*dst, value));
                    let out = active(self, out);
                    self.add_group_bits(*bits, out, g);
                    set_results.extend((*carry != NULL).then_some((*carry, out)));
                }
                Fused::Shl64 {
                    src,
                    dst,
                    big,
                    n,
                    back,
                } => {
                    let lo = row(self, &mut rows, *src);
                    let hi = row(self, &mut rows, *src + 1);
                    let lo_shifted = self.b.ins().ishl(lo, *n);
                    let hi_shifted = self.b.ins().ishl(hi, *n);
                    let carried = self.b.ins().ushr_imm(lo, 1);
                    let carried = self.b.ins().ushr(carried, *back);
                    let joined = self.b.ins().bor(hi_shifted, carried);
                    let zero = self.zero_group();
                    let new_lo = self.b.ins().select(*big, zero, lo_shifted);
                    let new_hi = self.b.ins().select(*big, lo_shifted, joined);
                    let (new_lo, new_hi) = if mask.is_some() {
                        let old_lo = row(self, &mut rows, *dst);
                        let old_hi = row(self, &mut rows, *dst + 1);
                        (merge(self, new_lo, old_lo), merge(self, new_hi, old_hi))
                    } else {
                        (new_lo, new_hi)
                    };
                    row_results.push((*dst, new_lo));
                    row_results.push((*dst + 1, new_hi));
                }
            }
            if ends.contains(&(k + 1)) {
                for (dst, value) in row_results.drain(..) {
                    self.store_group(dst, g, value);
                    remember(&mut rows, dst, value, k);
                }
                sets.append(&mut set_results);
            }
        }
    }

    /// `v_add_co_u32` and relatives over a group: the sum (or difference) and the carry-out
    /// (or borrow) lanes, all ones where set; `cin`: the carry-in lanes, if any.
    fn carry_lanes(
        &mut self,
        subtract: bool,
        x: Value,
        y: Value,
        cin: Option<Value>,
    ) -> (Value, Value) {
        if subtract {
            let below = self.b.ins().icmp(IntCC::UnsignedLessThan, x, y);
            let t = self.b.ins().isub(x, y);
            match cin {
                None => (t, below),
                Some(cin) => {
                    let zero = self.zero_group();
                    let zero = self.b.ins().icmp(IntCC::Equal, t, zero);
                    let wraps = self.b.ins().band(zero, cin);
                    let value = self.b.ins().iadd(t, cin);
                    (value, self.b.ins().bor(below, wraps))
                }
            }
        } else {
            let t = self.b.ins().iadd(x, y);
            let wrapped = self.b.ins().icmp(IntCC::UnsignedLessThan, t, x);
            match cin {
                None => (t, wrapped),
                Some(cin) => {
                    let value = self.b.ins().isub(t, cin);
                    let again = self.b.ins().icmp(IntCC::UnsignedLessThan, value, t);
                    (value, self.b.ins().bor(wrapped, again))
                }
            }
        }
    }

    /// ORs a group's lanes (all ones where set) into the 32-bit lane set in stack slot `bits`.
    fn add_group_bits(&mut self, bits: StackSlot, lanes: Value, g: GroupAt) {
        let so_far = self.b.ins().stack_load(types::I32, bits, 0);
        let more = self.add_mask_bits(so_far, lanes, g);
        self.b.ins().stack_store(more, bits, 0);
    }

    /// `bits` with a group's four lanes of a compare result (all ones where true) set at the
    /// group's place.
    pub(super) fn add_mask_bits(&mut self, bits: Value, lanes: Value, g: GroupAt) -> Value {
        let these = self.b.ins().vhigh_bits(types::I32, lanes);
        let these = self.b.ins().uextend(types::I64, these);
        let these = self.b.ins().ishl(these, g.shift);
        let these = self.b.ins().ireduce(types::I32, these);
        self.b.ins().bor(bits, these)
    }

    /// Lanes (all ones) whose float `x` is of a class in the mask `classes`.
    pub(super) fn class_test(&mut self, x: Value, classes: Value) -> Value {
        let splat = |e: &mut Self, c: u32| {
            let c = e.b.ins().iconst(types::I32, i64::from(c as i32));
            e.b.ins().splat(types::I32X4, c)
        };
        let zero = splat(self, 0);
        let magnitude_mask = splat(self, 0x7fff_ffff);
        let magnitude = self.b.ins().band(x, magnitude_mask);
        let infinity = splat(self, 0x7f80_0000);
        let negative = self.b.ins().icmp(IntCC::SignedLessThan, x, zero);
        let positive = self.b.ins().bnot(negative);
        let nan = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, magnitude, infinity);
        let quiet_bit = splat(self, 0x0040_0000);
        let quiet = self.b.ins().band(x, quiet_bit);
        let quiet = self.b.ins().icmp(IntCC::NotEqual, quiet, zero);
        let signalling = self.b.ins().bnot(quiet);
        let inf = self.b.ins().icmp(IntCC::Equal, magnitude, infinity);
        let is_zero = self.b.ins().icmp(IntCC::Equal, magnitude, zero);
        // Denormal: 0 < magnitude < 2^-126, i.e. magnitude - 1 below the largest denormal.
        let one = splat(self, 1);
        let below = self.b.ins().isub(magnitude, one);
        let largest_denormal = splat(self, 0x007f_ffff);
        let denormal = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThan, below, largest_denormal);
        // Normal: 2^-126 <= magnitude < inf.
        let smallest_normal = splat(self, 0x0080_0000);
        let offset = self.b.ins().isub(magnitude, smallest_normal);
        let span = splat(self, 0x7f80_0000 - 0x0080_0000);
        let normal = self.b.ins().icmp(IntCC::UnsignedLessThan, offset, span);
        let cases: [(Value, Value, u32); 10] = [
            (nan, signalling, 0),
            (nan, quiet, 1),
            (inf, negative, 2),
            (normal, negative, 3),
            (denormal, negative, 4),
            (is_zero, negative, 5),
            (is_zero, positive, 6),
            (denormal, positive, 7),
            (normal, positive, 8),
            (inf, positive, 9),
        ];
        let mut result = zero;
        for (class, qualifier, bit) in cases {
            let bit_value = splat(self, 1 << bit);
            let wanted = self.b.ins().band(classes, bit_value);
            let wanted = self.b.ins().icmp(IntCC::NotEqual, wanted, zero);
            let hit = self.b.ins().band(class, wanted);
            let hit = self.b.ins().band(hit, qualifier);
            result = self.b.ins().bor(result, hit);
        }
        result
    }
}

/// Computes the f32 transcendental-unit operation `code` (a `Vop3Op`) in place over the lanes
/// of a row set in `active`, as the interpreter does: input flushed, the operation, result
/// flushed. The other lanes are neither read nor written (compiled code leaves them
/// unset).
///
/// # Safety
/// `lanes` points to 32 writable `u32`s, those of the lanes in `active` initialised.
unsafe extern "C" fn unit_row(code: u32, lanes: *mut u32, active: u32) {
    let Some(unit) = Vop3Op::from_u32(code).and_then(f32_unit) else {
        return;
    };
    let mut set = active;
    while set != 0 {
        let lane = set.trailing_zeros() as usize;
        debug_assert!(lane < WAVE_SIZE);
        // SAFETY: the caller's contract: an active lane below 32 is initialised and writable.
        unsafe {
            let at = lanes.add(lane);
            *at = flush_f32(unit(f32::from_bits(flush_f32(*at))).to_bits());
        }
        set &= set - 1;
    }
}

pub(super) enum RowSetup {
    None,
    Amount(Value),
    Field(Value, Value),
    /// The 32-bit lane set of a select.
    Mask(Value),
    /// A select's lane set written earlier in its fused run, to this scalar register.
    MaskInRun(u8),
    /// A select's lanes in the current group (all ones where set).
    Lanes(Value),
}

/// Where a lane set an operation of a fused run reads comes from: loaded before the loop, or
/// written by an earlier instruction of the run (to this scalar register).
enum SetSource {
    Loaded(Value),
    InRun(u8),
}

/// An operation of a fused run with what it set up before the loop.
enum Fused {
    Row {
        op: RowOp,
        dst: u8,
        src: [Src; 3],
        modifiers: (u8, u8),
        setup: RowSetup,
        splats: Vec<Option<Value>>,
    },
    Compare {
        cond: Cond,
        src: [Src; 2],
        dst: u8,
        modifiers: (u8, u8),
        splats: Vec<Option<Value>>,
        /// The lane set built group by group.
        bits: StackSlot,
    },
    Carry {
        subtract: bool,
        src: [Src; 2],
        carry_in: Option<SetSource>,
        dst: u8,
        carry: u8,
        splats: Vec<Option<Value>>,
        bits: StackSlot,
    },
    Shl64 {
        src: u8,
        dst: u8,
        /// Whether the amount (mod 64) is 32 or more.
        big: Value,
        /// The amount mod 32, and 31 less it.
        n: Value,
        back: Value,
    },
}
