//! SDMA copy queues: the SDMA engine executing rings written by a driver, through the `Syscalls`
//! seam only, with packets built by `SdmaBuilder` and submitted with the reference runtime's
//! wrap-around padding.

mod common;

use std::ptr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::pm4::Pm4Builder;
use hcq_amd_sys::sdma::{self, SdmaBuilder, MAX_COPY_SIZE};
use hcq_amd_sys::seam::*;
use hcq_core::FaultKind;
use hcq_emu::EmuKernel;

const LONG: Duration = Duration::from_secs(10);
const MIB4: u64 = MAX_COPY_SIZE;

/// An SDMA queue as the driver keeps it: byte pointers, wrap-around zero padding.
struct SdmaQueue<'d, 'k> {
    dev: &'d Dev<'k>,
    ring: Buf,
    gart: Buf,
    queue_id: u32,
    doorbell_offset: u64,
    doorbell: *mut u64,
    wptr: u64,
}

fn create_sdma<'d, 'k>(dev: &'d Dev<'k>, ring_bytes: u64) -> SdmaQueue<'d, 'k> {
    let raw = dev.create_queue_of(QUEUE_TYPE_SDMA, ring_bytes);
    SdmaQueue {
        dev,
        ring: raw.ring,
        gart: raw.gart,
        queue_id: raw.queue_id,
        doorbell_offset: raw.doorbell_offset,
        doorbell: raw.doorbell,
        wptr: 0,
    }
}

impl SdmaQueue<'_, '_> {
    fn rptr(&self) -> u64 {
        self.gart.atomic_u64(8).load(Ordering::SeqCst)
    }

    fn ring_doorbell(&self) {
        self.gart.atomic_u64(0).store(self.wptr, Ordering::SeqCst);
        // SAFETY: `doorbell` points into the doorbell page mapped by `create_sdma`.
        unsafe { self.dev.k.write_doorbell(self.doorbell, self.wptr) };
    }

