//! The command processor of a compute queue: a thread that waits for doorbells and executes
//! the PM4 packets between its read pointer and the written doorbell value.
//!
//! `crates/hcq-emu/PACKETS.md` lists every packet and field value and what is done with it. A
//! packet or field value that is not modelled is reported (a hardware exception naming it)
//! and the packet is skipped whole; the queue goes on with the next one.

use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use hcq_amd_sys::pm4::{
    copy_dst_sel, copy_src_sel, data_sel, dma_dst_sel, dma_src_sel, event_name, gcr, int_sel,
    mem_space, opcode_name, release_dst_sel, wait_operation, write_dst_sel, CompareFunction,
    CopyData, DispatchDirect, DmaData, EventWrite, Header, IndirectBuffer, Packet, ReleaseMem,
    SetUconfigReg, WaitRegMem, WriteData, EVENT_CS_PARTIAL_FLUSH, OP_DMA_DATA, OP_INDIRECT_BUFFER,
    OP_WAIT_REG_MEM, PACKET_TYPE3, REGISTER_ADDRESS_MASK, UCONFIG_REG_START,
};
use hcq_amd_sys::regs;

use crate::clock::gpu_ticks;
use crate::dispatch;
use crate::gpu::{FaultClass, Gpu};
use crate::memory::Snapshot;
use crate::queue::QueueShared;
use crate::registers::RegisterError;
use crate::ring::{PointerUnit, Ring, RingDesc};

/// Number of SH registers `SET_SH_REG` can reach.
const SH_REGS: usize = (regs::SH_REG_END - regs::SH_REG_START) as usize;
/// Chained indirect buffers one call may pass through before the CP calls it a runaway loop.
const MAX_CHAIN: u64 = 1 << 20;

/// Where packets are read from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The queue's ring: positions are dword counts taken modulo the ring size.
    Ring,
    /// An indirect buffer at `base`: positions are dword indices.
    Ib { base: u64 },
}

/// Where a packet was read from, for fault messages. Kept as numbers and formatted only when
/// a fault is reported: every packet carries one.
#[derive(Debug, Clone, Copy)]
struct Location {
    src: Source,
    pos: u64,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pos = self.pos;
        match self.src {
            Source::Ring => write!(f, "ring dword {pos}"),
            Source::Ib { base } => write!(f, "indirect buffer {base:#x} dword {pos}"),
        }
    }
}

/// Where execution goes after a packet.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// The next packet.
    Continue,
    /// A chained indirect buffer, instead of the rest of this one.
    Chain(IndirectBuffer),
    /// Past this many dwords after the packet (a `PRED_EXEC` whose dies are not selected).
    Skip(u64),
}

fn copy_source_name(sel: u8) -> &'static str {
    match sel {
        copy_src_sel::GDS => "GDS",
        copy_src_sel::PERFCOUNTERS => "performance counters",
        copy_src_sel::ATOMIC_RETURN_DATA => "atomic return data",
        copy_src_sel::GDS_ATOMIC_RETURN_DATA0 | copy_src_sel::GDS_ATOMIC_RETURN_DATA1 => {
            "GDS atomic return data"
        }
        copy_src_sel::SYSTEM_CLOCK_COUNT => "system clock counter",
        copy_src_sel::EXEC_IND_ARG_BUF => "indirect argument buffer",
        _ => "reserved",
    }
}

fn copy_destination_name(sel: u8) -> &'static str {
    match sel {
        copy_dst_sel::GDS => "GDS",
        copy_dst_sel::PERFCOUNTERS => "performance counters",
        copy_dst_sel::REGISTER_DC => "register (DC)",
        _ => "reserved",
    }
}

fn write_destination_name(sel: u8) -> &'static str {
    match sel {
        write_dst_sel::GDS => "GDS",
        write_dst_sel::ADC_PERSISTENT_STATE => "ADC persistent state",
        _ => "reserved",
    }
}

/// A compute queue's command processor.
pub(crate) struct Cp {
    ring: Ring,
    gpu: Arc<Gpu>,
    sh: Vec<u32>,
    /// CP DMAs (`DMA_DATA` without `CP_SYNC`) still in flight, with where each was queued.
    /// The CP goes on without them: they land, in order, after the next packet that is not
    /// itself a DMA, an indirect buffer or a wait, the latest a legal schedule allows
    /// without stalling the queue, so a client that signals before its copies landed
    /// reads stale data here as it could on hardware.
    dma_in_flight: Vec<(DmaData, Location)>,
}

