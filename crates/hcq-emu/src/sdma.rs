//! The SDMA engine of a copy queue: a thread that waits for doorbells and executes the SDMA
//! packets between its read pointer and the written doorbell value.
//!
//! Read and write pointers count **bytes** (64-bit, never wrapping); ring positions are taken
//! modulo the ring size, so a packet may even straddle the ring end (the driver pads with zero
//! dwords, one-dword `NOP`s, so that none does). The engine belongs to one GPU and reaches
//! memory only through that GPU's page table; it is ordered against the GPU's other queues
//! only through memory (signals), as on hardware.
//!
//! Packets: `COPY_LINEAR` (memmove semantics for overlapping ranges; each range must lie in one
//! mapped BO), `WRITE` linear, `FENCE`, `TRAP` (the interrupt path of `RELEASE_MEM`),
//! `POLL_REGMEM` on memory or on a modelled register (polled with a 20 µs → 1 ms backoff and
//! wake-ups from other engines' writes, until the condition holds or the queue is destroyed:
//! the interval and retry-count fields do not bound it), `TIMESTAMP` (get global: the 100 MHz
//! GPU clock), `CONST_FILL`, `ATOMIC` (64-bit add), `INDIRECT` (one level: the buffer's packets
//! run in order, an `INDIRECT` inside one is a fault; the whole buffer must be mapped), and
//! `GCR` and `NOP`, which have nothing to do in a functional model beyond ordering. Field
//! values that would change the result and are not modelled (byte swapping, encryption, TMZ,
//! broadcast or backwards copies, other atomic operations) are reported, as are unknown
//! packets; `crates/hcq-emu/PACKETS.md` lists them all. A fault (unmapped memory, unknown or
//! truncated packet, unmodelled field value) is reported and raises the exception events; the
//! engine then goes on with the next packet.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use hcq_amd_sys::pm4::CompareFunction;
use hcq_amd_sys::sdma::{
    copy_flags, gcr_control, packet_name, Atomic, ConstFill, CopyLinear, Header, Indirect, Packet,
    PollRegmem, WriteLinear, ATOMIC_ADD64, OP_INDIRECT, OP_NOP, OP_WRITE, SUBOP_WRITE_LINEAR,
};

use hcq_amd_sys::shared;

use crate::clock::gpu_ticks;
use crate::gpu::{FaultClass, Gpu};
use crate::memory::Snapshot;
use crate::queue::QueueShared;
use crate::ring::{PointerUnit, Ring, RingDesc};

/// Where an SDMA packet was read from, for fault messages. Kept as numbers and formatted only
/// when a fault is reported: every packet carries one.
#[derive(Debug, Clone, Copy)]
enum Location {
    /// The ring, at this byte position.
    Ring { byte: u64 },
    /// Dword `dword` of the indirect buffer at `address`, called from the ring at `ring_byte`.
    Ib {
        address: u64,
        dword: usize,
        ring_byte: u64,
    },
}

impl Location {
    fn ring_byte(self) -> u64 {
        match self {
            Location::Ring { byte }
            | Location::Ib {
                ring_byte: byte, ..
            } => byte,
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Location::Ring { byte } => write!(f, "ring byte {byte}"),
            Location::Ib {
                address,
                dword,
                ring_byte,
            } => write!(f, "IB {address:#x} dword {dword} (ring byte {ring_byte})"),
        }
    }
}

/// A copy queue's SDMA engine.
pub(crate) struct Sdma {
    ring: Ring,
    gpu: Arc<Gpu>,
}

impl Sdma {
    pub fn new(gpu: Arc<Gpu>, queue: Arc<QueueShared>, desc: RingDesc) -> Self {
        Sdma {
            ring: Ring::new(gpu.clone(), queue, desc, PointerUnit::Bytes, "SDMA queue"),
            gpu,
        }
    }

    /// The thread body: runs until the queue is destroyed.
    pub fn run(mut self) {
        self.ring.publish_rptr();
        // A stopped or evicted queue ends `consume` early; `next_work` then waits for the queue
        // to be destroyed.
        while let Some((rptr, wptr)) = self.ring.next_work() {
            self.consume(rptr, wptr);
        }
    }

    /// Executes the ring's packets from byte position `rptr` up to `wptr`; false when the
    /// queue was stopped (or evicted) first.
    pub(crate) fn consume(&mut self, rptr: u64, wptr: u64) -> bool {
        let mut pos = rptr;
        while pos < wptr {
            if self.ring.halted() {
                return false;
            }
            pos = self.step(pos, wptr);
            self.ring.set_rptr(pos);
        }
        true
    }

    fn fault(&self, class: FaultClass, what: String) {
        self.ring.fault(class, what);
    }