    /// Waits until `bytes` more fit in the ring, handing what is written to the engine first.
    fn make_room(&self, bytes: u64) {
        if self.wptr + bytes - self.rptr() <= self.ring.size {
            return;
        }
        self.ring_doorbell();
        let start = Instant::now();
        while self.wptr + bytes - self.rptr() > self.ring.size {
            assert!(start.elapsed() < LONG, "SDMA queue overrun");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Copies each packet into the ring (zero-padding the end of the ring when a packet would
    /// straddle it, like `HWCopyQueue.submit`, and before an `INDIRECT` so that it ends on an
    /// 8-dword boundary, like amdgpu) and rings the doorbell.
    fn submit(&mut self, b: &SdmaBuilder) {
        self.submit_packets(b.packets(), true);
    }

    fn put_zeros(&mut self, bytes: u64) {
        let size = self.ring.size;
        self.make_room(bytes);
        for i in 0..bytes / 4 {
            self.ring.write_u32((self.wptr + 4 * i) % size, 0);
        }
        self.wptr += bytes;
    }

    fn submit_packets<'a>(&mut self, packets: impl Iterator<Item = &'a [u32]>, align_ibs: bool) {
        let size = self.ring.size;
        for p in packets {
            let bytes = 4 * p.len() as u64;
            let indirect = p[0] & 0xff == u32::from(sdma::OP_INDIRECT);
            if align_ibs && indirect {
                let pad = (32 - (self.wptr + bytes) % 32) % 32;
                self.put_zeros(pad);
            }
            let fill = size - self.wptr % size;
            if bytes > fill {
                self.make_room(fill);
                for i in 0..fill / 4 {
                    self.ring.write_u32(self.wptr % size + 4 * i, 0);
                }
                self.wptr += fill;
            }
            if align_ibs && indirect && bytes > fill {
                self.put_zeros((32 - bytes % 32) % 32);
            }
            self.make_room(bytes);
            for (i, &w) in p.iter().enumerate() {
                self.ring.write_u32(self.wptr % size + 4 * i as u64, w);
            }
            self.wptr += bytes;
        }
        self.ring_doorbell();
    }

    fn wait_idle(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.rptr() == self.wptr {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    fn destroy(self) {
        self.dev.destroy_queue(self.queue_id);
    }
}

/// The bytes of a buffer, read through its CPU view.
fn read(buf: &Buf) -> Vec<u8> {
    let mut out = vec![0u8; buf.size as usize];
    // SAFETY: test buffers are mapped read-write for `size` bytes at `va`; the engine is idle
    // on them (the test waited for the signal following its last packet).
    unsafe { ptr::copy_nonoverlapping(buf.ptr::<u8>(0), out.as_mut_ptr(), out.len()) };
    out
}

/// Writes `data` at the start of a buffer through its CPU view.
fn write(buf: &Buf, data: &[u8]) {
    assert!(data.len() as u64 <= buf.size);
    // SAFETY: as in `read`; `data` fits in the buffer.
    unsafe { ptr::copy_nonoverlapping(data.as_ptr(), buf.ptr::<u8>(0), data.len()) };
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

#[test]
fn copies_of_edge_sizes_between_vram_gtt_and_userptr_are_exact() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x4000);
    let size = MIB4 + 0x2000;
    let vram = dev.alloc(size, ALLOC_MEM_FLAGS_VRAM);
    let gtt = dev.alloc(size, ALLOC_MEM_FLAGS_GTT);
    let user = dev.alloc(size, ALLOC_MEM_FLAGS_USERPTR);
    let pairs = [
        (&vram, &gtt),
        (&gtt, &user),
        (&user, &vram),
        (&gtt, &vram),
        (&vram, &user),
        (&user, &gtt),
    ];
    let mut value = 0;
    for (round, (src, dst)) in pairs.iter().enumerate() {
        for (j, n) in [0, 1, 3, MIB4 - 1, MIB4, MIB4 + 1].into_iter().enumerate() {
            let (src_off, dst_off) = (5 + j as u64, 3 + 2 * j as u64);
            let data = pattern((round * 16 + j) as u64, size as usize);
            write(src, &data);
            write(dst, &vec![0xa5; size as usize]);
            let mut b = SdmaBuilder::new();
            b.copy(dst.va + dst_off, src.va + src_off, n);
            value += 1;
            b.signal(sig.value_addr(0), value, sig.mailbox(&ev), ev.event_id);
            q.submit(&b);
            assert!(wait_signal(&dev, &sig, 0, value, &ev), "copy of {n}");
            let out = read(dst);
            let (a, e) = (dst_off as usize, (dst_off + n) as usize);
            assert!(out[..a].iter().all(|&x| x == 0xa5), "before, {n} bytes");
            assert!(
                out[a..e] == data[src_off as usize..(src_off + n) as usize],
                "copy of {n} bytes, round {round}"
            );
            assert!(out[e..].iter().all(|&x| x == 0xa5), "after, {n} bytes");
        }
    }
    // Overlapping ranges behave like memmove, in both directions.
    let data = pattern(99, size as usize);
    for (src_off, dst_off) in [(0u64, 1u64), (1, 0), (0x1000, 0x800)] {
        write(&vram, &data);
        let n = MIB4 + 0x400;
        let mut b = SdmaBuilder::new();
        b.copy(vram.va + dst_off, vram.va + src_off, n);
        value += 1;
        b.signal(sig.value_addr(0), value, sig.mailbox(&ev), ev.event_id);
        q.submit(&b);
        assert!(wait_signal(&dev, &sig, 0, value, &ev));
        // Chunks of 4 MiB are copied one after the other, as the packets say.
        let mut expect = data.clone();
        let mut done = 0;
        while done < n {
            let step = (n - done).min(MIB4);
            let (s, d) = ((src_off + done) as usize, (dst_off + done) as usize);
            expect.copy_within(s..s + step as usize, d);
            done += step;
        }
        assert!(read(&vram) == expect, "memmove {src_off} -> {dst_off}");
    }
    assert!(q.wait_idle(LONG));
    assert_eq!(k.take_fault_report(dev.gpu_id), None);
    q.destroy();
}

#[test]
fn the_ring_wraps_with_zero_padding_over_many_submissions() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 1024);
    let buf = dev.alloc(0x10000, ALLOC_MEM_FLAGS_GTT);
    let data = pattern(7, 0x8000);
    write(&buf, &data);
    for v in 1..=300u64 {
        let off = (v * 97) % 0x7000;
        let n = 1 + (v * 31) % 0x1000;
        let mut b = SdmaBuilder::new();
        b.copy(buf.va + 0x8000, buf.va + off, n);
        b.timestamp(sig.value_addr(1));
        b.signal(sig.value_addr(0), v, sig.mailbox(&ev), ev.event_id);
        q.submit(&b);
        if v % 10 == 0 {
            assert!(wait_signal(&dev, &sig, 0, v, &ev), "submission {v}");
            let out = &read(&buf)[0x8000..0x8000 + n as usize];
            assert!(out == &data[off as usize..(off + n) as usize], "copy {v}");
        }
    }
    assert!(wait_signal(&dev, &sig, 0, 300, &ev));
    assert!(q.wait_idle(LONG));
    assert_eq!(q.rptr(), q.wptr);
    assert!(q.wptr > 40 * 1024, "the ring wrapped many times");
    assert_eq!(k.take_fault_report(dev.gpu_id), None);
    q.destroy();
}

#[test]
fn fence_and_trap_wake_wait_events() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x1000);
    let mut b = SdmaBuilder::new();
    b.signal(
        sig.value_addr(0),
        0x1_0000_0007,
        sig.mailbox(&ev),
        ev.event_id,
    );
    q.submit(&b);
    let t = Instant::now();
    assert_eq!(dev.wait_event(ev.event_id, 5000).0, WAIT_RESULT_COMPLETE);
    assert!(t.elapsed() < Duration::from_secs(4));
    // FENCE writes 32 bits.
    assert_eq!(sig.value(0), 7);
    // Without a mailbox there is no interrupt.
    let mut b = SdmaBuilder::new();
    b.signal(sig.value_addr(0), 8, 0, 0);
    q.submit(&b);
    assert!(q.wait_idle(LONG));
    assert_eq!(sig.value(0), 8);
    assert_eq!(dev.wait_event(ev.event_id, 50).0, WAIT_RESULT_TIMEOUT);
    q.destroy();
}

