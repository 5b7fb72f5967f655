//! Compute queues: the command processor executing PM4 rings written by a driver.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::pm4::{self, Pm4Builder};
use hcq_amd_sys::seam::{FaultKind, Syscalls};
use hcq_emu::EmuKernel;

const LONG: Duration = Duration::from_secs(10);

#[test]
fn release_mem_writes_the_signal_and_wakes_wait_events() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);

    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 7, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    // The interrupt signals the event: a blocking wait returns COMPLETE well before its timeout.
    let t = Instant::now();
    assert_eq!(dev.wait_event(ev.event_id, 5000).0, WAIT_RESULT_COMPLETE);
    assert!(t.elapsed() < Duration::from_secs(4));
    assert_eq!(sig.value(0), 7);
    assert!(q.wait_idle(LONG));
    assert_eq!(q.rptr(), q.wptr);

    // Many submissions wrap around the 1024-dword ring.
    for v in 8..200u64 {
        let mut b = Pm4Builder::new();
        b.hdp_flush();
        b.invalidate_cache();
        b.signal(sig.value_addr(0), v, sig.mailbox(&ev), ev.event_id);
        q.submit(&b.words);
        if v % 16 == 0 {
            assert!(wait_signal(&dev, &sig, 0, v, &ev));
        }
    }
    assert!(wait_signal(&dev, &sig, 0, 199, &ev));
    assert!(q.wptr > 1024);

    // 64-bit data and the GPU clock.
    let mut c = GetClockCountersArgs {
        gpu_id: dev.gpu_id,
        ..Default::default()
    };
    ioctl(&k, dev.kfd, IOC_GET_CLOCK_COUNTERS, &mut c).unwrap();
    let mut words = Vec::new();
    pm4::ReleaseMem {
        event_type: pm4::EVENT_CACHE_FLUSH_AND_INV_TS,
        event_index: pm4::EVENT_INDEX_END_OF_PIPE,
        gcr: 0,
        data_sel: pm4::data_sel::DATA_64,
        int_sel: 0,
        dst_sel: 0,
        address: sig.value_addr(1),
        data: 0x1234_5678_9abc_def0,
        int_ctx: 0,
    }
    .encode(&mut words);
    let mut b = Pm4Builder { words };
    b.timestamp(sig.value_addr(2));
    b.signal(sig.value_addr(0), 500, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    assert!(wait_signal(&dev, &sig, 0, 500, &ev));
    assert_eq!(sig.value(1), 0x1234_5678_9abc_def0);
    let ts = sig.value(2);
    let before = c.gpu_clock_counter;
    ioctl(&k, dev.kfd, IOC_GET_CLOCK_COUNTERS, &mut c).unwrap();
    assert!(
        before <= ts && ts <= c.gpu_clock_counter,
        "{before} <= {ts} <= {}",
        c.gpu_clock_counter
    );
    q.destroy();
}

