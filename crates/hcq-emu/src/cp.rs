//! The command processor of a compute queue: a thread that waits for doorbells and executes
//! the PM4 packets between its read pointer and the written doorbell value.

use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hcq_amd_sys::pm4::{
    data_sel, gcr, CompareFunction, DispatchDirect, Header, IndirectBuffer, Packet, ReleaseMem,
    WaitRegMem, PACKET_TYPE3,
};
use hcq_amd_sys::regs;

use crate::clock::gpu_ticks;
use crate::dispatch;
use crate::gpu::{FaultClass, Gpu};
use crate::memory::Snapshot;
use crate::queue::QueueShared;
use crate::ring::{PointerUnit, Ring, RingDesc};

/// Number of SH registers `SET_SH_REG` can reach.
const SH_REGS: usize = (regs::SH_REG_END - regs::SH_REG_START) as usize;
/// Chained indirect buffers one call may pass through before the CP calls it a runaway loop.
const MAX_CHAIN: u64 = 1 << 20;
/// First and longest sleep between polls of `WAIT_REG_MEM`.
const POLL_MIN: Duration = Duration::from_micros(20);
const POLL_MAX: Duration = Duration::from_millis(1);

/// Where packets are read from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The queue's ring: positions are dword counts taken modulo the ring size.
    Ring,
    /// An indirect buffer at `base`: positions are dword indices.
    Ib { base: u64 },
}

/// A compute queue's command processor.
pub(crate) struct Cp {
    ring: Ring,
    gpu: Arc<Gpu>,
    sh: Vec<u32>,
}