impl Cp {
    pub fn new(gpu: Arc<Gpu>, queue: Arc<QueueShared>, desc: RingDesc) -> Self {
        Cp {
            ring: Ring::new(gpu.clone(), queue, desc, PointerUnit::Dwords, "queue"),
            gpu,
            sh: vec![0; SH_REGS],
            dma_in_flight: Vec::new(),
        }
    }

    /// The thread body: runs until the queue is destroyed.
    pub fn run(mut self) {
        self.ring.publish_rptr();
        while let Some((rptr, wptr)) = self.ring.next_work() {
            self.consume(rptr, wptr);
        }
    }

    /// Executes the ring's packets from dword position `rptr` up to `wptr`.
    pub(crate) fn consume(&mut self, rptr: u64, wptr: u64) {
        self.process(Source::Ring, rptr, wptr, 0);
        // Nothing more to do: the DMA engine catches up.
        self.land_dma();
    }

    /// Completes the CP DMAs in flight, in order (unless the queue was stopped: then they
    /// never land).
    fn land_dma(&mut self) {
        for (d, at) in std::mem::take(&mut self.dma_in_flight) {
            if self.ring.halted() {
                return;
            }
            self.dma(&d, at);
        }
    }

    fn fault(&self, class: FaultClass, what: String) {
        self.ring.fault(class, what);
    }

    fn location(src: Source, pos: u64) -> Location {
        Location { src, pos }
    }

    fn read_dword(&self, snap: &Snapshot, src: Source, pos: u64) -> Result<u32, u64> {
        match src {
            Source::Ring => self.ring.load_u32(snap, pos),
            Source::Ib { base } => {
                let addr = base.wrapping_add(4 * pos);
                snap.load_u32(addr).ok_or(addr)
            }
        }
    }

    /// Executes the packets in `[start, end)` of `src`. A chained `INDIRECT_BUFFER` inside an
    /// indirect buffer replaces the rest of it: execution continues in the chained buffer, at
    /// the same level.
    fn process(&mut self, mut src: Source, start: u64, mut end: u64, depth: u32) {
        let mut pos = start;
        let mut chains = 0u64;
        while pos < end {
            if self.ring.halted() {
                return;
            }
            // One view of memory for fetching the packet; dropped before it executes.
            let snap = self.gpu.page_table.snapshot();
            let header_word = match self.read_dword(&snap, src, pos) {
                Ok(w) => w,
                Err(va) => {
                    self.fault(
                        FaultClass::Vm { va },
                        format!(
                            "VM fault: packet fetch from unmapped address {va:#x} at {}",
                            Self::location(src, pos)
                        ),
                    );
                    pos = end;
                    break;
                }
            };
            let header = Header::parse(header_word);
            let len = match header.packet_type {
                PACKET_TYPE3 | 0 => header.len() as u64,
                _ => 1,
            };
            if len > end - pos {
                self.fault(
                    FaultClass::BadPacket,
                    format!(
                        "truncated PM4 packet (header {header_word:#010x}, opcode {:#04x}) at {}: needs {len} dwords, \
                         only {} written",
                        header.opcode,
                        Self::location(src, pos),
                        end - pos
                    ),
                );
                pos = end;
                break;
            }
            let mut payload = Vec::with_capacity(len as usize - 1);
            for i in 1..len {
                match self.read_dword(&snap, src, pos + i) {
                    Ok(w) => payload.push(w),
                    Err(va) => {
                        self.fault(
                            FaultClass::Vm { va },
                            format!(
                                "VM fault: packet fetch from unmapped address {va:#x} at {}",
                                Self::location(src, pos + i)
                            ),
                        );
                        break;
                    }
                }
            }
            drop(snap);
            if payload.len() as u64 == len - 1 {
                match header.packet_type {
                    PACKET_TYPE3 => match self.execute(header, &payload, src, pos, depth) {
                        Next::Continue => {}
                        Next::Skip(dwords) => {
                            let left = end - (pos + len);
                            if dwords > left {
                                self.fault(
                                    FaultClass::BadPacket,
                                    format!(
                                        "PRED_EXEC covers {dwords} dwords, only {left} follow it at {}",
                                        Self::location(src, pos)
                                    ),
                                );
                            }
                            pos += dwords.min(left);
                        }
                        Next::Chain(next) => {
                            chains += 1;
                            if chains > MAX_CHAIN {
                                self.fault(
                                    FaultClass::BadPacket,
                                    format!(
                                        "more than {MAX_CHAIN} chained indirect buffers at {}",
                                        Self::location(src, pos)
                                    ),
                                );
                                break;
                            }
                            src = Source::Ib { base: next.address };
                            pos = 0;
                            end = u64::from(next.size_dwords);
                            continue;
                        }
                    },
                    2 => {} // a one-dword filler
                    t => self.fault(
                        FaultClass::BadPacket,
                        format!(
                            "unsupported PM4 packet type {t} (header {header_word:#010x}) at {}",
                            Self::location(src, pos)
                        ),
                    ),
                }
            }
            pos += len;
            if let Source::Ring = src {
                self.ring.set_rptr(pos);
            }
        }
        if let Source::Ring = src {
            if self.ring.rptr() != pos {
                self.ring.set_rptr(pos);
            }
        }
    }