#[test]
fn poll_regmem_waits_for_the_host_and_for_the_compute_queue() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x1000);
    let buf = dev.alloc(0x2000, ALLOC_MEM_FLAGS_VRAM);
    write(&buf, b"sdma after wait!");

    // Waiting for a host write: nothing after the wait runs before the value is reached.
    let mut b = SdmaBuilder::new();
    b.wait(sig.value_addr(3), 5);
    b.copy(buf.va + 0x1000, buf.va, 16);
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert_eq!(dev.wait_event(ev.event_id, 100).0, WAIT_RESULT_TIMEOUT);
    sig.set_value(3, 4);
    assert_eq!(dev.wait_event(ev.event_id, 50).0, WAIT_RESULT_TIMEOUT);
    assert_eq!(sig.value(0), 0);
    assert_eq!(&read(&buf)[0x1000..0x1010], &[0; 16]);
    sig.set_value(3, 5);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    assert_eq!(&read(&buf)[0x1000..0x1010], b"sdma after wait!");

    // Cross-engine ordering through a signal: the copy waits for the compute queue's
    // RELEASE_MEM, and the compute queue then waits for the copy's FENCE.
    let mut cq = dev.create_queue(0x1000);
    let mut b = SdmaBuilder::new();
    b.wait(sig.value_addr(4), 1);
    b.fill(buf.va + 0x1800, 0x0102_0304, 8);
    b.signal(sig.value_addr(5), 1, 0, 0);
    q.submit(&b);
    let mut p = Pm4Builder::new();
    p.wait(sig.value_addr(6), 1);
    p.signal(sig.value_addr(4), 1, 0, 0);
    p.wait(sig.value_addr(5), 1);
    p.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    cq.submit(&p.words);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        sig.value(5),
        0,
        "the SDMA queue waits for the compute queue"
    );
    assert_eq!(sig.value(0), 1);
    sig.set_value(6, 1);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    assert_eq!(sig.value(5), 1);
    assert_eq!(&read(&buf)[0x1800..0x1808], &[4, 3, 2, 1, 4, 3, 2, 1]);
    assert!(q.wait_idle(LONG));
    cq.destroy();
    q.destroy();
}

#[test]
fn timestamps_are_monotonic_and_on_the_gpu_clock() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x1000);
    let buf = dev.alloc(0x100000, ALLOC_MEM_FLAGS_GTT);
    let mut c = GetClockCountersArgs {
        gpu_id: dev.gpu_id,
        ..Default::default()
    };
    ioctl(&k, dev.kfd, IOC_GET_CLOCK_COUNTERS, &mut c).unwrap();
    let before = c.gpu_clock_counter;
    let mut b = SdmaBuilder::new();
    for i in 0..8 {
        b.timestamp(sig.value_addr(1 + i));
        b.copy(buf.va + 0x80000, buf.va, 0x80000);
    }
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    ioctl(&k, dev.kfd, IOC_GET_CLOCK_COUNTERS, &mut c).unwrap();
    let ts: Vec<u64> = (0..8).map(|i| sig.value(1 + i)).collect();
    assert!(before <= ts[0], "{before} <= {}", ts[0]);
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
    assert!(ts[7] <= c.gpu_clock_counter);
    q.destroy();
}