#[test]
fn wait_reg_mem_blocks_until_the_host_writes() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);

    let mut b = Pm4Builder::new();
    b.wait(sig.value_addr(3), 5);
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    assert_eq!(dev.wait_event(ev.event_id, 100).0, WAIT_RESULT_TIMEOUT);
    assert_eq!(sig.value(0), 0);
    sig.set_value(3, 4);
    assert_eq!(dev.wait_event(ev.event_id, 50).0, WAIT_RESULT_TIMEOUT);
    assert_eq!(sig.value(0), 0);
    sig.set_value(3, 5);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));

    // A queue waiting on another queue's signal wakes when that queue writes it.
    let mut q2 = dev.create_queue(0x1000);
    let mut b = Pm4Builder::new();
    b.wait(sig.value_addr(4), 1);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(4), 1, 0, 0);
    q2.submit(&b.words);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));

    // Destroying a queue blocked in WAIT_REG_MEM stops it promptly.
    let mut b = Pm4Builder::new();
    b.wait(sig.value_addr(5), 1);
    q.submit(&b.words);
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    q.destroy();
    q2.destroy();
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn an_unknown_opcode_is_reported_and_the_queue_goes_on() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let hw = dev.create_event(EVENT_HW_EXCEPTION, None);
    let mut q = dev.create_queue(0x1000);

    let mut words = vec![pm4::header(0x99, 2), 1, 2, 3];
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 3, sig.mailbox(&ev), ev.event_id);
    words.extend_from_slice(&b.words);
    q.submit(&words);
    let (result, data) = dev.wait_event(hw.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a hardware-exception event fills in this member of the union.
    let hw_data = unsafe { data.data.hw_exception_data };
    assert_eq!(hw_data.gpu_id, dev.gpu_id);
    assert!(wait_signal(&dev, &sig, 0, 3, &ev));
    let report = k.take_fault_report(dev.gpu_id).expect("a fault report");
    assert_eq!(report.kind, FaultKind::BadCommandPacket, "{report}");
    assert_eq!((report.address, report.pc), (None, None));
    let report = report.message;
    assert!(
        report.contains("PM4 packet AQL_PACKET is not modelled: opcode 0x99")
            && report.contains("ring dword 0"),
        "{report}"
    );
    assert_eq!(k.take_fault_report(dev.gpu_id), None);

    // A malformed known packet (RELEASE_MEM with too short a payload) and a truncated one.
    let mut words = vec![pm4::header(pm4::OP_RELEASE_MEM, 1), 0, 0];
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 4, sig.mailbox(&ev), ev.event_id);
    words.extend_from_slice(&b.words);
    q.submit(&words);
    assert!(wait_signal(&dev, &sig, 0, 4, &ev));
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert_eq!(report.kind, FaultKind::BadCommandPacket, "{report}");
    let report = report.message;
    assert!(report.contains("needs 7"), "{report}");

    // The doorbell says fewer dwords than the packet has.
    let start = q.wptr;
    q.write_words(&[pm4::header(pm4::OP_NOP, 5), 0, 0]);
    q.ring_doorbell(q.wptr);
    assert!(q.wait_idle(LONG));
    assert_eq!(q.rptr(), start + 3);
    assert!(k
        .take_fault_report(dev.gpu_id)
        .unwrap()
        .message
        .contains("truncated"));
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 5, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    assert!(wait_signal(&dev, &sig, 0, 5, &ev));
    q.destroy();
}

