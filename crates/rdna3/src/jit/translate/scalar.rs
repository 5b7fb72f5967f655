//! Scalar ALU emitter: 32-bit operations (and 64-bit shifts) on the scalar register file and
//! SCC.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder};

use super::plan::{ScalarOp, ScalarPlan, Shift64, Shift64Plan, Uniform};
use super::{flags, Emitter};
use crate::operand::NULL;

impl Emitter<'_> {
    pub(super) fn emit_shift64(&mut self, p: Shift64Plan) {
        let low = self.scalar(Uniform::Sgpr(p.src));
        let high = self.scalar(Uniform::Sgpr(p.src + 1));
        let x = self.pair(low, high);
        let amount = self.scalar(p.amount);
        let amount = self.b.ins().band_imm(amount, 63);
        let amount = self.b.ins().uextend(types::I64, amount);
        let r = match p.op {
            Shift64::Left => self.b.ins().ishl(x, amount),
            Shift64::Right => self.b.ins().ushr(x, amount),
            Shift64::RightArithmetic => self.b.ins().sshr(x, amount),
        };
        let r_low = self.b.ins().ireduce(types::I32, r);
        let r_high = self.b.ins().ushr_imm(r, 32);
        let r_high = self.b.ins().ireduce(types::I32, r_high);
        self.store_scalar(p.dst, r_low);
        self.store_scalar(p.dst + 1, r_high);
        let scc = self.b.ins().icmp_imm(IntCC::NotEqual, r, 0);
        self.b.ins().store(flags(), scc, self.scc, 0);
    }

    pub(super) fn emit_scalar(&mut self, p: ScalarPlan) {
        use ScalarOp::*;
        let a = self.scalar(p.a);
        let b = self.scalar(p.b);
        let (value, scc) = match p.op {
            Mov => (Some(a), None),
            AddU => {
                let r = self.b.ins().iadd(a, b);
                (
                    Some(r),
                    Some(self.b.ins().icmp(IntCC::UnsignedLessThan, r, a)),
                )
            }
            SubU => {
                let r = self.b.ins().isub(a, b);
                (
                    Some(r),
                    Some(self.b.ins().icmp(IntCC::UnsignedLessThan, a, b)),
                )
            }
            AddI | SubI => {
                let r = if p.op == AddI {
                    self.b.ins().iadd(a, b)
                } else {
                    self.b.ins().isub(a, b)
                };
                // Signed overflow: the result's sign differs from what the operands' signs
                // allow (for a sum, from both; for a difference, from the minuend's when the
                // operands' signs differ).
                let ra = self.b.ins().bxor(r, a);
                let other = if p.op == AddI {
                    self.b.ins().bxor(r, b)
                } else {
                    self.b.ins().bxor(a, b)
                };
                let both = self.b.ins().band(ra, other);
                (
                    Some(r),
                    Some(self.b.ins().icmp_imm(IntCC::SignedLessThan, both, 0)),
                )
            }
            AddcU | LshlAdd(_) => {
                let x = self.b.ins().uextend(types::I64, a);
                let y = self.b.ins().uextend(types::I64, b);
                let sum = match p.op {
                    LshlAdd(n) => {
                        let shifted = self.b.ins().ishl_imm(x, i64::from(n));
                        self.b.ins().iadd(shifted, y)
                    }
                    _ => {
                        let carry = self.b.ins().load(types::I8, flags(), self.scc, 0);
                        let carry = self.b.ins().uextend(types::I64, carry);
                        let partial = self.b.ins().iadd(x, y);
                        self.b.ins().iadd(partial, carry)
                    }
                };
                let r = self.b.ins().ireduce(types::I32, sum);
                let high = self.b.ins().ushr_imm(sum, 32);
                (
                    Some(r),
                    Some(self.b.ins().icmp_imm(IntCC::NotEqual, high, 0)),
                )
            }
            MinI | MinU | MaxI | MaxU => {
                let cc = match p.op {
                    MinI => IntCC::SignedLessThan,
                    MinU => IntCC::UnsignedLessThan,
                    MaxI => IntCC::SignedGreaterThan,
                    _ => IntCC::UnsignedGreaterThan,
                };
                let chosen = self.b.ins().icmp(cc, a, b);
                (Some(self.b.ins().select(chosen, a, b)), Some(chosen))
            }
            Cselect => {
                let scc = self.b.ins().load(types::I8, flags(), self.scc, 0);
                (Some(self.b.ins().select(scc, a, b)), None)
            }
            And | Or | Xor | Lshl | Lshr | Ashr => {
                let r = match p.op {
                    And => self.b.ins().band(a, b),
                    Or => self.b.ins().bor(a, b),
                    Xor => self.b.ins().bxor(a, b),
                    _ => {
                        let amount = self.b.ins().band_imm(b, 31);
                        match p.op {
                            Lshl => self.b.ins().ishl(a, amount),
                            Lshr => self.b.ins().ushr(a, amount),
                            _ => self.b.ins().sshr(a, amount),
                        }
                    }
                };
                (Some(r), Some(self.b.ins().icmp_imm(IntCC::NotEqual, r, 0)))
            }
            MulI => (Some(self.b.ins().imul(a, b)), None),
            Cmp(cc) => (None, Some(self.b.ins().icmp(cc, a, b))),
        };
        if let Some(value) = value {
            if p.dst != NULL {
                self.store_scalar(p.dst, value);
            }
        }
        if let Some(scc) = scc {
            self.b.ins().store(flags(), scc, self.scc, 0);
        }
    }
}