/// Submits one faulting command and a signal on a fresh SDMA queue of a fresh emulated kernel
/// (a process of its own); checks the memory exception names `fault_va` on the GPU, that KFD's
/// eviction keeps the signal after it from ever being written, and returns the fault report.
fn sdma_memory_fault(
    build: impl Fn(&mut SdmaBuilder, &Buf),
    fault_va: impl Fn(&Buf) -> u64,
) -> String {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mem = dev.create_event(EVENT_MEMORY, None);
    let mut q = create_sdma(&dev, 0x1000);
    let buf = dev.alloc(0x2000, ALLOC_MEM_FLAGS_VRAM);
    let mut b = SdmaBuilder::new();
    build(&mut b, &buf);
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    let (result, data) = dev.wait_event(mem.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a memory-exception event fills in this member of the union.
    let m = unsafe { data.data.memory_exception_data };
    assert_eq!((m.va, m.gpu_id), (fault_va(&buf), dev.gpu_id));
    assert_eq!(reached_or_evicted(&k, &dev, &sig, 0, 1, &ev), Some(true));
    assert_eq!(sig.value(0), 0, "the engine went on after the fault");
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert_eq!(report.kind, FaultKind::MemoryFault, "{report}");
    assert_eq!(
        report.address.map(|a| a & !0xfff),
        Some(fault_va(&buf)),
        "{report}"
    );
    q.destroy();
    report.message
}

#[test]
fn a_copy_touching_unmapped_memory_is_a_memory_exception_that_evicts_the_queues() {
    // From an unmapped address.
    let report = sdma_memory_fault(
        |b, buf| {
            b.copy(buf.va, 0x1000, 64);
        },
        |_| 0x1000,
    );
    assert!(
        report.contains("0x1000") && report.contains("COPY_LINEAR"),
        "{report}"
    );
    // Running past the end of a buffer: the fault names the first byte past it.
    sdma_memory_fault(
        |b, buf| {
            b.copy(buf.va + 0x1800, buf.va, 0x1000);
        },
        |buf| buf.va + 0x2000,
    );
    // A FENCE to unmapped memory.
    sdma_memory_fault(
        |b, _| {
            b.signal(0x2000, 9, 0, 0);
        },
        |_| 0x2000,
    );
}

#[test]
fn unknown_and_truncated_packets_are_hw_exceptions_and_the_engine_goes_on() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let hw = dev.create_event(EVENT_HW_EXCEPTION, None);
    let mut q = create_sdma(&dev, 0x1000);

    // An unknown op: skipped one dword at a time.
    let mut b = SdmaBuilder::new();
    b.raw(&[0x0000_00fe]);
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    let (result, data) = dev.wait_event(hw.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a hardware-exception event fills in this member of the union.
    assert_eq!(unsafe { data.data.hw_exception_data }.gpu_id, dev.gpu_id);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert_eq!(report.kind, FaultKind::BadCommandPacket, "{report}");
    let report = report.message;
    assert!(report.contains("unknown SDMA packet"), "{report}");

    // A known size but an operation that is not emulated: skipped by its length.
    let mut b = SdmaBuilder::new();
    b.raw(&[
        sdma::header(sdma::OP_COPY, sdma::SUBOP_COPY_LINEAR_RECT, 0),
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        9,
        10,
        11,
        12,
    ]);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert_eq!(dev.wait_event(hw.event_id, 5000).0, WAIT_RESULT_COMPLETE);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    let report = k.take_fault_report(dev.gpu_id).unwrap().message;
    assert!(
        report.contains("SDMA packet COPY_LINEAR_RECT (op 1 sub_op 4) is not modelled"),
        "{report}"
    );

    // A packet longer than what was written: the rest of the submission is skipped.
    let mut b = SdmaBuilder::new();
    b.raw(&[sdma::header(sdma::OP_COPY, sdma::SUBOP_COPY_LINEAR, 0), 0]);
    q.submit(&b);
    assert_eq!(dev.wait_event(hw.event_id, 5000).0, WAIT_RESULT_COMPLETE);
    assert!(q.wait_idle(LONG));
    assert!(k
        .take_fault_report(dev.gpu_id)
        .unwrap()
        .message
        .contains("truncated"));
    let mut b = SdmaBuilder::new();
    b.signal(sig.value_addr(0), 3, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 3, &ev));

    // Atomics: a 64-bit add works, other operations are reported.
    let mut b = SdmaBuilder::new();
    for op in [sdma::ATOMIC_ADD64, 3] {
        b.push(&sdma::Packet::Atomic(sdma::Atomic {
            looped: false,
            operation: op,
            address: sig.value_addr(1),
            src_data: 0x1_0000_0001,
            cmp_data: 0,
            loop_interval: 0,
        }));
    }
    b.signal(sig.value_addr(0), 4, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 4, &ev));
    assert_eq!(sig.value(1), 0x1_0000_0001);
    assert!(k
        .take_fault_report(dev.gpu_id)
        .unwrap()
        .message
        .contains("ATOMIC"));
    assert_eq!(k.take_fault_report(dev.gpu_id), None);
    q.destroy();
}