#[test]
fn a_cp_access_to_unmapped_memory_raises_a_memory_exception() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mem = dev.create_event(EVENT_MEMORY, None);
    let mut q = dev.create_queue(0x1000);

    // A buffer allocated but not mapped on the GPU is not reachable.
    let hidden = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    dev.unmap(&hidden).unwrap();
    let bad = hidden.va + 0x40;
    let mut b = Pm4Builder::new();
    b.signal(bad, 1, 0, 0);
    b.signal(sig.value_addr(0), 9, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    let (result, data) = dev.wait_event(mem.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a memory-exception event fills in this member of the union.
    let m = unsafe { data.data.memory_exception_data };
    assert_eq!(
        (m.va, m.gpu_id, m.failure.not_present),
        (bad & !0xfff, dev.gpu_id, 1)
    );
    // KFD evicts the process's queues: the signal after the fault never comes.
    assert_eq!(reached_or_evicted(&k, &dev, &sig, 0, 9, &ev), Some(true));
    assert_eq!(sig.value(0), 0);
    assert_eq!(hidden.read_u32(0x40), 0);
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert_eq!(report.kind, FaultKind::MemoryFault, "{report}");
    assert_eq!(report.address, Some(bad), "{report}");
    let report = report.message;
    assert!(report.contains(&format!("{bad:#x}")), "{report}");
    q.destroy();

    // WAIT_REG_MEM on unmapped memory faults instead of waiting forever (another process).
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mem = dev.create_event(EVENT_MEMORY, None);
    let mut q = dev.create_queue(0x1000);
    let mut b = Pm4Builder::new();
    b.wait(0x10_0000, 1);
    b.signal(sig.value_addr(0), 10, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    assert_eq!(dev.wait_event(mem.event_id, 5000).0, WAIT_RESULT_COMPLETE);
    assert_eq!(reached_or_evicted(&k, &dev, &sig, 0, 10, &ev), Some(true));
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert_eq!(
        (report.kind, report.address),
        (FaultKind::MemoryFault, Some(0x10_0000))
    );
    assert!(report.message.contains("0x100000"));
    q.destroy();
}

#[test]
fn queue_creation_is_validated() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let ring = dev.alloc(0x4000, ALLOC_MEM_FLAGS_GTT);
    let gart = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    let areas = compute_queue_areas(&dev);
    let base = CreateQueueArgs {
        ring_base_address: ring.va,
        ring_size: 0x4000,
        gpu_id: dev.gpu_id,
        queue_type: QUEUE_TYPE_COMPUTE,
        queue_percentage: MAX_QUEUE_PERCENTAGE,
        queue_priority: MAX_QUEUE_PRIORITY,
        write_pointer_address: gart.va,
        read_pointer_address: gart.va + 8,
        eop_buffer_address: areas.eop.va,
        eop_buffer_size: GFX1100_EOP_BYTES,
        ctx_save_restore_address: areas.cwsr.va,
        ctx_save_restore_size: GFX1100_CWSR_BYTES,
        ctl_stack_size: GFX1100_CTL_STACK_BYTES,
        ..Default::default()
    };
    let bad = [
        CreateQueueArgs {
            ring_size: 0x3000,
            ..base
        },
        CreateQueueArgs {
            ring_size: 512,
            ..base
        },
        CreateQueueArgs {
            ring_size: 0x8000,
            ..base
        },
        CreateQueueArgs {
            ring_base_address: 0x1000,
            ..base
        },
        CreateQueueArgs {
            read_pointer_address: 0x1000,
            ..base
        },
        CreateQueueArgs {
            write_pointer_address: gart.va + 4,
            ..base
        },
        CreateQueueArgs {
            write_pointer_address: 0x2000,
            ..base
        },
        CreateQueueArgs { gpu_id: 5, ..base },
        CreateQueueArgs {
            queue_type: QUEUE_TYPE_COMPUTE_AQL,
            ..base
        },
        CreateQueueArgs {
            queue_priority: 16,
            ..base
        },
    ];
    for (i, mut a) in bad.into_iter().enumerate() {
        assert_eq!(
            errno_of(ioctl(&k, dev.kfd, IOC_CREATE_QUEUE, &mut a)),
            libc::EINVAL,
            "case {i}"
        );
    }
    let mut a = base;
    ioctl(&k, dev.kfd, IOC_CREATE_QUEUE, &mut a).unwrap();
    let mut b = CreateQueueArgs { ..base };
    ioctl(&k, dev.kfd, IOC_CREATE_QUEUE, &mut b).unwrap();
    assert_ne!(a.queue_id, b.queue_id);
    assert_ne!(a.doorbell_offset, b.doorbell_offset);
    assert_eq!(a.doorbell_offset & !0x1fff, b.doorbell_offset & !0x1fff);
    // Doorbell pages only at a doorbell offset of a known GPU.
    // SAFETY: rejected before anything is mapped.
    let r = unsafe {
        k.mmap(
            std::ptr::null_mut(),
            0x2000,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            dev.kfd,
            a.doorbell_offset & !0x1fff & !(0xffff << 46),
        )
    };
    assert_eq!(errno_of(r), libc::EINVAL);
    // Writes to anything but a mapped doorbell are ignored.
    let mut not_a_doorbell = 0u64;
    // SAFETY: the emulator drops stores outside its doorbell pages without touching memory.
    unsafe { k.write_doorbell(&mut not_a_doorbell, 5) };
    assert_eq!(not_a_doorbell, 0);
    for id in [a.queue_id, b.queue_id] {
        ioctl(
            &k,
            dev.kfd,
            IOC_DESTROY_QUEUE,
            &mut DestroyQueueArgs {
                queue_id: id,
                pad: 0,
            },
        )
        .unwrap();
    }
    assert_eq!(
        errno_of(ioctl(
            &k,
            dev.kfd,
            IOC_DESTROY_QUEUE,
            &mut DestroyQueueArgs {
                queue_id: a.queue_id,
                pad: 0
            }
        )),
        libc::EINVAL
    );
    // Dropping the kernel with a live queue stops its thread.
    let mut c = base;
    ioctl(&k, dev.kfd, IOC_CREATE_QUEUE, &mut c).unwrap();
    drop(k);
}

#[test]
fn indirect_buffers_execute_from_gpu_memory() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let ib = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(1), 11, 0, 0);
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    let write_ib = |words: &[u32]| {
        for (i, &w) in words.iter().enumerate() {
            ib.write_u32(4 * i as u64, w);
        }
    };
    write_ib(&b.words);
    let ib_packet = [
        pm4::header(pm4::OP_INDIRECT_BUFFER, 2),
        ib.va as u32,
        (ib.va >> 32) as u32,
        b.words.len() as u32 | (1 << 23),
    ];
    q.submit(&ib_packet);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    assert_eq!(sig.value(1), 11);
    // Replaying the same buffer again (as a graph does) with a patched value.
    // (Rewritten whole: hcq-amd-sys's SignalPatch points one dword past the data.)
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(1), 11, 0, 0);
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    write_ib(&b.words);
    q.submit(&ib_packet);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    assert_eq!(k.take_fault_report(dev.gpu_id), None);
    q.destroy();
}