    /// Executes one packet; says where execution goes on. CP DMAs in flight land after it,
    /// unless it is a DMA itself (which waits for them, DMAs being in order), an indirect
    /// buffer (whose packets go first) or a wait (while the CP waits, the DMA engine works).
    fn execute(
        &mut self,
        header: Header,
        payload: &[u32],
        src: Source,
        pos: u64,
        depth: u32,
    ) -> Next {
        match header.opcode {
            OP_DMA_DATA | OP_INDIRECT_BUFFER => {
                self.execute_packet(header, payload, src, pos, depth)
            }
            OP_WAIT_REG_MEM => {
                self.land_dma();
                self.execute_packet(header, payload, src, pos, depth)
            }
            _ => {
                let next = self.execute_packet(header, payload, src, pos, depth);
                self.land_dma();
                next
            }
        }
    }

    fn execute_packet(
        &mut self,
        header: Header,
        payload: &[u32],
        src: Source,
        pos: u64,
        depth: u32,
    ) -> Next {
        let at = || Self::location(src, pos);
        let packet = match Packet::decode(header, payload) {
            Ok(p) => p,
            Err(e) => {
                self.fault(FaultClass::BadPacket, format!("{e} at {}", at()));
                return Next::Continue;
            }
        };
        match packet {
            Packet::Nop => fence(Ordering::SeqCst),
            Packet::EventWrite(e) => self.event_write(&e, at()),
            Packet::SetShReg(s) => {
                let first = usize::from(s.reg);
                if first
                    .checked_add(s.values.len())
                    .is_none_or(|e| e > SH_REGS)
                {
                    self.fault(
                        FaultClass::BadPacket,
                        format!(
                            "SET_SH_REG of {} registers at offset {:#x} leaves the SH register space at {}",
                            s.values.len(),
                            s.reg,
                            at()
                        ),
                    );
                    return Next::Continue;
                }
                self.sh[first..first + s.values.len()].copy_from_slice(s.values);
            }
            Packet::SetUconfigReg(u) => self.set_uconfig_reg(&u, at()),
            Packet::AcquireMem(a) => {
                // Only the instruction cache exists here (decoded kernels); every other cache
                // action is already true of coherent host memory. A range invalidation drops
                // the whole cache: a superset.
                if gcr::invalidates_instructions(a.gcr_cntl) {
                    self.gpu.code_cache.invalidate();
                }
                fence(Ordering::SeqCst);
            }
            Packet::ReleaseMem(r) => self.release_mem(&r, at()),
            Packet::WaitRegMem(w) => self.wait_reg_mem(&w, at()),
            Packet::CopyData(c) => self.copy_data(&c, at()),
            Packet::DmaData(d) => {
                self.land_dma();
                if d.cp_sync {
                    self.dma(&d, at());
                } else {
                    self.dma_in_flight.push((d, at()));
                }
            }
            Packet::WriteData(w) => self.write_data(&w, at()),
            Packet::DispatchDirect(d) => self.dispatch(&d, at()),
            Packet::IndirectBuffer(ib) => return self.indirect_buffer(ib, src, depth, at()),
            Packet::PredExec(p) => {
                // The emulated GPU has one compute die, XCC 0: the predicated dwords run when
                // its bit is selected and are skipped otherwise.
                if p.device_select & 1 == 0 {
                    return Next::Skip(u64::from(p.exec_count));
                }
            }
            Packet::Unknown { opcode } => {
                let name = opcode_name(opcode).map_or_else(
                    || "unknown PM4 opcode".to_string(),
                    |n| format!("PM4 packet {n} is not modelled: opcode"),
                );
                self.fault(
                    FaultClass::BadPacket,
                    format!("{name} {opcode:#04x} at {}", at()),
                );
            }
        }
        Next::Continue
    }