    /// Fetches and executes the packet at byte position `pos`; returns the next position.
    fn step(&mut self, pos: u64, end: u64) -> u64 {
        let available = (end - pos) / 4;
        // One view of memory for fetching the packet; dropped before it executes.
        let snap = self.gpu.page_table.snapshot();
        let fetch = |i: u64| self.ring.load_u32(&snap, pos + 4 * i);
        let header_word = match fetch(0) {
            Ok(w) => w,
            Err(va) => {
                self.fault(
                    FaultClass::Vm { va },
                    format!(
                        "VM fault: packet fetch from unmapped address {va:#x} at ring byte {pos}"
                    ),
                );
                return end;
            }
        };
        let header = Header::parse(header_word);
        // A length read from the body (WRITE's count) must come from what the doorbell covers.
        let len = header.packet_len_with(|i| {
            ((i as u64) < available)
                .then(|| fetch(i as u64).ok())
                .flatten()
        });
        let len = match len {
            Some(len) => len,
            // Its count dword is not there to read: the check below reports it truncated (or
            // the fetch an unmapped ring).
            None if (header.op, header.sub_op) == (OP_WRITE, SUBOP_WRITE_LINEAR) => {
                WriteLinear::LEN_BEFORE_DATA
            }
            None => {
                self.fault(
                    FaultClass::BadPacket,
                    format!(
                        "unknown SDMA packet (header {header_word:#010x}, op {} = {}, sub_op {}) at ring byte {pos}",
                        header.op,
                        packet_name(header.op, header.sub_op),
                        header.sub_op
                    ),
                );
                return pos + 4;
            }
        };
        let len = len as u64;
        if len > available {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "truncated SDMA packet (header {header_word:#010x}, op {}) at ring byte {pos}: \
                     needs {len} dwords, only {available} written",
                    header.op
                ),
            );
            return end;
        }
        let next = pos + 4 * len;
        // A NOP's body is ignored: only its header is read.
        let fetched = if header.op == OP_NOP { 1 } else { len };
        let mut words = Vec::with_capacity(fetched as usize);
        words.push(header_word);
        for i in 1..fetched {
            match fetch(i) {
                Ok(w) => words.push(w),
                Err(va) => {
                    self.fault(
                        FaultClass::Vm { va },
                        format!(
                            "VM fault: packet fetch from unmapped address {va:#x} at ring byte {}",
                            pos + 4 * i
                        ),
                    );
                    return next;
                }
            }
        }
        drop(snap);
        // The engine fetches the ring in 32-byte lines, and an indirect buffer's packet must
        // end on one's boundary (amdgpu pads before every one with NOPs).
        if header.op == OP_INDIRECT && !next.is_multiple_of(32) {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "INDIRECT packet at ring byte {pos} ends at byte {next}, not on an 8-dword \
                     (32-byte) boundary of the ring"
                ),
            );
            return next;
        }
        if header.op != OP_NOP {
            self.execute(&words, Location::Ring { byte: pos }, false);
        }
        next
    }

    /// Executes one packet; `in_ib` when it comes from an indirect buffer.
    fn execute(&mut self, words: &[u32], at: Location, in_ib: bool) {
        let packet = match Packet::decode(words) {
            Ok(p) => p,
            Err(e) => {
                self.fault(FaultClass::BadPacket, format!("{e} at {at}"));
                return;
            }
        };
        match packet {
            Packet::Nop(_) => fence(Ordering::SeqCst),
            Packet::HdpFlush(h) => self.poll(&h.poll, at),
            Packet::Gcr(g) => {
                if g.control & gcr_control::GLI_INV != 0 {
                    self.gpu.code_cache.invalidate();
                }
                fence(Ordering::SeqCst);
            }
            Packet::CopyLinear(c) => self.copy(&c, at),
            Packet::Indirect(ib) if in_ib => self.fault(
                FaultClass::BadPacket,
                format!(
                    "INDIRECT to {:#x} inside an indirect buffer (one level only) at {at}",
                    ib.address
                ),
            ),
            Packet::Indirect(ib) => self.indirect(&ib, at),
            Packet::Fence(f) => {
                let addr = f.address & !3;
                self.store(at, "FENCE", addr, |snap| snap.store_u32(addr, f.data));
            }
            Packet::Trap(t) => {
                fence(Ordering::SeqCst);
                self.gpu.events.interrupt(t.int_ctx);
            }
            Packet::PollRegmem(p) => self.poll(&p, at),
            Packet::Timestamp(t) => {
                let addr = t.address & !3;
                self.store(at, "TIMESTAMP", addr, |snap| {
                    snap.store_u64(addr, gpu_ticks())
                });
            }
            Packet::ConstFill(f) => self.fill(&f, at),
            Packet::Atomic(a) => self.atomic(&a, at),
            Packet::WriteLinear(w) => self.write_linear(&w, at),
            Packet::Unknown { op, sub_op } => self.fault(
                FaultClass::BadPacket,
                format!(
                    "SDMA packet {} (op {op} sub_op {sub_op}) is not modelled at {at}",
                    packet_name(op, sub_op)
                ),
            ),
        }
    }

    /// Runs the packets of an indirect buffer. Its words are fetched up front (the whole buffer
    /// must be mapped); a packet of unknown size or running past the end stops it with a fault.
    fn indirect(&mut self, ib: &Indirect, at: Location) {
        let bytes = u64::from(ib.size_dwords) * 4;
        let snap = self.gpu.page_table.snapshot();
        let Some(src) = snap.translate(ib.address, bytes.max(4)) else {
            let va = snap.fault_address(ib.address);
            drop(snap);
            self.fault(
                FaultClass::Vm { va },
                format!(
                    "VM fault: INDIRECT of {} dwords at {:#x}: unmapped address {va:#x} at {at}",
                    ib.size_dwords, ib.address
                ),
            );
            return;
        };
        let mut bytes_read = vec![0u8; bytes as usize];
        // SAFETY: `translate` guarantees `bytes` mapped bytes at `src`, kept mapped while
        // `snap` holds the BO and reached by everyone else atomically; the destination is a
        // private buffer.
        unsafe { shared::load(src, &mut bytes_read) };
        let words: Vec<u32> = bytes_read
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        drop(snap);
        let mut k = 0usize;
        while k < words.len() {
            if self.ring.halted() {
                return;
            }
            let where_ = Location::Ib {
                address: ib.address,
                dword: k,
                ring_byte: at.ring_byte(),
            };
            let header = Header::parse(words[k]);
            let Some(len) = header.packet_len_with(|i| words.get(k + i).copied()) else {
                self.fault(
                    FaultClass::BadPacket,
                    format!(
                        "unknown SDMA packet (header {:#010x}) at {where_}; rest of the IB skipped",
                        words[k]
                    ),
                );
                return;
            };
            if k + len > words.len() {
                self.fault(
                    FaultClass::BadPacket,
                    format!(
                        "truncated SDMA packet (op {}) at {where_}: needs {len} dwords, {} left",
                        header.op,
                        words.len() - k
                    ),
                );
                return;
            }
            if header.op != OP_NOP {
                self.execute(&words[k..k + len], where_, true);
            }
            k += len;
        }
    }

    /// A checked write through the page table; a refused one is a VM fault at `addr`.
    fn store(&self, at: Location, what: &str, addr: u64, f: impl FnOnce(&Snapshot) -> Option<()>) {
        fence(Ordering::SeqCst);
        let snap = self.gpu.page_table.snapshot();
        let ok = f(&snap).is_some();
        let va = snap.fault_address(addr);
        drop(snap);
        if ok {
            self.gpu.watch.notify();
        } else {
            self.fault(
                FaultClass::Vm { va },
                format!("VM fault: {what} write to unmapped address {va:#x} at {at}"),
            );
        }
    }

    fn copy(&self, c: &CopyLinear, at: Location) {
        let unmodelled = c.extra_info
            & (copy_flags::ENCRYPT
                | copy_flags::TMZ
                | copy_flags::BACKWARDS
                | copy_flags::BROADCAST);
        if unmodelled != 0 {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "COPY_LINEAR with header flags {unmodelled:#x} (encrypt, TMZ, backwards or broadcast) is not modelled at {at}"
                ),
            );
            return;
        }
        if c.src_swap != 0 || c.dst_swap != 0 {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "COPY_LINEAR with byte swapping (src_swap {}, dst_swap {}) is not modelled at {at}",
                    c.src_swap, c.dst_swap
                ),
            );
            return;
        }
        let n = c.bytes();
        fence(Ordering::SeqCst);
        // Across BOs adjacent in the GPU's address space, all or nothing, memmove semantics.
        let copied = self.gpu.page_table.snapshot().copy(c.src, c.dst, n);
        if let Err((read, va)) = copied {
            let dir = if read { "read" } else { "write" };
            self.fault(
                FaultClass::Vm { va },
                format!(
                    "VM fault: COPY_LINEAR of {n} bytes from {:#x} to {:#x}: {dir} of unmapped address {va:#x} at {at}",
                    c.src, c.dst
                ),
            );
            return;
        }
        fence(Ordering::SeqCst);
        self.gpu.watch.notify();
    }

    fn fill(&self, f: &ConstFill, at: Location) {
        // Fill sizes 0..=2 are a byte, a word and a dword of `data`; what 3 means is not
        // known here.
        if f.fill_size > 2 {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "CONST_FILL with fill size {} is not modelled at {at}",
                    f.fill_size
                ),
            );
            return;
        }
        if f.sw != 0 {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "CONST_FILL with byte swapping (sw {}) is not modelled at {at}",
                    f.sw
                ),
            );
            return;
        }
        let n = f.bytes();
        let pattern = f.data.to_le_bytes();
        let unit = f.unit();
        fence(Ordering::SeqCst);
        let filled = self
            .gpu
            .page_table
            .snapshot()
            .fill(f.address, n, &pattern[..unit]);
        if let Err(va) = filled {
            self.fault(
                FaultClass::Vm { va },
                format!("VM fault: CONST_FILL of {n} bytes at unmapped address {va:#x} at {at}"),
            );
            return;
        }
        fence(Ordering::SeqCst);
        self.gpu.watch.notify();
    }

    fn atomic(&self, a: &Atomic, at: Location) {
        if a.operation != ATOMIC_ADD64 {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "SDMA ATOMIC operation {} is not emulated at {at}",
                    a.operation
                ),
            );
            return;
        }
        if !a.address.is_multiple_of(8) {
            self.fault(
                FaultClass::BadPacket,
                format!("SDMA ATOMIC on misaligned address {:#x} at {at}", a.address),
            );
            return;
        }
        let snap = self.gpu.page_table.snapshot();
        let Some(p) = snap.translate(a.address, 8) else {
            let va = snap.fault_address(a.address);
            drop(snap);
            self.fault(
                FaultClass::Vm { va },
                format!("VM fault: SDMA ATOMIC on unmapped address {va:#x} at {at}"),
            );
            return;
        };
        // SAFETY: `p` points to 8 mapped bytes kept alive by `snap`, 8-byte aligned (BOs are
        // page aligned in host memory and the address is 8-byte aligned); this crate accesses
        // shared GPU words atomically.
        unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.fetch_add(a.src_data, Ordering::SeqCst);
        drop(snap);
        self.gpu.watch.notify();
    }

    /// `WRITE` linear: the packet's dwords to consecutive dwords in memory.
    fn write_linear(&self, w: &WriteLinear, at: Location) {
        let unmodelled = w.flags & (copy_flags::ENCRYPT | copy_flags::TMZ);
        if unmodelled != 0 || w.swap != 0 {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "WRITE_LINEAR with header flags {unmodelled:#x} (encrypt, TMZ) or swap {} is not modelled at {at}",
                    w.swap
                ),
            );
            return;
        }
        let addr = w.address & !3;
        self.store(at, "WRITE_LINEAR", addr, |snap| {
            w.data
                .iter()
                .zip(0u64..)
                .try_for_each(|(&v, i)| snap.store_u32(addr.wrapping_add(4 * i), v))
        });
    }

    /// `POLL_REGMEM`: polls a memory dword, or a register (byte address: the register's dword
    /// address times 4). With `hdp_flush`, the register form first writes the reference to
    /// the request register in the address's high half and polls the done register in its low
    /// half (the HDP flush the kernel driver emits).
    fn poll(&self, p: &PollRegmem, at: Location) {
        let Some(func) = p.compare() else {
            self.fault(
                FaultClass::BadPacket,
                format!(
                    "POLL_REGMEM with invalid compare function {} at {at}",
                    p.func
                ),
            );
            return;
        };
        if p.mem_poll {
            let addr = p.address & !3;
            let result = self.ring.poll(func, p.mask, p.reference, |gpu| {
                gpu.page_table.snapshot().load_u32(addr).ok_or(addr)
            });
            if let Err(va) = result {
                self.fault(
                    FaultClass::Vm { va },
                    format!("VM fault: POLL_REGMEM read of unmapped address {va:#x} at {at}"),
                );
            }
            return;
        }
        let register = |byte_address: u32| byte_address >> 2;
        if p.hdp_flush {
            let request = register((p.address >> 32) as u32);
            if let Err(e) = self.gpu.registers.write(request, p.reference) {
                self.fault(
                    FaultClass::BadPacket,
                    format!("POLL_REGMEM HDP flush: {e} at {at}"),
                );
                return;
            }
            self.gpu.watch.notify();
        }
        // Nothing to compare: the register is not read (the reference runtime's HDP flush
        // polls register 0 with "always").
        if func == CompareFunction::Always {
            return;
        }
        let polled = register(p.address as u32);
        let result = self
            .ring
            .poll(func, p.mask, p.reference, |gpu| gpu.registers.read(polled));
        if let Err(e) = result {
            self.fault(FaultClass::BadPacket, format!("POLL_REGMEM: {e} at {at}"));
        }
    }
}
