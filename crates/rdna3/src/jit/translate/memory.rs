//! Memory emitter. Global memory: whole-dword loads and stores with one translation of the
//! span the wave's active lanes touch (per address source of a run of accesses), as loops
//! over the active lanes (a load is as many host loads as the interpreter makes; unrolled, a
//! block of eight `global_load_b128` would be ~50 KB of code). LDS: whole-dword loads and
//! stores checked once against the workgroup's LDS. Scalar loads into SGPRs.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, ConstantData, Endianness, InstBuilder, MemFlags, Signature,
    StackSlotData, StackSlotKind, Value,
};

use super::plan::{LdsPlan, MemoryPlan, ScalarLoadPlan, Uniform};
use super::{flags, Emitter, GroupAt, FRAME_LDS, FRAME_LDS_LEN, ROW_BYTES};
use crate::exec::WAVE_SIZE;

/// One address source of a run of accesses (an address VGPR, with or without a scalar
/// base): every active lane's address before the instructions' offsets, and the span the
/// run's accesses through it touch.
struct AddressSource {
    addr: u8,
    saddr: Option<u8>,
    /// Stack array of the 32 lanes' addresses (i64; active lanes only written).
    addrs_at: Value,
    /// Lowest and highest active lane address.
    lo: Value,
    hi: Value,
    /// Lowest offset of the run's accesses through this source, and highest offset + size.
    first: i32,
    end: i32,
}

