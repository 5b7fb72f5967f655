//! Vector ALU emitters: 32-lane operations as eight 128-bit vectors (four lanes each) over
//! the VGPR rows, results merged into the destination under EXEC.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, Signature, StackSlotData, StackSlotKind, Value,
};

use super::plan::{Cond, Plan, RowOp, Src, Uniform};
use super::{flags, Emitter, GroupAt, ROW_BYTES};
use crate::exec::{f32_unit, flush_f32, WAVE_SIZE};
use crate::isa::Vop3Op;
use crate::operand::NULL;

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

    /// One group of `op`'s lanes from its sources' groups and the destination's old group.
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
                let RowSetup::Mask(set) = *setup else {
                    unreachable!("cndmask is set up with its lane set")
                };
                let mask = self.lane_mask(set, g);
                self.b.ins().bitselect(mask, b, a)
            }
        }
    }

    pub(super) fn emit(&mut self, plans: &[Plan]) {
        match plans {
            [Plan::Compare {
                cond,
                src,
                dst,
                abs,
                neg,
            }] => self.emit_compare(*cond, *src, *dst, (*abs, *neg)),
            [Plan::Carry {
                subtract,
                src,
                carry_in,
                dst,
                carry,
            }] => self.emit_carry(*subtract, *src, *carry_in, *dst, *carry),
            [Plan::Shl64 { amount, src, dst }] => self.emit_shl64(*amount, *src, *dst),
            [Plan::Unit {
                op,
                src,
                dst,
                abs,
                neg,
            }] => self.emit_unit(*op, *src, *dst, (*abs, *neg)),
            _ => self.emit_rows(&[plans.to_vec()]),
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
        let (looped, index, g, []) = self.group_loop([]);
        let lanes = self.group_of(src, splat, g, 0, modifiers);
        let offset = self.b.ins().ishl_imm(index, 4);
        let slot = self.b.ins().iadd(at, offset);
        self.b.ins().store(flags(), lanes, slot, 0);
        self.end_group_loop(looped, index, []);
        let mut sig = Signature::new(self.call_conv);
        sig.params.push(AbiParam::new(types::I32));
        sig.params.push(AbiParam::new(types::I64));
        let sig = self.b.import_signature(sig);
        let function = self.b.ins().iconst(
            types::I64,
            unit_row as unsafe extern "C" fn(u32, *mut u32) as usize as i64,
        );
        let code = self.b.ins().iconst(types::I32, i64::from(op.code()));
        self.b.ins().call_indirect(sig, function, &[code, at]);
        let exec = self.exec();
        let (looped, index, g, []) = self.group_loop([]);
        let offset = self.b.ins().ishl_imm(index, 4);
        let slot = self.b.ins().iadd(at, offset);
        let value = self.b.ins().load(types::I32X4, flags(), slot, 0);
        let old = self.load_group(dst, g);
        let mask = self.lane_mask(exec, g);
        let merged = self.b.ins().bitselect(mask, value, old);
        self.store_group(dst, g, merged);
        self.end_group_loop(looped, index, []);
    }

    /// `v_lshlrev_b64`: with `s = amount & 63` and `n = s & 31`, below 32 the low half is
    /// `lo << n` and the high half `hi << n | lo >> (32 - n)` (the carry shifted in two steps,
    /// as vector shifts take their amount modulo 32); from 32 on, 0 and `lo << n`.
    pub(super) fn emit_shl64(&mut self, amount: Uniform, src: u8, dst: u8) {
        let s = self.scalar(amount);
        let s = self.b.ins().band_imm(s, 63);
        let big = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, s, 32);
        let n = self.b.ins().band_imm(s, 31);
        let thirty_one = self.b.ins().iconst(types::I32, 31);
        let back = self.b.ins().isub(thirty_one, n);
        let zero = self.b.ins().iconst(types::I32, 0);
        let zero = self.b.ins().splat(types::I32X4, zero);
        let exec = self.exec();
        let (looped, index, g, []) = self.group_loop([]);
        let mask = self.lane_mask(exec, g);
        let lo = self.load_group(src, g);
        let hi = self.load_group(src + 1, g);
        let lo_shifted = self.b.ins().ishl(lo, n);
        let hi_shifted = self.b.ins().ishl(hi, n);
        let carry = self.b.ins().ushr_imm(lo, 1);
        let carry = self.b.ins().ushr(carry, back);
        let joined = self.b.ins().bor(hi_shifted, carry);
        let new_lo = self.b.ins().select(big, zero, lo_shifted);
        let new_hi = self.b.ins().select(big, lo_shifted, joined);
        let old_lo = self.load_group(dst, g);
        let old_hi = self.load_group(dst + 1, g);
        let new_lo = self.b.ins().bitselect(mask, new_lo, old_lo);
        let new_hi = self.b.ins().bitselect(mask, new_hi, old_hi);
        self.store_group(dst, g, new_lo);
        self.store_group(dst + 1, g, new_hi);
        self.end_group_loop(looped, index, []);
    }

    /// Consecutive instructions of row operations (each one operation, or a VOPD's two) in one
    /// loop over the lane groups: per group, the instructions in order, each loading all its
    /// sources before storing its results. The same as running them one after another: each
    /// touches only its own lanes of every row, and none writes a scalar register or EXEC.
    pub(super) fn emit_rows(&mut self, instructions: &[Vec<Plan>]) {
        // (operation, destination, sources, (abs, neg)) of each plan, and where each
        // instruction's plans end.
        type RowPlan = (RowOp, u8, [Src; 3], (u8, u8));
        let rows: Vec<RowPlan> = instructions
            .iter()
            .flatten()
            .map(|p| match *p {
                Plan::Row {
                    op,
                    dst,
                    src,
                    abs,
                    neg,
                } => (op, dst, src, (abs, neg)),
                _ => unreachable!("only row plans are fused"),
            })
            .collect();
        let ends: Vec<usize> = instructions
            .iter()
            .scan(0, |end, plans| {
                *end += plans.len();
                Some(*end)
            })
            .collect();
        let setups: Vec<RowSetup> = rows
            .iter()
            .map(|(op, _, src, _)| self.row_setup(*op, src))
            .collect();
        let splats: Vec<Vec<Option<Value>>> = rows
            .iter()
            .map(|(_, _, s, modifiers)| self.splats(s, *modifiers))
            .collect();
        let exec = self.exec();
        let (looped, index, g, []) = self.group_loop([]);
        let mask = self.lane_mask(exec, g);
        let mut results = Vec::with_capacity(2);
        for (k, (op, dst, src, modifiers)) in rows.iter().enumerate() {
            let a = self.group_of(src[0], splats[k][0], g, 0, *modifiers);
            let b = self.group_of(src[1], splats[k][1], g, 1, *modifiers);
            let c = self.group_of(src[2], splats[k][2], g, 2, *modifiers);
            let old = self.load_group(*dst, g);
            let value = self.row_compute(*op, &setups[k], [a, b, c, old], g);
            let merged = self.b.ins().bitselect(mask, value, old);
            results.push((*dst, merged));
            if ends.contains(&(k + 1)) {
                for (dst, merged) in results.drain(..) {
                    self.store_group(dst, g, merged);
                }
            }
        }
        self.end_group_loop(looped, index, []);
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

    pub(super) fn emit_compare(&mut self, cond: Cond, src: [Src; 2], dst: u8, modifiers: (u8, u8)) {
        let splats = self.splats(&src, modifiers);
        let none = self.b.ins().iconst(types::I32, 0);
        let (looped, index, g, [bits]) = self.group_loop([none]);
        let a = self.group_of(src[0], splats[0], g, 0, modifiers);
        let b = self.group_of(src[1], splats[1], g, 1, modifiers);
        let lanes = match cond {
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
        let bits = self.add_mask_bits(bits, lanes, g);
        let [mask] = self.end_group_loop(looped, index, [bits]);
        let exec = self.exec();
        let mask = self.b.ins().band(mask, exec);
        if dst != NULL {
            self.store_scalar(dst, mask);
        }
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

    pub(super) fn emit_carry(
        &mut self,
        subtract: bool,
        src: [Src; 2],
        carry_in: Option<Uniform>,
        dst: u8,
        carry: u8,
    ) {
        let splats = self.splats(&src, (0, 0));
        let carry_in = carry_in.map(|u| self.scalar(u));
        let exec = self.exec();
        let none = self.b.ins().iconst(types::I32, 0);
        let (looped, index, g, [bits]) = self.group_loop([none]);
        let mask = self.lane_mask(exec, g);
        let x = self.group_of(src[0], splats[0], g, 0, (0, 0));
        let y = self.group_of(src[1], splats[1], g, 1, (0, 0));
        // `cin` is all ones (-1) in lanes whose carry-in bit is set.
        let cin = carry_in.map(|set| self.lane_mask(set, g));
        {
            let (value, out) = if subtract {
                let below = self.b.ins().icmp(IntCC::UnsignedLessThan, x, y);
                let t = self.b.ins().isub(x, y);
                match cin {
                    None => (t, below),
                    Some(cin) => {
                        let zero = self.b.ins().iconst(types::I32, 0);
                        let zero = self.b.ins().splat(types::I32X4, zero);
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
            };
            let old = self.load_group(dst, g);
            let merged = self.b.ins().bitselect(mask, value, old);
            self.store_group(dst, g, merged);
            let bits = self.add_mask_bits(bits, out, g);
            let [bits] = self.end_group_loop(looped, index, [bits]);
            if carry != NULL {
                let bits = self.b.ins().band(bits, exec);
                self.store_scalar(carry, bits);
            }
        }
    }
}

/// Computes the f32 transcendental-unit operation `code` (a `Vop3Op`) over a row in place,
/// as the interpreter does: input flushed, the operation, result flushed.
///
/// # Safety
/// `lanes` points to 32 writable `u32`s.
unsafe extern "C" fn unit_row(code: u32, lanes: *mut u32) {
    let Some(unit) = Vop3Op::from_u32(code).and_then(f32_unit) else {
        return;
    };
    // SAFETY: the caller's contract; compiled code passes its own stack row.
    let lanes = unsafe { &mut *lanes.cast::<[u32; WAVE_SIZE]>() };
    for lane in lanes.iter_mut() {
        *lane = flush_f32(unit(f32::from_bits(flush_f32(*lane))).to_bits());
    }
}

pub(super) enum RowSetup {
    None,
    Amount(Value),
    Field(Value, Value),
    /// The 32-bit lane set of a select.
    Mask(Value),
}