#[test]
fn random_packets_never_hang_the_engine() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let ops = [0u8, 1, 5, 6, 8, 10, 11, 13, 17, 0x42];
    // Each round is a process of its own: a VM fault ends the queues of the round it happens in.
    let mut evictions = 0;
    for round in 1..=40u64 {
        let k = EmuKernel::new(small_config());
        let dev = Dev::open(&k, 0);
        let sig = Signals::new(&dev);
        let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
        let mut q = create_sdma(&dev, 0x4000);
        let mut b = SdmaBuilder::new();
        for _ in 0..8 {
            let r = rand();
            let op = ops[(r % ops.len() as u64) as usize];
            let sub_op = ((r >> 8) % 5) as u8;
            // Short NOPs, so that every packet ends where its header says.
            let flags = if op == 0 {
                (r >> 16) as u16 & 7
            } else {
                (r >> 16) as u16
            };
            let header = sdma::header(op, sub_op, flags);
            let len = sdma::Header::parse(header).packet_len().unwrap_or(1);
            let mut words = vec![header];
            words.extend((1..len).map(|_| rand() as u32));
            b.raw(&words);
        }
        b.signal(sig.value_addr(0), round, sig.mailbox(&ev), ev.event_id);
        q.submit(&b);
        match reached_or_evicted(&k, &dev, &sig, 0, round, &ev) {
            Some(evicted) => evictions += usize::from(evicted),
            None => panic!("round {round}: neither finished nor evicted"),
        }
        while k.take_fault_report(dev.gpu_id).is_some() {}
        q.destroy();
    }
    assert!(
        evictions < 40,
        "every round faulted: the packets test nothing else"
    );
}

#[test]
fn a_copy_between_two_gpus_maps_the_destination_on_the_source_gpu() {
    let k = EmuKernel::new(hcq_emu::EmuConfig {
        gpus: 2,
        ..small_config()
    });
    let d0 = Dev::open(&k, 0);
    let d1 = Dev::open(&k, 1);
    let sig = Signals::new(&d0);
    let ev = d0.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mem = d0.create_event(EVENT_MEMORY, None);
    let mut q = create_sdma(&d0, 0x1000);
    let n = MIB4 + 0x1000;
    let src = d0.alloc(n, ALLOC_MEM_FLAGS_VRAM);
    let dst = d1.alloc(n, ALLOC_MEM_FLAGS_VRAM);
    let data = pattern(42, n as usize);
    write(&src, &data);

    // Not mapped on GPU 0 yet: a VM fault on GPU 0.
    let mut b = SdmaBuilder::new();
    b.copy(dst.va, src.va, 0x1000);
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    let (result, data0) = d0.wait_event(mem.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a memory-exception event fills in this member of the union.
    let m = unsafe { data0.data.memory_exception_data };
    assert_eq!((m.va, m.gpu_id), (dst.va, d0.gpu_id));
    // KFD evicts the process's queues on GPU 0 for good; the rest of this test is another
    // process, which maps first.
    assert_eq!(reached_or_evicted(&k, &d0, &sig, 0, 1, &ev), Some(true));
    while k.take_fault_report(d0.gpu_id).is_some() {}
    q.destroy();
    let _ = (src, dst, sig, d0, d1);
    let k = EmuKernel::new(hcq_emu::EmuConfig {
        gpus: 2,
        ..small_config()
    });
    let d0 = Dev::open(&k, 0);
    let d1 = Dev::open(&k, 1);
    let sig = Signals::new(&d0);
    let ev = d0.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&d0, 0x1000);
    let src = d0.alloc(n, ALLOC_MEM_FLAGS_VRAM);
    let dst = d1.alloc(n, ALLOC_MEM_FLAGS_VRAM);
    write(&src, &data);

    // Mapped on both GPUs (as a device-to-device transfer does), the copy goes through.
    let ids = [d1.gpu_id, d0.gpu_id];
    let mut m = MapMemoryArgs {
        handle: dst.handle,
        device_ids_array_ptr: ids.as_ptr() as u64,
        n_devices: 2,
        n_success: 0,
    };
    ioctl(&k, d1.kfd, IOC_MAP_MEMORY_TO_GPU, &mut m).unwrap();
    assert_eq!(m.n_success, 2);
    let mut b = SdmaBuilder::new();
    b.copy(dst.va, src.va, n);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&d0, &sig, 0, 2, &ev));
    assert!(read(&dst) == data);
    assert_eq!(k.take_fault_report(d0.gpu_id), None);

    // GPU 1 still reaches it through its own page table: its SDMA engine copies it back.
    let ids = [d1.gpu_id];
    for buf in [&sig.page, &sig.events, &src] {
        let mut m = MapMemoryArgs {
            handle: buf.handle,
            device_ids_array_ptr: ids.as_ptr() as u64,
            n_devices: 1,
            n_success: 0,
        };
        ioctl(&k, d0.kfd, IOC_MAP_MEMORY_TO_GPU, &mut m).unwrap();
    }
    write(&src, &vec![0; n as usize]);
    let mut q1 = create_sdma(&d1, 0x1000);
    let mut b = SdmaBuilder::new();
    b.copy(src.va, dst.va, n);
    b.signal(sig.value_addr(0), 3, sig.mailbox(&ev), ev.event_id);
    q1.submit(&b);
    assert!(wait_signal(&d0, &sig, 0, 3, &ev));
    assert!(read(&src) == data);
    assert_eq!(k.take_fault_report(d1.gpu_id), None);
    q1.destroy();
    q.destroy();
}