#[test]
fn two_gpus_have_separate_page_tables_and_queues() {
    let k = EmuKernel::new(hcq_emu::EmuConfig {
        gpus: 2,
        ..small_config()
    });
    let d0 = Dev::open(&k, 0);
    let d1 = Dev::open(&k, 1);
    assert_ne!(d0.gpu_id, d1.gpu_id);
    let sig = Signals::new(&d0);
    // The signal page and event page are shared by mapping them on the second GPU too.
    let ids = [d1.gpu_id];
    for buf in [&sig.page, &sig.events] {
        let mut m = MapMemoryArgs {
            handle: buf.handle,
            device_ids_array_ptr: ids.as_ptr() as u64,
            n_devices: 1,
            n_success: 0,
        };
        ioctl(&k, d0.kfd, IOC_MAP_MEMORY_TO_GPU, &mut m).unwrap();
    }
    let ev = d0.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mem = d0.create_event(EVENT_MEMORY, None);
    let mut q1 = d1.create_queue(0x1000);
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 5, sig.mailbox(&ev), ev.event_id);
    q1.submit(&b.words);
    assert!(wait_signal(&d0, &sig, 0, 5, &ev));

    // A buffer of GPU 0 that GPU 1 has not mapped is a VM fault on GPU 1.
    let only0 = d0.alloc(0x1000, ALLOC_MEM_FLAGS_VRAM);
    let mut b = Pm4Builder::new();
    b.signal(only0.va, 1, 0, 0);
    b.signal(sig.value_addr(0), 6, sig.mailbox(&ev), ev.event_id);
    q1.submit(&b.words);
    let (result, data) = d0.wait_event(mem.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    // SAFETY: a memory-exception event fills in this member of the union.
    assert_eq!(unsafe { data.data.memory_exception_data }.gpu_id, d1.gpu_id);
    // GPU 1's queues are evicted; GPU 0's are not.
    assert_eq!(reached_or_evicted(&k, &d1, &sig, 0, 6, &ev), Some(true));
    assert!(!k.queues_evicted(d0.gpu_id));
    let mut q0 = d0.create_queue(0x1000);
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 7, sig.mailbox(&ev), ev.event_id);
    q0.submit(&b.words);
    assert!(wait_signal(&d0, &sig, 0, 7, &ev));
    q0.destroy();
    assert!(k.take_fault_report(d1.gpu_id).is_some());
    assert_eq!(k.take_fault_report(d0.gpu_id), None);
    assert_eq!(k.take_fault_report(12345), None);
    q1.destroy();
}