impl Cp {
    pub fn new(gpu: Arc<Gpu>, queue: Arc<QueueShared>, desc: RingDesc) -> Self {
        Cp {
            ring: Ring::new(gpu.clone(), queue, desc, PointerUnit::Dwords, "queue"),
            gpu,
            sh: vec![0; SH_REGS],
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
    }

    fn fault(&self, class: FaultClass, what: String) {
        self.ring.fault(class, what);
    }

    fn location(src: Source, pos: u64) -> String {
        match src {
            Source::Ring => format!("ring dword {pos}"),
            Source::Ib { base } => format!("indirect buffer {base:#x} dword {pos}"),
        }
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
            if self.ring.queue.stopped() {
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
                    FaultClass::Hw,
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
                    PACKET_TYPE3 => {
                        if let Some(next) = self.execute(header, &payload, src, pos, depth) {
                            chains += 1;
                            if chains > MAX_CHAIN {
                                self.fault(
                                    FaultClass::Hw,
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
                    }
                    2 => {} // a one-dword filler
                    t => self.fault(
                        FaultClass::Hw,
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

    /// Executes one packet; returns the indirect buffer to continue in when the packet is a
    /// chained `INDIRECT_BUFFER` inside an indirect buffer.
    fn execute(
        &mut self,
        header: Header,
        payload: &[u32],
        src: Source,
        pos: u64,
        depth: u32,
    ) -> Option<IndirectBuffer> {
        let at = || Self::location(src, pos);
        let packet = match Packet::decode(header, payload) {
            Ok(p) => p,
            Err(e) => {
                self.fault(FaultClass::Hw, format!("{e} at {}", at()));
                return None;
            }
        };
        match packet {
            Packet::Nop | Packet::EventWrite(_) => fence(Ordering::SeqCst),
            Packet::SetShReg(s) => {
                let first = usize::from(s.reg);
                if first
                    .checked_add(s.values.len())
                    .map_or(true, |e| e > SH_REGS)
                {
                    self.fault(
                        FaultClass::Hw,
                        format!(
                            "SET_SH_REG of {} registers at offset {:#x} leaves the SH register space at {}",
                            s.values.len(),
                            s.reg,
                            at()
                        ),
                    );
                    return None;
                }
                self.sh[first..first + s.values.len()].copy_from_slice(s.values);
            }
            Packet::AcquireMem(a) => {
                if a.gcr_cntl & gcr::GLI_INV != 0 {
                    self.gpu.code_cache.invalidate();
                }
                fence(Ordering::SeqCst);
            }
            Packet::ReleaseMem(r) => self.release_mem(&r, &at()),
            Packet::WaitRegMem(w) => self.wait_reg_mem(&w, &at()),
            Packet::DispatchDirect(d) => self.dispatch(&d, &at()),
            Packet::IndirectBuffer(ib) => return self.indirect_buffer(ib, src, depth, &at()),
            Packet::Unknown { opcode } => {
                self.fault(
                    FaultClass::Hw,
                    format!("unknown PM4 opcode {opcode:#04x} at {}", at()),
                );
            }
        }
        None
    }

    fn release_mem(&mut self, r: &ReleaseMem, at: &str) {
        fence(Ordering::SeqCst);
        let snap = self.gpu.page_table.snapshot();
        let addr = r.address & !3;
        let written = match r.data_sel {
            data_sel::NONE => Some(false),
            data_sel::DATA_32 => snap.store_u32(addr, r.data as u32).map(|_| true),
            data_sel::DATA_64 => snap.store_u64(addr, r.data).map(|_| true),
            data_sel::GPU_CLOCK_64 | data_sel::SYSTEM_CLOCK_64 => {
                snap.store_u64(addr, gpu_ticks()).map(|_| true)
            }
            other => {
                self.fault(
                    FaultClass::Hw,
                    format!("RELEASE_MEM with unsupported DATA_SEL {other} at {at}"),
                );
                Some(false)
            }
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
        if r.int_sel != 0 {
            self.gpu.events.interrupt(r.int_ctx);
        }
    }

    fn wait_reg_mem(&mut self, w: &WaitRegMem, at: &str) {
        let Some(func) = CompareFunction::from_bits(u32::from(w.function)) else {
            self.fault(
                FaultClass::Hw,
                format!(
                    "WAIT_REG_MEM with invalid compare function {} at {at}",
                    w.function
                ),
            );
            return;
        };
        match (w.mem_space, w.operation) {
            // Register space, write-then-wait: the HDP flush request/acknowledge pair.
            // Host memory is coherent here, so the flush is done at once.
            (0, 1) => return,
            (1, _) => {}
            (space, op) => {
                self.fault(
                    FaultClass::Hw,
                    format!(
                        "WAIT_REG_MEM (mem_space {space}, operation {op}) on register {:#x} is not emulated at {at}",
                        w.addr_lo
                    ),
                );
                return;
            }
        }
        let addr = w.address();
        let mut sleep = POLL_MIN;
        loop {
            if self.ring.queue.stopped() {
                return;
            }
            let seen = self.gpu.watch.seq();
            let value = self.gpu.page_table.snapshot().load_u32(addr);
            match value {
                None => {
                    self.fault(
                        FaultClass::Vm { va: addr },
                        format!(
                            "VM fault: WAIT_REG_MEM read of unmapped address {addr:#x} at {at}"
                        ),
                    );
                    return;
                }
                Some(v) if func.holds(v & w.mask, w.reference) => return,
                Some(_) => {}
            }
            self.gpu.watch.wait(seen, sleep);
            sleep = (sleep * 2).min(POLL_MAX);
        }
    }

    fn dispatch(&mut self, d: &DispatchDirect, at: &str) {
        let params = match dispatch::params(&self.sh, d) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                self.fault(FaultClass::Hw, format!("{e} at {at}"));
                return;
            }
        };
        fence(Ordering::SeqCst);
        let snap = self.gpu.page_table.snapshot();
        let result = dispatch::run(
            &snap,
            &self.gpu.code_cache,
            &params,
            self.gpu.max_steps,
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
        at: &str,
    ) -> Option<IndirectBuffer> {
        match (src, ib.chain) {
            (Source::Ring, false) if depth == 0 => {
                self.process(
                    Source::Ib { base: ib.address },
                    0,
                    u64::from(ib.size_dwords),
                    1,
                );
                None
            }
            (Source::Ib { .. }, true) => Some(ib),
            (Source::Ring, true) => {
                self.fault(
                    FaultClass::Hw,
                    format!("chained INDIRECT_BUFFER in the ring at {at}"),
                );
                None
            }
            _ => {
                self.fault(
                    FaultClass::Hw,
                    format!("nested INDIRECT_BUFFER (only one level of calls) at {at}"),
                );
                None
            }
        }
    }
}