#[test]
fn destroying_a_queue_blocked_in_poll_regmem_returns_promptly() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let mut q = create_sdma(&dev, 0x1000);
    let mut b = SdmaBuilder::new();
    b.wait(sig.value_addr(5), 1);
    q.submit(&b);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(q.rptr(), 0, "blocked in POLL_REGMEM");
    let t = Instant::now();
    q.destroy();
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn sdma_and_compute_queues_share_the_doorbell_page_with_distinct_slots() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut s0 = create_sdma(&dev, 0x1000);
    // A compute queue created between them.
    let c = dev.create_queue(0x1000);
    let mut s1 = create_sdma(&dev, 0x1000);
    let offsets = [s0.doorbell_offset, c.doorbell_offset, s1.doorbell_offset];
    // One doorbell page, three distinct slots.
    assert!(offsets.iter().all(|o| o & !0x1fff == offsets[0] & !0x1fff));
    assert!(offsets[0] != offsets[2] && offsets[0] != offsets[1] && offsets[1] != offsets[2]);
    // Each doorbell wakes its own engine only.
    let mut b = SdmaBuilder::new();
    b.signal(sig.value_addr(1), 1, 0, 0);
    s1.submit(&b);
    let mut b = SdmaBuilder::new();
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    s0.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    assert!(s1.wait_idle(LONG));
    assert_eq!(sig.value(1), 1);
    // A bad SDMA write pointer is reported, and the queue resynchronises to it.
    s1.wptr += 6;
    s1.ring_doorbell();
    let start = Instant::now();
    let report = loop {
        if let Some(r) = k.take_fault_report(dev.gpu_id) {
            break r;
        }
        assert!(start.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(report.kind, FaultKind::HardwareException, "{report}");
    assert!(report.message.contains("write pointer"), "{report}");
    let start = Instant::now();
    while s1.rptr() != s1.wptr & !3 {
        assert!(start.elapsed() < LONG, "the read pointer resynchronises");
        std::thread::sleep(Duration::from_millis(1));
    }
    s0.destroy();
    s1.destroy();
    c.destroy();
}

#[test]
fn copies_racing_with_host_writes_see_only_whole_values_the_host_wrote() {
    // The host rewrites a buffer round after round (every dword = the round number) while the
    // engine copies it: each dword of a copy must be one round's value, no older than the
    // round before the copy was submitted and no newer than the round after it finished.
    // Every access on both sides is atomic (hcq_amd_sys::shared), so this is a defined race.
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x4000);
    let size = 64u64 << 10;
    let src = dev.alloc(size, ALLOC_MEM_FLAGS_VRAM);
    let dst = dev.alloc(size, ALLOC_MEM_FLAGS_GTT);
    let round = std::sync::atomic::AtomicU32::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let src_at = src.va as usize;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut image = vec![0u8; size as usize];
            while !stop.load(Ordering::Relaxed) {
                let r = round.load(Ordering::Relaxed) + 1;
                for word in image.chunks_exact_mut(4) {
                    word.copy_from_slice(&r.to_le_bytes());
                }
                // SAFETY: `size` bytes of the mapped source buffer; the engine reads it
                // atomically.
                unsafe { hcq_amd_sys::shared::store(src_at as *mut u8, &image) };
                round.store(r, Ordering::Release);
            }
        });
        let mut value = 0;
        for copy in 0..40u64 {
            let before = round.load(Ordering::Acquire);
            // A dword-aligned offset on odd copies: the engine's 8-byte pieces then sit
            // across the host's, which it must still copy whole per dword.
            let shift = 4 * (copy % 2);
            let mut b = SdmaBuilder::new();
            b.copy(dst.va + shift, src.va + shift, size - 8);
            value += 1;
            b.signal(sig.value_addr(0), value, sig.mailbox(&ev), ev.event_id);
            q.submit(&b);
            assert!(wait_signal(&dev, &sig, 0, value, &ev), "copy {copy}");
            let after = round.load(Ordering::Acquire) + 1;
            let mut out = vec![0u8; size as usize];
            // SAFETY: the destination is mapped for `size` bytes; the engine is done with it.
            unsafe { hcq_amd_sys::shared::load(dst.ptr::<u8>(0), &mut out) };
            let copied = &out[shift as usize..(shift + size - 8) as usize];
            for (k, word) in copied.chunks_exact(4).enumerate() {
                let seen = u32::from_le_bytes(word.try_into().unwrap());
                assert!(
                    (before..=after).contains(&seen),
                    "copy {copy} dword {k}: {seen} outside rounds {before}..={after}"
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    q.destroy();
}

/// The fault reports raised since the last call, oldest first.
fn reports(k: &EmuKernel, dev: &Dev) -> Vec<String> {
    std::iter::from_fn(|| k.take_fault_report(dev.gpu_id))
        .map(|r| r.message)
        .collect()
}

#[test]
fn write_linear_stores_its_dwords_and_unmodelled_flags_are_reported() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    mem.write_u32(12, 0x5a5a_5a5a);

    // tinygrad 0.14's copy-queue `write` of a 64-bit value, and a 3-dword write.
    let mut b = SdmaBuilder::new();
    b.raw(&[
        2,
        mem.va as u32,
        (mem.va >> 32) as u32,
        1,
        0x0506_0708,
        0x0102_0304,
    ]);
    b.push(&sdma::Packet::WriteLinear(sdma::WriteLinear {
        flags: 0,
        swap: 0,
        address: mem.va + 16,
        data: vec![7, 8, 9],
    }));
    // Encryption and byte swapping are not modelled: reported, nothing written.
    b.push(&sdma::Packet::WriteLinear(sdma::WriteLinear {
        flags: 1,
        swap: 0,
        address: mem.va + 32,
        data: vec![10],
    }));
    b.push(&sdma::Packet::WriteLinear(sdma::WriteLinear {
        flags: 0,
        swap: 2,
        address: mem.va + 36,
        data: vec![11],
    }));
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    assert_eq!(
        [0, 4, 8, 12].map(|o| mem.read_u32(o)),
        [0x0506_0708, 0x0102_0304, 0, 0x5a5a_5a5a]
    );
    assert_eq!([16, 20, 24, 28].map(|o| mem.read_u32(o)), [7, 8, 9, 0]);
    assert_eq!([32, 36].map(|o| mem.read_u32(o)), [0, 0]);
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r[0].contains("WRITE_LINEAR with header flags 0x1"), "{r:?}");
    assert!(r[1].contains("swap 2 is not modelled"), "{r:?}");

    // Inside an indirect buffer, the length comes from the count dword too.
    let ib = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    let mut inner = Vec::new();
    sdma::WriteLinear {
        flags: 0,
        swap: 0,
        address: mem.va + 64,
        data: vec![21, 22],
    }
    .encode(&mut inner);
    sdma::Fence::new(mem.va + 72, 23).encode(&mut inner);
    for (i, &w) in inner.iter().enumerate() {
        ib.write_u32(4 * i as u64, w);
    }
    let mut b = SdmaBuilder::new();
    b.indirect(ib.va, inner.len() as u32);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    assert_eq!([64, 68, 72].map(|o| mem.read_u32(o)), [21, 22, 23]);
    assert_eq!(reports(&k, &dev), Vec::<String>::new());

    // An INDIRECT packet that does not end on an 8-dword boundary of the ring is refused
    // (amdgpu pads before every one); the engine goes on after it.
    let misaligned = (q.wptr + 24).is_multiple_of(32);
    if misaligned {
        q.put_zeros(4);
    }
    let mut b = SdmaBuilder::new();
    b.indirect(ib.va, inner.len() as u32);
    let mut s = SdmaBuilder::new();
    s.signal(sig.value_addr(0), 3, sig.mailbox(&ev), ev.event_id);
    mem.write_u32(72, 0);
    q.submit_packets(b.packets().chain(s.packets()), false);
    assert!(wait_signal(&dev, &sig, 0, 3, &ev), "the engine went on");
    assert_eq!(mem.read_u32(72), 0, "the indirect buffer ran");
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(
        r[0].contains("not on an 8-dword (32-byte) boundary"),
        "{r:?}"
    );

    // A WRITE whose count dword is past what the doorbell covers is truncated.
    let mut b = SdmaBuilder::new();
    b.raw(&[2, mem.va as u32, 0]);
    q.submit(&b);
    assert!(q.wait_idle(LONG));
    let r = reports(&k, &dev);
    assert!(r.len() == 1 && r[0].contains("truncated"), "{r:?}");
    q.destroy();
}