#[test]
fn random_packets_never_hang_the_queue() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let opcodes = [
        pm4::OP_NOP,
        pm4::OP_SET_SH_REG,
        pm4::OP_ACQUIRE_MEM,
        pm4::OP_RELEASE_MEM,
        pm4::OP_WAIT_REG_MEM,
        pm4::OP_DISPATCH_DIRECT,
        pm4::OP_EVENT_WRITE,
        pm4::OP_INDIRECT_BUFFER,
        0x99,
    ];
    // Each round is a process of its own: a VM fault ends the queues of the round it happens in.
    let mut evictions = 0;
    for round in 1..=40u64 {
        let k = EmuKernel::new(small_config());
        let dev = Dev::open(&k, 0);
        let sig = Signals::new(&dev);
        let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
        let mut q = dev.create_queue(0x10000);
        let mut words = Vec::new();
        for _ in 0..8 {
            let r = rand();
            let op = opcodes[(r % opcodes.len() as u64) as usize];
            let payload = 1 + (r >> 8) % 10;
            words.push(pm4::header(op, payload as u32 - 1));
            for _ in 0..payload {
                words.push(rand() as u32);
            }
        }
        let mut b = Pm4Builder::new();
        b.signal(sig.value_addr(0), round, sig.mailbox(&ev), ev.event_id);
        words.extend_from_slice(&b.words);
        q.submit(&words);
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

/// A foreign client rings a doorbell with a plain store, never through `write_doorbell`: the
/// command processor must notice the value in its slot, through any mapping of the doorbell
/// page, from any thread, after any idle time.
#[test]
fn plain_stores_to_the_doorbell_through_any_mapping_are_doorbells() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    // A second mapping of the same doorbell page, where the kernel chooses.
    let base = q.doorbell_offset & !0x1fff;
    // SAFETY: a fresh mapping of the doorbell page.
    let second = unsafe {
        k.mmap(
            std::ptr::null_mut(),
            0x2000,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            dev.kfd,
            base,
        )
    }
    .unwrap();
    let second_slot = (second as u64 + (q.doorbell_offset - base)) as usize;
    assert_ne!(second_slot, q.doorbell as usize);

    for (round, idle_ms) in [(1u64, 0u64), (2, 5), (3, 60), (4, 0), (5, 200)] {
        std::thread::sleep(Duration::from_millis(idle_ms));
        let mut b = Pm4Builder::new();
        b.signal(sig.value_addr(0), round, sig.mailbox(&ev), ev.event_id);
        q.write_words(&b.words);
        let wptr = q.wptr;
        // Odd rounds store through the queue's own mapping, even ones through the second, and
        // from another thread.
        let slot = if round % 2 == 1 {
            q.doorbell as usize
        } else {
            second_slot
        };
        std::thread::spawn(move || {
            // SAFETY: an aligned slot of a doorbell page mapped above and still mapped; the
            // emulator reads it atomically.
            unsafe { std::sync::atomic::AtomicU64::from_ptr(slot as *mut u64) }
                .store(wptr, std::sync::atomic::Ordering::Release);
        })
        .join()
        .unwrap();
        assert!(
            wait_signal(&dev, &sig, 0, round, &ev),
            "round {round} after {idle_ms} ms idle: the store was not seen"
        );
    }
    // SAFETY: the second mapping is ours and no longer used.
    unsafe { k.munmap(second, 0x2000) }.unwrap();
    q.destroy();
}

/// Runs `words` on `q`, then a signal of `value`, and waits for the signal: everything before
/// it has executed.
fn run_then_signal(
    q: &mut Queue,
    dev: &Dev,
    sig: &Signals,
    ev: &CreateEventArgs,
    words: &[u32],
    value: u64,
) {
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), value, sig.mailbox(ev), ev.event_id);
    let mut all = words.to_vec();
    all.extend_from_slice(&b.words);
    q.submit(&all);
    assert!(wait_signal(dev, sig, 0, value, ev), "signal {value}");
}

/// The fault reports raised since the last call, oldest first.
fn reports(k: &EmuKernel, dev: &Dev) -> Vec<String> {
    std::iter::from_fn(|| k.take_fault_report(dev.gpu_id))
        .map(|r| r.message)
        .collect()
}

fn copy_data(src_sel: u8, dst_sel: u8, count_64: bool, src: u64, dst: u64) -> Vec<u32> {
    let mut w = Vec::new();
    pm4::CopyData {
        src_sel,
        dst_sel,
        src_cache_policy: 0,
        count_64,
        write_confirm: true,
        dst_cache_policy: 0,
        src,
        dst,
    }
    .encode(&mut w);
    w
}

