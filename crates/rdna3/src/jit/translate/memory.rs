//! Global memory emitter: whole-dword loads and stores with one translation of the span the
//! wave's active lanes touch, as loops over the active lanes (a load is as many host loads as
//! the interpreter makes; unrolled, a block of eight `global_load_b128` would be ~50 KB of
//! code).

use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, MemFlags, Signature, StackSlotData, StackSlotKind, Value,
};

use super::plan::{MemoryPlan, Uniform};
use super::{flags, Emitter, ROW_BYTES};
use crate::exec::WAVE_SIZE;

impl Emitter<'_> {
    pub(super) fn emit_memory(&mut self, index: u32, p: MemoryPlan) {
        let i64t = types::I64;
        let exec = self.exec();
        let done = self.b.create_block();
        let work = self.b.create_block();
        self.b.ins().brif(exec, work, &[], done, &[]);
        self.b.switch_to_block(work);
        let exec64 = self.b.ins().uextend(i64t, exec);
        let base = match p.saddr {
            Some(pair) => {
                let low = self.scalar(Uniform::Sgpr(pair));
                let high = self.scalar(Uniform::Sgpr(pair + 1));
                Some(self.pair(low, high))
            }
            None => None,
        };
        // Every active lane's address, kept on the stack (all read before a load writes a
        // register that may hold one), and the lowest and highest.
        let addrs = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (WAVE_SIZE * 8) as u32,
            3,
        ));
        let addrs_at = self.b.ins().stack_addr(i64t, addrs, 0);
        let lowest = self.b.ins().iconst(i64t, -1);
        let highest = self.b.ins().iconst(i64t, 0);
        let (looped, remaining, lane, [lo, hi]) = self.bit_loop(exec64, [lowest, highest]);
        let address = {
            let low = self.lane_at(p.addr, lane);
            let address = match base {
                Some(base) => {
                    let low = self.b.ins().uextend(i64t, low);
                    self.b.ins().iadd(base, low)
                }
                None => {
                    let high = self.lane_at(p.addr + 1, lane);
                    self.pair(low, high)
                }
            };
            self.b.ins().iadd_imm(address, i64::from(p.offset))
        };
        let slot = self.b.ins().ishl_imm(lane, 3);
        let slot = self.b.ins().iadd(addrs_at, slot);
        self.b.ins().store(flags(), address, slot, 0);
        let lo = self.b.ins().umin(lo, address);
        let hi = self.b.ins().umax(hi, address);
        let [lo, hi] = self.end_bit_loop(looped, remaining, [lo, hi]);

        let mut sig = Signature::new(self.call_conv);
        for _ in 0..4 {
            sig.params.push(AbiParam::new(i64t));
        }
        sig.returns.push(AbiParam::new(i64t));
        let sig = self.b.import_signature(sig);
        let function = self.b.ins().iconst(
            i64t,
            crate::jit::native::translate_span as *const () as usize as i64,
        );
        let bytes = self.b.ins().iconst(i64t, i64::from(p.dwords) * 4);
        let call = self
            .b
            .ins()
            .call_indirect(sig, function, &[self.frame, lo, hi, bytes]);
        let host = self.b.inst_results(call)[0];
        let mapped = self.b.create_block();
        let unmapped = self.b.create_block();
        self.b.ins().brif(host, mapped, &[], unmapped, &[]);
        // Not one mapped span: the interpreter decides (a fault, or lanes one by one).
        let files = (self.sgpr, self.vgpr, self.scc);
        self.b.switch_to_block(unmapped);
        self.call_helper(index);
        self.b.ins().jump(done, &[]);

        self.b.switch_to_block(mapped);
        (self.sgpr, self.vgpr, self.scc) = files;
        let memory = MemFlags::new().with_notrap();
        // Lane order (a later lane's store wins where two overlap).
        let (looped, remaining, lane, []) = self.bit_loop(exec64, []);
        let slot = self.b.ins().ishl_imm(lane, 3);
        let slot = self.b.ins().iadd(addrs_at, slot);
        let address = self.b.ins().load(i64t, flags(), slot, 0);
        let from_lo = self.b.ins().isub(address, lo);
        let at = self.b.ins().iadd(host, from_lo);
        // Dword pairs as one 8-byte access, as the interpreter moves aligned 8-byte pieces (a
        // 64-bit value is never seen half written).
        let mut k = 0;
        while k < p.dwords {
            let offset = i32::from(k) * 4;
            let pair = k + 1 < p.dwords;
            if p.store {
                let low = self.lane_at(p.data + k, lane);
                let value = if pair {
                    let high = self.lane_at(p.data + k + 1, lane);
                    self.pair(low, high)
                } else {
                    low
                };
                self.b.ins().store(memory, value, at, offset);
            } else if pair {
                let both = self.b.ins().load(types::I64, memory, at, offset);
                let low = self.b.ins().ireduce(types::I32, both);
                let high = self.b.ins().ushr_imm(both, 32);
                let high = self.b.ins().ireduce(types::I32, high);
                self.set_lane(p.data + k, lane, low);
                self.set_lane(p.data + k + 1, lane, high);
            } else {
                let value = self.b.ins().load(types::I32, memory, at, offset);
                self.set_lane(p.data + k, lane, value);
            }
            k += if pair { 2 } else { 1 };
        }
        self.end_bit_loop(looped, remaining, []);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        // The helper may have run on one path: the register-file pointers are reloaded.
        self.load_register_files();
    }

    /// Host address of one lane (an i64) of a VGPR.
    fn lane_address(&mut self, row: u8, lane: Value) -> Value {
        let offset = self.b.ins().ishl_imm(lane, 2);
        let at = self.b.ins().iadd(self.vgpr, offset);
        self.b
            .ins()
            .iadd_imm(at, i64::from(i32::from(row) * ROW_BYTES))
    }

    /// One lane (an i64) of a VGPR.
    fn lane_at(&mut self, row: u8, lane: Value) -> Value {
        let at = self.lane_address(row, lane);
        self.b.ins().load(types::I32, flags(), at, 0)
    }

    /// Writes one lane (an i64) of a VGPR.
    fn set_lane(&mut self, row: u8, lane: Value, value: Value) {
        let at = self.lane_address(row, lane);
        self.b.ins().store(flags(), value, at, 0);
    }

    /// `low | high << 32`.
    fn pair(&mut self, low: Value, high: Value) -> Value {
        let low = self.b.ins().uextend(types::I64, low);
        let high = self.b.ins().uextend(types::I64, high);
        let high = self.b.ins().ishl_imm(high, 32);
        self.b.ins().bor(low, high)
    }
}