#[test]
fn register_polls_flush_hdp_and_unmodelled_registers_are_reported() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    write(&mem, &pattern(3, 64));

    let poll = |hdp_flush: bool, func: u8, address: u64, reference: u32, mask: u32| {
        sdma::Packet::PollRegmem(sdma::PollRegmem {
            hdp_flush,
            func,
            mem_poll: false,
            address,
            reference,
            mask,
            interval: 10,
            retry_count: 0xfff,
        })
    };
    let mut b = SdmaBuilder::new();
    // The kernel driver's SDMA HDP flush: DONE's byte address low, REQ's high, sdma0's bit.
    let (req, done) = (0xd20u64 + 0x106, 0xd20u64 + 0x107);
    b.push(&poll(
        true,
        3,
        (done << 2) | ((req << 2) << 32),
        1 << 10,
        1 << 10,
    ));
    // The reference runtime's (always, nothing read).
    b.push(&sdma::Packet::HdpFlush(sdma::HdpFlush::default()));
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    // An unmodelled register: reported, and the engine goes on.
    b.push(&poll(false, 3, 0x4444 << 2, 1, 1));
    // Byte swapping in COPY_LINEAR and CONST_FILL is not modelled: reported, nothing copied.
    b.push(&sdma::Packet::CopyLinear(sdma::CopyLinear {
        extra_info: 0,
        count: 7,
        dst_swap: 0,
        src_swap: 2,
        src: mem.va,
        dst: mem.va + 512,
    }));
    b.push(&sdma::Packet::ConstFill(sdma::ConstFill {
        sw: 1,
        fill_size: 2,
        address: mem.va + 512,
        data: 0x1234_5678,
        count: 7,
    }));
    b.push(&sdma::Packet::ConstFill(sdma::ConstFill {
        sw: 0,
        fill_size: 3,
        address: mem.va + 512,
        data: 0x1234_5678,
        count: 7,
    }));
    // TIMESTAMP_GET (the engine-local counter) is not modelled.
    b.raw(&[
        sdma::header(sdma::OP_TIMESTAMP, sdma::SUBOP_TIMESTAMP_GET, 0),
        mem.va as u32 + 512,
        0,
    ]);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 5, "{r:?}");
    assert!(
        r[0].contains("POLL_REGMEM: register 0x4444 is not modelled"),
        "{r:?}"
    );
    assert!(
        r[1].contains("COPY_LINEAR with byte swapping (src_swap 2"),
        "{r:?}"
    );
    assert!(
        r[2].contains("CONST_FILL with byte swapping (sw 1)"),
        "{r:?}"
    );
    assert!(r[3].contains("CONST_FILL with fill size 3"), "{r:?}");
    assert!(
        r[4].contains("SDMA packet TIMESTAMP_GET (op 13 sub_op 1) is not modelled"),
        "{r:?}"
    );
    assert_eq!(read(&mem)[512..520], [0; 8]);
    q.destroy();
}