#[test]
fn hdp_flushes_on_registers_write_the_request_and_poll_done() {
    use pm4::{copy_dst_sel, copy_src_sel};
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);

    // tinygrad 0.14's memory barrier: request every client's flush on BIF_BX_PF0's REQ (NBIO
    // segment 2 base 0xD20 + 0x106) and wait until DONE >= 0xffffffff.
    let mut words = Vec::new();
    pm4::WaitRegMem {
        mem_space: 0,
        operation: 1,
        function: pm4::CompareFunction::GreaterEqual as u8,
        engine: 0,
        addr_lo: 0xd20 + 0x106,
        addr_hi: 0xd20 + 0x107,
        reference: 0xffff_ffff,
        mask: 0xffff_ffff,
        poll_interval: 4,
    }
    .encode(&mut words);
    // DONE now reads as every bit requested.
    words.extend(copy_data(
        copy_src_sel::REGISTER,
        copy_dst_sel::MEMORY,
        false,
        0xd20 + 0x107,
        mem.va,
    ));
    // hcq's own flush; tinygrad 0.9.0's (the bare offsets, mask 0: not the HDP registers, a
    // wait that passes at once); and a plain poll on DONE.
    let mut b = Pm4Builder::new();
    b.hdp_flush();
    words.extend_from_slice(&b.words);
    pm4::WaitRegMem {
        mem_space: 0,
        operation: 1,
        function: pm4::CompareFunction::Equal as u8,
        engine: 0,
        addr_lo: 0x106,
        addr_hi: 0x107,
        reference: 0,
        mask: 0,
        poll_interval: 0x20,
    }
    .encode(&mut words);
    pm4::WaitRegMem {
        mem_space: 0,
        operation: 0,
        function: pm4::CompareFunction::Equal as u8,
        engine: 0,
        addr_lo: 0xd20 + 0x107,
        addr_hi: 0,
        reference: 1 << 10,
        mask: 1 << 10,
        poll_interval: 4,
    }
    .encode(&mut words);
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 1);
    assert_eq!(mem.read_u32(0), 0xffff_ffff);
    assert_eq!(reports(&k, &dev), Vec::<String>::new());

    // A register the emulator does not model: reported by number, and the queue goes on.
    let mut words = Vec::new();
    pm4::WaitRegMem {
        mem_space: 0,
        operation: 0,
        function: pm4::CompareFunction::Equal as u8,
        engine: 0,
        addr_lo: 0x1234,
        addr_hi: 0,
        reference: 1,
        mask: 1,
        poll_interval: 4,
    }
    .encode(&mut words);
    // Memory space 2 does not exist.
    let mut bad_space = Vec::new();
    pm4::WaitRegMem {
        mem_space: 2,
        operation: 0,
        function: pm4::CompareFunction::Always as u8,
        engine: 0,
        addr_lo: 0,
        addr_hi: 0,
        reference: 0,
        mask: 0,
        poll_interval: 4,
    }
    .encode(&mut bad_space);
    words.extend(bad_space);
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 2);
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(
        r[0].contains("WAIT_REG_MEM poll: register 0x1234 is not modelled"),
        "{r:?}"
    );
    assert!(
        r[1].contains("MEM_SPACE 2 and OPERATION 0 is not modelled"),
        "{r:?}"
    );
    q.destroy();
}