impl Emitter<'_> {
    /// A run of global accesses that follow one another in the block (timing-only
    /// instructions aside), none loading a register a later one addresses through: each
    /// distinct address source's lane addresses are computed once, and the span its accesses
    /// touch translated once; then every access moves its lanes, in program order. A span
    /// that does not translate has the interpreter run the whole run, instruction by
    /// instruction (it reports what it finds).
    pub(super) fn emit_memory_run(&mut self, run: &[(u32, MemoryPlan)]) {
        let i64t = types::I64;
        let exec = self.exec();
        let done = self.b.create_block();
        let work = self.b.create_block();
        self.b.ins().brif(exec, work, &[], done, &[]);
        self.b.switch_to_block(work);
        let exec64 = self.b.ins().uextend(i64t, exec);

        // Each access's source (an index into `sources`).
        let mut sources: Vec<AddressSource> = Vec::new();
        let mut source_of: Vec<usize> = Vec::with_capacity(run.len());
        for (_, p) in run {
            let end = p.offset + i32::from(p.dwords) * 4;
            let known = sources
                .iter()
                .position(|s| (s.addr, s.saddr) == (p.addr, p.saddr));
            if let Some(k) = known {
                let s = &mut sources[k];
                (s.first, s.end) = (s.first.min(p.offset), s.end.max(end));
                source_of.push(k);
                continue;
            }
            let (addrs_at, lo, hi) = self.lane_addresses(p.addr, p.saddr, exec, exec64);
            source_of.push(sources.len());
            sources.push(AddressSource {
                addr: p.addr,
                saddr: p.saddr,
                addrs_at,
                lo,
                hi,
                first: p.offset,
                end,
            });
        }

        // Per source, its host address less its GPU address over its span; and whether every
        // span translated.
        let mut all_mapped = self.b.ins().iconst(types::I8, 1);
        let biases: Vec<Value> = sources
            .iter()
            .map(|source| {
                // Offsets added after the lowest and highest lane: a span that wraps around
                // the address space comes out with its start above its end, which does not
                // translate.
                let lo = self.b.ins().iadd_imm(source.lo, i64::from(source.first));
                let end = self.b.ins().iadd_imm(source.hi, i64::from(source.end));
                let host = self.translate(lo, end);
                let mapped = self.b.ins().icmp_imm(IntCC::NotEqual, host, 0);
                all_mapped = self.b.ins().band(all_mapped, mapped);
                self.b.ins().isub(host, lo)
            })
            .collect();
        // Not every span mapped: the interpreter decides (a fault, or lanes one by one).
        let indices: Vec<u32> = run.iter().map(|&(index, _)| index).collect();
        self.interpreted_unless(all_mapped, &indices, done);
        // Per access: its source's lane addresses, and what makes them host addresses (a lane's
        // address plus the access's offset, less the span's start, plus where that is).
        let lanes_of: Vec<(Value, Value)> = run
            .iter()
            .zip(&source_of)
            .map(|((_, p), &k)| {
                let bias = self.b.ins().iadd_imm(biases[k], i64::from(p.offset));
                (sources[k].addrs_at, bias)
            })
            .collect();
        let exec_full = self.b.ins().icmp_imm(IntCC::Equal, exec, -1);
        let (groups, lanes) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(exec_full, groups, &[], lanes, &[]);
        self.b.switch_to_block(groups);
        for ((_, p), &(addrs_at, bias)) in run.iter().zip(&lanes_of) {
            self.move_groups(p, addrs_at, bias);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(lanes);
        for ((_, p), &(addrs_at, bias)) in run.iter().zip(&lanes_of) {
            // Lane order (a later lane's store wins where two overlap).
            let (looped, remaining, lane, []) = self.bit_loop(exec64, []);
            self.move_lane(p, lane, addrs_at, bias);
            self.end_bit_loop(looped, remaining, []);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        // The helper may have run on one path: the register-file pointers are reloaded.
        self.load_register_files();
    }

    /// The host address of the GPU range `[lo, end)` if one mapping holds it, else null
    /// (`native::translate_span`).
    fn translate(&mut self, lo: Value, end: Value) -> Value {
        let i64t = types::I64;
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
        let nothing = self.b.ins().iconst(i64t, 0);
        let call = self
            .b
            .ins()
            .call_indirect(sig, function, &[self.frame, lo, end, nothing]);
        self.b.inst_results(call)[0]
    }

    /// A scalar load: the dwords read from memory first, then written to their registers
    /// (the destination may be the base pair).
    pub(super) fn emit_scalar_load(&mut self, index: u32, p: ScalarLoadPlan) {
        let i64t = types::I64;
        let low = self.scalar(Uniform::Sgpr(p.sbase));
        let high = self.scalar(Uniform::Sgpr(p.sbase + 1));
        let mut address = self.pair(low, high);
        address = self.b.ins().iadd_imm(address, i64::from(p.offset));
        if let Some(slot) = p.soffset {
            let soffset = self.scalar(Uniform::Sgpr(slot));
            let soffset = self.b.ins().uextend(i64t, soffset);
            address = self.b.ins().iadd(address, soffset);
        }
        let address = self.b.ins().band_imm(address, !3);
        let end = self.b.ins().iadd_imm(address, i64::from(p.dwords) * 4);
        let host = self.translate(address, end);
        let done = self.b.create_block();
        self.interpreted_unless(host, &[index], done);
        let memory = MemFlags::new().with_notrap();
        let values: Vec<Value> = (0..i32::from(p.dwords))
            .map(|k| self.b.ins().load(types::I32, memory, host, k * 4))
            .collect();
        for (k, value) in (0u8..).zip(values) {
            self.store_scalar(p.sdata + k, value);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        self.load_register_files();
    }

    /// An LDS access: every active lane's address (the address VGPR plus the offset, in 32
    /// bits) below the LDS size less the access's, checked once through the highest; then
    /// each active lane's dwords moved, in lane order. Any lane outside has the interpreter
    /// run the instruction (which faults there).
    pub(super) fn emit_lds(&mut self, index: u32, p: LdsPlan) {
        let i64t = types::I64;
        let exec = self.exec();
        let (work, done) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(exec, work, &[], done, &[]);
        self.b.switch_to_block(work);
        let exec64 = self.b.ins().uextend(i64t, exec);
        let lds = self.b.ins().load(i64t, flags(), self.frame, FRAME_LDS);
        let lds_len = self.b.ins().load(i64t, flags(), self.frame, FRAME_LDS_LEN);
        let zero = self.b.ins().iconst(i64t, 0);
        let (looped, remaining, lane, [highest]) = self.bit_loop(exec64, [zero]);
        let address = self.lds_address(&p, lane);
        let highest = self.b.ins().umax(highest, address);
        let [highest] = self.end_bit_loop(looped, remaining, [highest]);
        let end = self.b.ins().iadd_imm(highest, i64::from(p.dwords) * 4);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, end, lds_len);
        self.interpreted_unless(fits, &[index], done);
        let (looped, remaining, lane, []) = self.bit_loop(exec64, []);
        let address = self.lds_address(&p, lane);
        let at = self.b.ins().iadd(lds, address);
        for k in 0..p.dwords {
            let offset = i32::from(k) * 4;
            if p.store {
                let value = self.lane_at(p.data + k, lane);
                self.b.ins().store(flags(), value, at, offset);
            } else {
                let value = self.b.ins().load(types::I32, flags(), at, offset);
                self.set_lane(p.data + k, lane, value);
            }
        }
        self.end_bit_loop(looped, remaining, []);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        self.load_register_files();
    }

    /// Goes on if `ok` is nonzero; else the interpreter runs the instructions `indices` in
    /// order and the code continues at `done` (where the register files are to be reloaded).
    fn interpreted_unless(&mut self, ok: Value, indices: &[u32], done: Block) {
        let (go, fallback) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(ok, go, &[], fallback, &[]);
        let files = (self.sgpr, self.vgpr, self.scc);
        self.b.switch_to_block(fallback);
        for &index in indices {
            self.call_helper(index);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(go);
        (self.sgpr, self.vgpr, self.scc) = files;
    }

    /// A lane's LDS byte address (an i64 below 2^32): its address VGPR plus the offset,
    /// wrapping in 32 bits as the hardware adds them.
    fn lds_address(&mut self, p: &LdsPlan, lane: Value) -> Value {
        let base = self.lane_at(p.addr, lane);
        let address = self.b.ins().iadd_imm(base, i64::from(p.offset));
        self.b.ins().uextend(types::I64, address)
    }

    /// Every active lane's address through `addr` (a pair, or an offset from the scalar pair
    /// `saddr`) into a new stack array; answers the array and the lowest and highest address.
    fn lane_addresses(
        &mut self,
        addr: u8,
        saddr: Option<u8>,
        exec: Value,
        exec64: Value,
    ) -> (Value, Value, Value) {
        let i64t = types::I64;
        let base = match saddr {
            Some(pair) => {
                let low = self.scalar(Uniform::Sgpr(pair));
                let high = self.scalar(Uniform::Sgpr(pair + 1));
                Some(self.pair(low, high))
            }
            None => None,
        };
        // Kept on the stack: all read before a load writes a register that may hold one.
        let addrs = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (WAVE_SIZE * 8) as u32,
            3,
        ));
        let addrs_at = self.b.ins().stack_addr(i64t, addrs, 0);
        let lowest = self.b.ins().iconst(i64t, -1);
        let highest = self.b.ins().iconst(i64t, 0);
        // Under a full EXEC, four lanes at a time.
        let spanned = self.block_taking(&[lowest, highest]);
        let (by_groups, by_lanes) = (self.b.create_block(), self.b.create_block());
        let exec_full = self.b.ins().icmp_imm(IntCC::Equal, exec, -1);
        self.b.ins().brif(exec_full, by_groups, &[], by_lanes, &[]);
        self.b.switch_to_block(by_groups);
        let [lo, hi] = self.group_addresses(addr, base, addrs_at);
        self.b.ins().jump(spanned, &[lo.into(), hi.into()]);
        self.b.switch_to_block(by_lanes);
        let (looped, remaining, lane, [lo, hi]) = self.bit_loop(exec64, [lowest, highest]);
        let address = {
            let low = self.lane_at(addr, lane);
            match base {
                Some(base) => {
                    let low = self.b.ins().uextend(i64t, low);
                    self.b.ins().iadd(base, low)
                }
                None => {
                    let high = self.lane_at(addr + 1, lane);
                    self.pair(low, high)
                }
            }
        };
        let slot = self.b.ins().ishl_imm(lane, 3);
        let slot = self.b.ins().iadd(addrs_at, slot);
        self.b.ins().store(flags(), address, slot, 0);
        let lo = self.b.ins().umin(lo, address);
        let hi = self.b.ins().umax(hi, address);
        let [lo, hi] = self.end_bit_loop(looped, remaining, [lo, hi]);
        self.b.ins().jump(spanned, &[lo.into(), hi.into()]);
        self.b.switch_to_block(spanned);
        let params = self.b.block_params(spanned);
        (addrs_at, params[0], params[1])
    }

    /// One access under a full EXEC, a group of four lanes at a time: a load gathers each
    /// lane's dwords (one host load a lane) and transposes them into rows; a store of a group
    /// whose accesses follow one another moves as whole vectors, any other lane by lane (in
    /// lane order: where two lanes' stores overlap, the later wins). A lane's host address is
    /// its address (from `addrs_at`) plus `bias`.
    fn move_groups(&mut self, p: &MemoryPlan, addrs_at: Value, bias: Value) {
        let i64t = types::I64;
        let (looped, index, g, []) = self.group_loop([]);
        let first = self.b.ins().ishl_imm(index, 2);
        let slots = self.b.ins().ishl_imm(first, 3);
        let slots = self.b.ins().iadd(addrs_at, slots);
        let addresses: [Value; 4] =
            std::array::from_fn(|k| self.b.ins().load(i64t, flags(), slots, (k * 8) as i32));
        // Three dwords a lane do not make whole vectors.
        if !p.store && p.dwords != 3 {
            let at = addresses.map(|a| self.b.ins().iadd(a, bias));
            self.gather_group(p, at, g);
            self.end_group_loop(looped, index, []);
            return;
        }
        let stride = i64::from(p.dwords) * 4;
        let mut following = self.b.ins().iconst(types::I8, 1);
        for k in 1..4 {
            let step = self.b.ins().isub(addresses[k], addresses[k - 1]);
            let next = self.b.ins().icmp_imm(IntCC::Equal, step, stride);
            following = self.b.ins().band(following, next);
        }
        let (whole, single, next_group) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        if p.dwords == 3 {
            self.b.ins().jump(single, &[]);
        } else {
            self.b.ins().brif(following, whole, &[], single, &[]);
        }
        self.b.switch_to_block(whole);
        let at = self.b.ins().iadd(addresses[0], bias);
        self.store_group_following(p, at, g);
        self.b.ins().jump(next_group, &[]);
        self.b.switch_to_block(single);
        for k in 0..4 {
            let lane = self.b.ins().iadd_imm(first, k);
            self.move_lane(p, lane, addrs_at, bias);
        }
        self.b.ins().jump(next_group, &[]);
        self.b.switch_to_block(next_group);
        self.end_group_loop(looped, index, []);
    }

    /// Loads a group of four lanes (one, two or four dwords a lane, from the host addresses
    /// `at`) into its rows: each lane's dwords in one host load (an aligned 8-byte piece is
    /// read at once, as the interpreter reads it), then transposed from lane order.
    fn gather_group(&mut self, p: &MemoryPlan, at: [Value; 4], g: GroupAt) {
        let memory = MemFlags::new().with_notrap();
        let wide = MemFlags::new().with_endianness(Endianness::Little);
        let rows = match p.dwords {
            1 => {
                let values = at.map(|a| self.b.ins().load(types::I32, memory, a, 0));
                let mut row = self.b.ins().scalar_to_vector(types::I32X4, values[0]);
                for (k, &v) in (1u8..).zip(&values[1..]) {
                    row = self.b.ins().insertlane(row, v, k);
                }
                vec![row]
            }
            2 => {
                let values = at.map(|a| self.b.ins().load(types::I64, memory, a, 0));
                let lanes: Vec<Value> = values
                    .chunks(2)
                    .map(|pair| {
                        let v = self.b.ins().scalar_to_vector(types::I64X2, pair[0]);
                        let v = self.b.ins().insertlane(v, pair[1], 1);
                        self.b.ins().bitcast(types::I32X4, wide, v)
                    })
                    .collect();
                self.transpose(&lanes, false)
            }
            _ => {
                let lanes = at.map(|a| self.b.ins().load(types::I32X4, memory, a, 0));
                self.transpose(&lanes, false)
            }
        };
        for (k, row) in (0u8..).zip(rows) {
            self.store_group(p.data + k, g, row);
        }
    }

    /// Every lane's address through `addr` (under a full EXEC) into the stack array at
    /// `addrs_at`, four lanes at a time; answers the lowest and highest. Kept as 32-bit halves:
    /// the lowest and highest high word and low word of the lanes. Where every lane has one
    /// high word (or the scalar base makes the high words one), the low words order the
    /// addresses; otherwise the stored addresses are searched one by one.
    fn group_addresses(&mut self, addr: u8, base: Option<Value>, addrs_at: Value) -> [Value; 2] {
        let i64t = types::I64;
        let pairs = types::I64X2;
        let wide = MemFlags::new().with_endianness(Endianness::Little);
        let base_pairs = base.map(|b| self.b.ins().splat(pairs, b));
        let zero = self.zero_group();
        let all_ones = self.b.ins().iconst(types::I32, -1);
        let all_ones = self.b.ins().splat(types::I32X4, all_ones);
        let (looped, index, g, [low_min, low_max, high_min, high_max]) =
            self.group_loop([all_ones, zero, all_ones, zero]);
        let low = self.load_group(addr, g);
        let high = match base {
            Some(_) => zero,
            None => self.load_group(addr + 1, g),
        };
        let low_min = self.b.ins().umin(low_min, low);
        let low_max = self.b.ins().umax(low_max, low);
        let high_min = self.b.ins().umin(high_min, high);
        let high_max = self.b.ins().umax(high_max, high);
        // Dwords interleaved as [a, b, c, d] and [0 or high halves] make little-endian 64-bit
        // pairs.
        let halves = [
            self.dword_shuffle(low, high, [0, 4, 1, 5]),
            self.dword_shuffle(low, high, [2, 6, 3, 7]),
        ];
        let at = self.b.ins().ishl_imm(index, 5);
        let at = self.b.ins().iadd(addrs_at, at);
        for (k, half) in halves.into_iter().enumerate() {
            let mut address = self.b.ins().bitcast(pairs, wide, half);
            if let Some(base) = base_pairs {
                address = self.b.ins().iadd(address, base);
            }
            self.b.ins().store(flags(), address, at, (k * 16) as i32);
        }
        let [low_min, low_max, high_min, high_max] =
            self.end_group_loop(looped, index, [low_min, low_max, high_min, high_max]);
        let [low_min, high_min] = [low_min, high_min].map(|v| self.across(v, false));
        let [low_max, high_max] = [low_max, high_max].map(|v| self.across(v, true));
        let one_high = self.b.ins().icmp(IntCC::Equal, high_min, high_max);
        let (ordered, searched, spanned) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(spanned, i64t);
        self.b.append_block_param(spanned, i64t);
        self.b.ins().brif(one_high, ordered, &[], searched, &[]);
        self.b.switch_to_block(ordered);
        let high = self.b.ins().uextend(i64t, high_min);
        let high = self.b.ins().ishl_imm(high, 32);
        let [lo, hi] = [low_min, low_max].map(|low| {
            let low = self.b.ins().uextend(i64t, low);
            let address = self.b.ins().bor(high, low);
            // A scalar base plus offsets that wrap around the address space makes a span
            // whose end is below its start, which does not translate.
            match base {
                Some(base) => self.b.ins().iadd(base, address),
                None => address,
            }
        });
        self.b.ins().jump(spanned, &[lo.into(), hi.into()]);
        self.b.switch_to_block(searched);
        let lowest = self.b.ins().iconst(i64t, -1);
        let highest = self.b.ins().iconst(i64t, 0);
        let (looped, lane, [lo, hi]) = self.counted_loop([lowest, highest]);
        let slot = self.b.ins().ishl_imm(lane, 3);
        let slot = self.b.ins().iadd(addrs_at, slot);
        let address = self.b.ins().load(i64t, flags(), slot, 0);
        let lo = self.b.ins().umin(lo, address);
        let hi = self.b.ins().umax(hi, address);
        let [lo, hi] = self.end_counted_loop(looped, lane, WAVE_SIZE, [lo, hi]);
        self.b.ins().jump(spanned, &[lo.into(), hi.into()]);
        self.b.switch_to_block(spanned);
        let params = self.b.block_params(spanned);
        [params[0], params[1]]
    }

    /// The lowest (or highest, if `max`) of a vector's four dwords.
    fn across(&mut self, v: Value, max: bool) -> Value {
        let pick = |e: &mut Self, a: Value, b: Value| {
            if max {
                e.b.ins().umax(a, b)
            } else {
                e.b.ins().umin(a, b)
            }
        };
        let swapped = self.dword_shuffle(v, v, [2, 3, 0, 1]);
        let two = pick(self, v, swapped);
        let swapped = self.dword_shuffle(two, two, [1, 0, 3, 2]);
        let one = pick(self, two, swapped);
        self.b.ins().extractlane(one, 0)
    }

    /// Moves one lane's (an i64) dwords between memory and its registers; `addrs_at`: the
    /// lanes' addresses, to which `bias` adds to make host addresses.
    fn move_lane(&mut self, p: &MemoryPlan, lane: Value, addrs_at: Value, bias: Value) {
        let memory = MemFlags::new().with_notrap();
        let slot = self.b.ins().ishl_imm(lane, 3);
        let slot = self.b.ins().iadd(addrs_at, slot);
        let address = self.b.ins().load(types::I64, flags(), slot, 0);
        let at = self.b.ins().iadd(address, bias);
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
    }

    /// Stores a group of four lanes whose accesses follow one another at `at` (one, two or
    /// four dwords a lane) as 16-byte vectors, transposed from the registers' rows to lane
    /// order. x86 moves each aligned 8-byte piece of a vector access at once, so a 64-bit
    /// value is not seen half written here either.
    fn store_group_following(&mut self, p: &MemoryPlan, at: Value, g: GroupAt) {
        let memory = MemFlags::new().with_notrap();
        let rows: Vec<Value> = (0..p.dwords)
            .map(|k| self.load_group(p.data + k, g))
            .collect();
        let memory_order = self.transpose(&rows, true);
        for (k, v) in memory_order.into_iter().enumerate() {
            self.b.ins().store(memory, v, at, (k * 16) as i32);
        }
    }

    /// Between four lanes of `n` dwords each, in lane order (`n` vectors), and `n` rows of four
    /// lanes, to lane order if `to_lanes`: for one dword, nothing; for four, the transposition
    /// (its own inverse).
    fn transpose(&mut self, v: &[Value], to_lanes: bool) -> Vec<Value> {
        match *v {
            [a, b] if to_lanes => vec![
                self.dword_shuffle(a, b, [0, 4, 1, 5]),
                self.dword_shuffle(a, b, [2, 6, 3, 7]),
            ],
            [a, b] => vec![
                self.dword_shuffle(a, b, [0, 2, 4, 6]),
                self.dword_shuffle(a, b, [1, 3, 5, 7]),
            ],
            [a, b, c, d] => {
                let ab_low = self.dword_shuffle(a, b, [0, 4, 1, 5]);
                let cd_low = self.dword_shuffle(c, d, [0, 4, 1, 5]);
                let ab_high = self.dword_shuffle(a, b, [2, 6, 3, 7]);
                let cd_high = self.dword_shuffle(c, d, [2, 6, 3, 7]);
                vec![
                    self.dword_shuffle(ab_low, cd_low, [0, 1, 4, 5]),
                    self.dword_shuffle(ab_low, cd_low, [2, 3, 6, 7]),
                    self.dword_shuffle(ab_high, cd_high, [0, 1, 4, 5]),
                    self.dword_shuffle(ab_high, cd_high, [2, 3, 6, 7]),
                ]
            }
            _ => v.to_vec(),
        }
    }

    /// The dwords `pick` (0-3 from `a`, 4-7 from `b`) of two four-dword vectors.
    fn dword_shuffle(&mut self, a: Value, b: Value, pick: [u8; 4]) -> Value {
        let bytes: Vec<u8> = pick
            .iter()
            .flat_map(|&d| (0..4).map(move |byte| d * 4 + byte))
            .collect();
        let mask = self
            .b
            .func
            .dfg
            .immediates
            .push(ConstantData::from(bytes.as_slice()));
        let wide = MemFlags::new().with_endianness(Endianness::Little);
        let a = self.b.ins().bitcast(types::I8X16, wide, a);
        let b = self.b.ins().bitcast(types::I8X16, wide, b);
        let picked = self.b.ins().shuffle(a, b, mask);
        self.b.ins().bitcast(types::I32X4, wide, picked)
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
    pub(super) fn pair(&mut self, low: Value, high: Value) -> Value {
        let low = self.b.ins().uextend(types::I64, low);
        let high = self.b.ins().uextend(types::I64, high);
        let high = self.b.ins().ishl_imm(high, 32);
        self.b.ins().bor(low, high)
    }
}