    fn event_write(&mut self, e: &EventWrite, at: Location) {
        match e.event_type {
            // Waits for the dispatches before it to finish: each one has, as dispatches run to
            // completion inside `DISPATCH_DIRECT`.
            EVENT_CS_PARTIAL_FLUSH => fence(Ordering::SeqCst),
            other => self.fault(
                FaultClass::BadPacket,
                format!(
                    "EVENT_WRITE of event type {other:#x} ({}) is not modelled at {at}",
                    event_name(other)
                ),
            ),
        }
    }

    fn set_uconfig_reg(&mut self, u: &SetUconfigReg, at: Location) {
        for (i, &value) in u.values.iter().enumerate() {
            let address = UCONFIG_REG_START + u32::from(u.reg) + i as u32;
            if let Err(e) = self.gpu.registers.write(address, value) {
                self.fault(
                    FaultClass::BadPacket,
                    format!("SET_UCONFIG_REG: {e}; the packet's later values are dropped at {at}"),
                );
                return;
            }
        }
    }

    fn release_mem(&mut self, r: &ReleaseMem, at: Location) {
        // Check every selection before acting on any, so that a packet is done whole or not.
        let unsupported = match (r.data_sel, r.dst_sel, r.int_sel) {
            (data_sel::PERFCOUNTER_OR_SYSTEM_CLOCK | data_sel::GDS | 6.., _, _) => {
                Some(format!("DATA_SEL {}", r.data_sel))
            }
            (_, release_dst_sel::QUEUE_WRITE_POINTER_REGISTER.., _) => Some(format!(
                "DST_SEL {} (a queue write pointer register)",
                r.dst_sel
            )),
            (_, _, int_sel::CONDITIONAL_32..) => {
                Some(format!("INT_SEL {} (interrupt on a compare)", r.int_sel))
            }
            _ => None,
        };
        if let Some(what) = unsupported {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "RELEASE_MEM with unsupported {what} is not modelled; packet skipped at {at}"
                ),
            );
            return;
        }
        fence(Ordering::SeqCst);
        // 64-bit data goes to a qword: the packet's address has no bits 0..2 for it.
        let addr = match r.data_sel {
            data_sel::DATA_32 => r.address & !3,
            _ => r.address & !7,
        };
        let snap = self.gpu.page_table.snapshot();
        let written = match r.data_sel {
            data_sel::DATA_32 => snap.store_u32(addr, r.data as u32).map(|_| true),
            data_sel::DATA_64 => snap.store_u64(addr, r.data).map(|_| true),
            data_sel::GPU_CLOCK_64 => snap.store_u64(addr, gpu_ticks()).map(|_| true),
            _ => Some(false),
        };
        drop(snap);
        match written {
            None => {
                self.fault(
                    FaultClass::Vm { va: addr },
                    format!("VM fault: RELEASE_MEM write to unmapped address {addr:#x} at {at}"),
                );
                return;
            }
            Some(true) => self.gpu.watch.notify(),
            Some(false) => {}
        }
        // INT_SEL 1..=4 all raise the interrupt carrying the context id, after the write (the
        // write is done by now, confirmed or not).
        if r.int_sel != int_sel::NONE {
            self.gpu.events.interrupt(r.int_ctx);
        }
    }

    fn wait_reg_mem(&mut self, w: &WaitRegMem, at: Location) {
        let Some(func) = CompareFunction::from_bits(u32::from(w.function)) else {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "WAIT_REG_MEM with invalid compare function {} at {at}",
                    w.function
                ),
            );
            return;
        };
        let register = |address: u32| address & REGISTER_ADDRESS_MASK;
        let result = match (w.mem_space, w.operation) {
            (mem_space::MEMORY, wait_operation::WAIT | wait_operation::WAIT_PREEMPTABLE) => {
                let addr = w.address();
                self.ring
                    .poll(func, w.mask, w.reference, |gpu| {
                        gpu.page_table.snapshot().load_u32(addr).ok_or(addr)
                    })
                    .map_err(|va| {
                        (
                            FaultClass::Vm { va },
                            format!("VM fault: WAIT_REG_MEM read of unmapped address {va:#x}"),
                        )
                    })
            }
            (mem_space::REGISTER, wait_operation::WAIT | wait_operation::WRITE_THEN_WAIT) => {
                let poll_at = if w.operation == wait_operation::WRITE_THEN_WAIT {
                    // The HDP flush idiom: request on the first register, poll the second.
                    let request = register(w.addr_lo);
                    if let Err(e) = self.gpu.registers.write(request, w.reference) {
                        self.fault(
                            FaultClass::BadPacket,
                            format!("WAIT_REG_MEM write: {e} at {at}"),
                        );
                        return;
                    }
                    self.gpu.watch.notify();
                    register(w.addr_hi)
                } else {
                    register(w.addr_lo)
                };
                if func == CompareFunction::Always {
                    return;
                }
                self.ring
                    .poll(func, w.mask, w.reference, |gpu| gpu.registers.read(poll_at))
                    .map_err(|e| (FaultClass::BadPacket, format!("WAIT_REG_MEM poll: {e}")))
            }
            (space, op) => Err((
                FaultClass::BadPacket,
                format!("WAIT_REG_MEM with MEM_SPACE {space} and OPERATION {op} is not modelled"),
            )),
        };
        if let Err((class, what)) = result {
            self.fault(class, format!("{what} at {at}"));
        }
    }

    /// `COPY_DATA`: one value (32 or 64 bits) from a register, memory, the packet or the GPU
    /// clock to a register or memory.
    /// Runs one CP DMA: a copy or fill between memory ranges (through L2 or not: the same
    /// memory here), `SAIC`/`DAIC` transfers dword by dword on a fixed address. GDS, register
    /// spaces and the PFP engine are reported as not modelled; the DMA is then skipped whole,
    /// as is one touching an unmapped address (a VM fault).
    fn dma(&mut self, d: &DmaData, at: Location) {
        let unmodelled = if d.engine_pfp {
            Some("ENGINE_SEL 1 (the prefetch parser, which a compute queue does not have)".into())
        } else if d.src_sel == dma_src_sel::GDS || d.dst_sel == dma_dst_sel::GDS {
            Some("GDS as source or destination".into())
        } else if d.dst_sel == 2 {
            Some("DST_SEL 2 (reserved)".into())
        } else if d.src_is_register || d.dst_is_register {
            Some("register space (SAS or DAS)".into())
        } else if (d.src_no_increment || d.dst_no_increment) && !d.byte_count.is_multiple_of(4) {
            Some(format!(
                "a fixed address (SAIC or DAIC) with a byte count of {} (not whole dwords)",
                d.byte_count
            ))
        } else {
            None
        };
        if let Some(what) = unmodelled {
            self.fault(
                FaultClass::BadPacket,
                format!("DMA_DATA with {what} is not modelled; packet skipped at {at}"),
            );
            return;
        }
        let n = u64::from(d.byte_count);
        fence(Ordering::SeqCst);
        let snap = self.gpu.page_table.snapshot();
        let result = match (d.src_sel, d.src_no_increment, d.dst_no_increment) {
            (dma_src_sel::DATA, _, false) => snap
                .fill(d.dst, n, &(d.src as u32).to_le_bytes())
                .map_err(|va| (false, va)),
            (dma_src_sel::DATA, _, true) => fixed_dword(&snap, d.dst, n)
                .and_then(|_| snap.fill(d.dst, 4.min(n), &(d.src as u32).to_le_bytes()))
                .map_err(|va| (false, va)),
            (_, false, false) => snap.copy(d.src, d.dst, n),
            (_, saic, daic) => dword_transfer(&snap, d.src, saic, d.dst, daic, n),
        };
        drop(snap);
        if let Err((read, va)) = result {
            self.fault(
                FaultClass::Vm { va },
                format!(
                    "VM fault: DMA_DATA of {n} bytes from {:#x} to {:#x}: {} of unmapped address {va:#x} at {at}",
                    d.src,
                    d.dst,
                    if read { "read" } else { "write" }
                ),
            );
            return;
        }
        fence(Ordering::SeqCst);
        self.gpu.watch.notify();
    }

    fn copy_data(&mut self, c: &CopyData, at: Location) {
        // Memory operands drop the address bits below their size, as the packet encodes them.
        let align = |addr: u64| if c.count_64 { addr & !7 } else { addr & !3 };
        let register = |value: u64| value as u32 & REGISTER_ADDRESS_MASK;
        let words = if c.count_64 { 2 } else { 1 };
        fence(Ordering::SeqCst);
        let value: Result<u64, (FaultClass, String)> = match c.src_sel {
            copy_src_sel::REGISTER => (0..words)
                .try_fold(0u64, |acc, i| {
                    let v = self.gpu.registers.read(register(c.src) + i)?;
                    Ok(acc | (u64::from(v) << (32 * i)))
                })
                .map_err(|e: RegisterError| {
                    (FaultClass::BadPacket, format!("COPY_DATA source: {e}"))
                }),
            copy_src_sel::MEMORY | copy_src_sel::MEMORY_OBSOLETE => {
                let addr = align(c.src);
                let snap = self.gpu.page_table.snapshot();
                let lo = snap.load_u32(addr);
                let hi = if c.count_64 {
                    snap.load_u32(addr + 4)
                } else {
                    Some(0)
                };
                match (lo, hi) {
                    (Some(lo), Some(hi)) => Ok(u64::from(lo) | (u64::from(hi) << 32)),
                    _ => {
                        let va = snap.fault_address(addr);
                        Err((
                            FaultClass::Vm { va },
                            format!("VM fault: COPY_DATA read of unmapped address {va:#x}"),
                        ))
                    }
                }
            }
            copy_src_sel::IMMEDIATE => Ok(c.src),
            copy_src_sel::GPU_CLOCK_COUNT => Ok(gpu_ticks()),
            other => Err((
                FaultClass::BadPacket,
                format!(
                    "COPY_DATA with SRC_SEL {other} ({}) is not modelled",
                    copy_source_name(other)
                ),
            )),
        };
        let value = match value {
            Ok(v) if c.count_64 => v,
            Ok(v) => v & 0xffff_ffff,
            Err((class, what)) => {
                self.fault(class, format!("{what} at {at}"));
                return;
            }
        };
        let result = match c.dst_sel {
            copy_dst_sel::REGISTER => (0..words)
                .try_for_each(|i| {
                    self.gpu
                        .registers
                        .write(register(c.dst) + i, (value >> (32 * i)) as u32)
                })
                .map_err(|e| (FaultClass::BadPacket, format!("COPY_DATA destination: {e}"))),
            copy_dst_sel::MEMORY | copy_dst_sel::MEMORY_OBSOLETE => {
                let addr = align(c.dst);
                let snap = self.gpu.page_table.snapshot();
                let stored = if c.count_64 {
                    snap.store_u64(addr, value)
                } else {
                    snap.store_u32(addr, value as u32)
                };
                stored.ok_or_else(|| {
                    let va = snap.fault_address(addr);
                    (
                        FaultClass::Vm { va },
                        format!("VM fault: COPY_DATA write to unmapped address {va:#x}"),
                    )
                })
            }
            other => Err((
                FaultClass::BadPacket,
                format!(
                    "COPY_DATA with DST_SEL {other} ({}) is not modelled",
                    copy_destination_name(other)
                ),
            )),
        };
        match result {
            Ok(()) => self.gpu.watch.notify(),
            Err((class, what)) => self.fault(class, format!("{what} at {at}")),
        }
    }

    /// `WRITE_DATA`: the packet's dwords to consecutive registers or memory dwords (or all to
    /// the first, with `no_increment`).
    fn write_data(&mut self, w: &WriteData, at: Location) {
        let step = u32::from(!w.no_increment);
        fence(Ordering::SeqCst);
        let result = match w.dst_sel {
            write_dst_sel::REGISTER => {
                let first = w.dst as u32 & REGISTER_ADDRESS_MASK;
                w.data
                    .iter()
                    .zip(0u32..)
                    .try_for_each(|(&v, i)| self.gpu.registers.write(first + i * step, v))
                    .map_err(|e| (FaultClass::BadPacket, format!("WRITE_DATA: {e}")))
            }
            write_dst_sel::MEMORY | write_dst_sel::MEMORY_TC_L2 => {
                let first = w.dst & !3;
                let snap = self.gpu.page_table.snapshot();
                w.data.iter().zip(0u64..).try_for_each(|(&v, i)| {
                    let addr = first.wrapping_add(4 * i * u64::from(step));
                    snap.store_u32(addr, v).ok_or_else(|| {
                        let va = snap.fault_address(addr);
                        (
                            FaultClass::Vm { va },
                            format!("VM fault: WRITE_DATA write to unmapped address {va:#x}"),
                        )
                    })
                })
            }
            other => Err((
                FaultClass::BadPacket,
                format!(
                    "WRITE_DATA with DST_SEL {other} ({}) is not modelled",
                    write_destination_name(other)
                ),
            )),
        };
        // Whatever was written before a failure stays written, as on hardware.
        self.gpu.watch.notify();
        if let Err((class, what)) = result {
            self.fault(class, format!("{what} at {at}"));
        }
    }

    fn dispatch(&mut self, d: &DispatchDirect, at: Location) {
        if !self.gpu.arch.runs() {
            // Its machine code is not RDNA3's: run by the interpreter, it would compute
            // something, silently wrong.
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "DISPATCH_DIRECT on a {}, whose machine code the emulator does not run (it \
                     runs gfx1100's) at {at}",
                    self.gpu.arch.name()
                ),
            );
            return;
        }
        let params = match dispatch::params(&self.sh, d) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                self.fault(FaultClass::BadPacket, format!("{e} at {at}"));
                return;
            }
        };
        if params.rsrc1 & regs::RSRC1_PRIV == 0 {
            self.gpu.stats.unprivileged.fetch_add(1, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        let snap = self.gpu.page_table.snapshot();
        let result = dispatch::run(
            &snap,
            &self.gpu.code_cache,
            params,
            self.gpu.max_steps,
            crate::topology::shader_engines(&self.gpu.shape),
            self.ring.queue.stop_flag(),
        );
        drop(snap);
        fence(Ordering::SeqCst);
        match result {
            Ok(done) => {
                let st = &self.gpu.stats;
                st.dispatches.fetch_add(1, Ordering::Relaxed);
                st.waves.fetch_add(done.waves, Ordering::Relaxed);
                st.instructions
                    .fetch_add(done.instructions, Ordering::Relaxed);
            }
            Err((class, what)) => self.fault(class, format!("{what} (DISPATCH_DIRECT at {at})")),
        }
    }

    /// `INDIRECT_BUFFER`: from the ring, executes the packets of a buffer in GPU memory and
    /// comes back; from an indirect buffer, a chained one continues there (returned to the
    /// caller). One level of calls, as the hardware's compute queues.
    fn indirect_buffer(
        &mut self,
        ib: IndirectBuffer,
        src: Source,
        depth: u32,
        at: Location,
    ) -> Next {
        if !ib.valid {
            self.fault(
                FaultClass::BadPacket,
                format!("INDIRECT_BUFFER without its VALID bit is not run at {at}"),
            );
            return Next::Continue;
        }
        match (src, ib.chain) {
            (Source::Ring, false) if depth == 0 => {
                self.process(
                    Source::Ib { base: ib.address },
                    0,
                    u64::from(ib.size_dwords),
                    1,
                );
                Next::Continue
            }
            (Source::Ib { .. }, true) => Next::Chain(ib),
            (Source::Ring, true) => {
                self.fault(
                    FaultClass::BadPacket,
                    format!("chained INDIRECT_BUFFER in the ring at {at}"),
                );
                Next::Continue
            }
            _ => {
                self.fault(
                    FaultClass::BadPacket,
                    format!("nested INDIRECT_BUFFER (only one level of calls) at {at}"),
                );
                Next::Continue
            }
        }
    }
}

/// Checks that the dword at `addr` is mapped when `n` bytes go to it on a fixed address.
fn fixed_dword(snap: &Snapshot, addr: u64, n: u64) -> Result<(), u64> {
    if n == 0 {
        return Ok(());
    }
    snap.spans(addr, 4).map(|_| ())
}

/// A CP DMA in dwords where the source (`saic`) or the destination (`daic`) stays on one
/// dword: every address is checked before anything is written.
fn dword_transfer(
    snap: &Snapshot,
    src: u64,
    saic: bool,
    dst: u64,
    daic: bool,
    n: u64,
) -> Result<(), (bool, u64)> {
    if n == 0 {
        return Ok(());
    }
    let span = |fixed: bool| if fixed { 4 } else { n };
    snap.spans(src, span(saic)).map_err(|va| (true, va))?;
    snap.spans(dst, span(daic)).map_err(|va| (false, va))?;
    for k in 0..n / 4 {
        let from = if saic { src } else { src + 4 * k };
        let to = if daic { dst } else { dst + 4 * k };
        snap.copy(from, to, 4)?;
    }
    Ok(())
}