#[test]
fn one_copy_linear_moves_more_than_4_mib_and_unmodelled_flags_are_reported() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = create_sdma(&dev, 0x1000);
    // tinygrad 0.14 puts up to 1 GiB in one COPY_LINEAR on SDMA v6 (a 30-bit count).
    let n = MIB4 + 4096 + 12;
    let src = dev.alloc(2 * MIB4, ALLOC_MEM_FLAGS_GTT);
    let dst = dev.alloc(2 * MIB4, ALLOC_MEM_FLAGS_GTT);
    let data = pattern(11, n as usize);
    write(&src, &data);
    let copy = |extra_info: u16, count: u64| {
        sdma::Packet::CopyLinear(sdma::CopyLinear {
            extra_info,
            count: (count - 1) as u32,
            dst_swap: 0,
            src_swap: 0,
            src: src.va,
            dst: dst.va,
        })
    };
    let mut b = SdmaBuilder::new();
    b.push(&copy(0, n));
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    let out = read(&dst);
    assert!(out[..n as usize] == data[..], "the copy differs");
    assert!(out[n as usize..].iter().all(|&x| x == 0));
    assert_eq!(reports(&k, &dev), Vec::<String>::new());

    // Broadcast (two destinations) and TMZ are not modelled: reported, nothing copied over
    // the zeros written first. Cache policy valid (CPV) changes nothing.
    write(&dst, &[0; 64]);
    let mut b = SdmaBuilder::new();
    // A broadcast copy is two dwords longer (a second destination): skipped whole.
    b.raw(&[
        sdma::header(
            sdma::OP_COPY,
            sdma::SUBOP_COPY_LINEAR,
            sdma::copy_flags::BROADCAST,
        ),
        63,
        0,
        src.va as u32,
        (src.va >> 32) as u32,
        dst.va as u32,
        (dst.va >> 32) as u32,
        dst.va as u32 + 128,
        (dst.va >> 32) as u32,
    ]);
    b.push(&copy(sdma::copy_flags::TMZ, 64));
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    assert_eq!(read(&dst)[..64], [0; 64]);
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(
        r[0].contains("COPY_LINEAR with header flags 0x800"),
        "{r:?}"
    );
    assert!(r[1].contains("COPY_LINEAR with header flags 0x4"), "{r:?}");
    let mut b = SdmaBuilder::new();
    b.push(&copy(sdma::copy_flags::CPV, 64));
    b.signal(sig.value_addr(0), 3, sig.mailbox(&ev), ev.event_id);
    q.submit(&b);
    assert!(wait_signal(&dev, &sig, 0, 3, &ev));
    assert_eq!(read(&dst)[..64], data[..64]);
    assert_eq!(reports(&k, &dev), Vec::<String>::new());
    q.destroy();
}