#[test]
fn copy_data_moves_immediates_memory_registers_and_the_clock() {
    use pm4::{copy_dst_sel, copy_src_sel};
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    for i in 0..64 {
        mem.write_u32(4 * i, 0xeeee_0000 + i as u32);
    }
    let at = |offset: u64| mem.va + offset;
    let mut words = Vec::new();
    // Immediate, 32 and 64 bits (the 32-bit form leaves the next dword alone).
    words.extend(copy_data(
        copy_src_sel::IMMEDIATE,
        copy_dst_sel::MEMORY,
        false,
        0x1111_2222_3333_4444,
        at(0),
    ));
    words.extend(copy_data(
        copy_src_sel::IMMEDIATE,
        copy_dst_sel::MEMORY_OBSOLETE,
        true,
        0x5555_6666_7777_8888,
        at(16),
    ));
    // Memory to memory, 32 and 64 bits; the 64-bit form ignores address bits 0..3.
    words.extend(copy_data(
        copy_src_sel::MEMORY,
        copy_dst_sel::MEMORY,
        false,
        at(0),
        at(32),
    ));
    words.extend(copy_data(
        copy_src_sel::MEMORY_OBSOLETE,
        copy_dst_sel::MEMORY,
        true,
        at(16 + 4),
        at(40 + 4),
    ));
    // A register: GRBM_GFX_INDEX set through SET_UCONFIG_REG (uconfig offset 0x200).
    pm4::SetUconfigReg {
        reg: 0x200,
        values: &[0xe000_0000 | (1 << 16)],
    }
    .encode(&mut words);
    words.extend(copy_data(
        copy_src_sel::REGISTER,
        copy_dst_sel::MEMORY,
        false,
        0xc200,
        at(56),
    ));
    // The GPU clock, twice.
    words.extend(copy_data(
        copy_src_sel::GPU_CLOCK_COUNT,
        copy_dst_sel::MEMORY,
        true,
        0,
        at(64),
    ));
    words.extend(copy_data(
        copy_src_sel::GPU_CLOCK_COUNT,
        copy_dst_sel::MEMORY,
        true,
        0,
        at(72),
    ));
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 1);
    assert_eq!(reports(&k, &dev), Vec::<String>::new());
    assert_eq!(
        (mem.read_u32(0), mem.read_u32(4)),
        (0x3333_4444, 0xeeee_0001)
    );
    assert_eq!(
        (mem.read_u32(16), mem.read_u32(20)),
        (0x7777_8888, 0x5555_6666)
    );
    assert_eq!(
        (mem.read_u32(32), mem.read_u32(36)),
        (0x3333_4444, 0xeeee_0009)
    );
    assert_eq!(
        (mem.read_u32(40), mem.read_u32(44)),
        (0x7777_8888, 0x5555_6666)
    );
    assert_eq!(mem.read_u32(56), 0xe001_0000);
    let clock = |o| u64::from(mem.read_u32(o)) | (u64::from(mem.read_u32(o + 4)) << 32);
    assert!(
        clock(64) > 0 && clock(72) >= clock(64),
        "{} {}",
        clock(64),
        clock(72)
    );

    // Selections the emulator does not model are reported by name; nothing is written.
    let mut words = Vec::new();
    words.extend(copy_data(
        copy_src_sel::PERFCOUNTERS,
        copy_dst_sel::MEMORY,
        false,
        0x1234,
        at(128),
    ));
    words.extend(copy_data(
        copy_src_sel::IMMEDIATE,
        copy_dst_sel::GDS,
        false,
        7,
        0,
    ));
    words.extend(copy_data(
        copy_src_sel::IMMEDIATE,
        copy_dst_sel::REGISTER,
        false,
        7,
        0x1234,
    ));
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 2);
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(
        r[0].contains("SRC_SEL 4 (performance counters) is not modelled"),
        "{r:?}"
    );
    assert!(r[1].contains("DST_SEL 3 (GDS) is not modelled"), "{r:?}");
    assert!(r[2].contains("register 0x1234 is not modelled"), "{r:?}");
    assert_eq!(mem.read_u32(128), 0xeeee_0020);
    q.destroy();
}

#[test]
fn write_data_pred_exec_and_set_uconfig_reg() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    let write = |dst_sel: u8, no_increment: bool, offset: u64, data: &[u32]| {
        let mut w = Vec::new();
        pm4::WriteData {
            dst_sel,
            no_increment,
            write_confirm: true,
            cache_policy: 0,
            dst: mem.va + offset,
            data,
        }
        .encode(&mut w);
        w
    };
    let mut words = write(pm4::write_dst_sel::MEMORY, false, 0, &[1, 2, 3]);
    words.extend(write(
        pm4::write_dst_sel::MEMORY_TC_L2,
        true,
        16,
        &[4, 5, 6],
    ));
    // PRED_EXEC for XCC 1 only: the one die here is XCC 0, so the write is skipped; then one
    // selecting XCC 0, which runs.
    let skipped = write(pm4::write_dst_sel::MEMORY, false, 32, &[7]);
    pm4::PredExec {
        exec_count: skipped.len() as u16,
        device_select: 0b10,
    }
    .encode(&mut words);
    words.extend_from_slice(&skipped);
    let taken = write(pm4::write_dst_sel::MEMORY, false, 36, &[8]);
    pm4::PredExec {
        exec_count: taken.len() as u16,
        device_select: 0b11,
    }
    .encode(&mut words);
    words.extend_from_slice(&taken);
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 1);
    assert_eq!(reports(&k, &dev), Vec::<String>::new());
    assert_eq!([0, 4, 8].map(|o| mem.read_u32(o)), [1, 2, 3]);
    assert_eq!([16, 20].map(|o| mem.read_u32(o)), [6, 0]);
    assert_eq!([32, 36].map(|o| mem.read_u32(o)), [0, 8]);

    // GDS, an unmodelled uconfig register and an unmodelled event are reported.
    let mut words = write(pm4::write_dst_sel::GDS, false, 0, &[9]);
    pm4::SetUconfigReg {
        reg: 0x1000,
        values: &[1],
    }
    .encode(&mut words);
    pm4::EventWrite {
        event_type: 0x35,
        event_index: 0,
    }
    .encode(&mut words);
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 2);
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(
        r[0].contains("WRITE_DATA with DST_SEL 3 (GDS) is not modelled"),
        "{r:?}"
    );
    assert!(
        r[1].contains("SET_UCONFIG_REG: register 0xd000 is not modelled"),
        "{r:?}"
    );
    assert!(
        r[2].contains("event type 0x35 (THREAD_TRACE_MARKER) is not modelled"),
        "{r:?}"
    );
    assert_eq!(mem.read_u32(0), 1);
    q.destroy();
}

#[test]
fn release_mem_selections_are_honoured_or_reported() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    let release = |data_sel: u8, dst_sel: u8, int_sel: u8, offset: u64, data: u64| {
        let mut w = Vec::new();
        pm4::ReleaseMem {
            event_type: pm4::EVENT_CACHE_FLUSH_AND_INV_TS,
            event_index: pm4::EVENT_INDEX_END_OF_PIPE,
            gcr: 0,
            data_sel,
            int_sel,
            dst_sel,
            address: mem.va + offset,
            data,
            int_ctx: 0,
        }
        .encode(&mut w);
        w
    };
    use pm4::{data_sel, int_sel, release_dst_sel};
    // 64-bit data to TC_L2 at an address 4 past a qword: written at the qword.
    let mut words = release(
        data_sel::DATA_64,
        release_dst_sel::TC_L2,
        0,
        8 + 4,
        0x0102_0304_0506_0708,
    );
    // tinygrad 0.14's barrier before a timestamp: no data, an interrupt with context 0.
    words.extend(release(
        data_sel::NONE,
        0,
        int_sel::SEND_INT_ON_CONFIRM,
        32,
        0,
    ));
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 1);
    assert_eq!(reports(&k, &dev), Vec::<String>::new());
    assert_eq!(
        [8, 12, 16].map(|o| mem.read_u32(o)),
        [0x0506_0708, 0x0102_0304, 0]
    );
    assert_eq!(mem.read_u32(32), 0);

    // DATA_SEL 4, a write-pointer destination and a conditional interrupt: reported, and
    // nothing written.
    let mut words = release(data_sel::PERFCOUNTER_OR_SYSTEM_CLOCK, 0, 0, 64, 0);
    words.extend(release(
        data_sel::DATA_32,
        release_dst_sel::QUEUE_WRITE_POINTER_REGISTER,
        0,
        72,
        5,
    ));
    words.extend(release(
        data_sel::DATA_32,
        0,
        int_sel::CONDITIONAL_32,
        80,
        6,
    ));
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 2);
    let r = reports(&k, &dev);
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r[0].contains("unsupported DATA_SEL 4"), "{r:?}");
    assert!(r[1].contains("unsupported DST_SEL 2"), "{r:?}");
    assert!(r[2].contains("unsupported INT_SEL 5"), "{r:?}");
    assert_eq!([64, 68, 72, 80].map(|o| mem.read_u32(o)), [0; 4]);

    // An INDIRECT_BUFFER without its VALID bit is not run.
    let ib = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    for (i, w) in release(data_sel::DATA_32, 0, 0, 96, 9)
        .into_iter()
        .enumerate()
    {
        ib.write_u32(4 * i as u64, w);
    }
    let mut words = Vec::new();
    pm4::IndirectBuffer {
        address: ib.va,
        size_dwords: 8,
        chain: false,
        valid: false,
    }
    .encode(&mut words);
    run_then_signal(&mut q, &dev, &sig, &ev, &words, 3);
    let r = reports(&k, &dev);
    assert!(
        r.len() == 1 && r[0].contains("without its VALID bit"),
        "{r:?}"
    );
    assert_eq!(mem.read_u32(96), 0);
    q.destroy();
}
