//! Compute queues: the command processor executing PM4 rings written by a driver.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::pm4::{self, Pm4Builder};
use hcq_amd_sys::seam::Kernel;
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
        (bad, dev.gpu_id, 1)
    );
    assert!(wait_signal(&dev, &sig, 0, 9, &ev));
    assert_eq!(hidden.read_u32(0x40), 0);
    let report = k.take_fault_report(dev.gpu_id).unwrap();
    assert!(report.contains(&format!("{bad:#x}")), "{report}");

    // WAIT_REG_MEM on unmapped memory faults instead of waiting forever.
    let mut b = Pm4Builder::new();
    b.wait(0x10_0000, 1);
    b.signal(sig.value_addr(0), 10, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    assert_eq!(dev.wait_event(mem.event_id, 5000).0, WAIT_RESULT_COMPLETE);
    assert!(wait_signal(&dev, &sig, 0, 10, &ev));
    assert!(k
        .take_fault_report(dev.gpu_id)
        .unwrap()
        .contains("0x100000"));
    q.destroy();
}

#[test]
fn queue_creation_is_validated() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let ring = dev.alloc(0x4000, ALLOC_MEM_FLAGS_GTT);
    let gart = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    let base = CreateQueueArgs {
        ring_base_address: ring.va,
        ring_size: 0x4000,
        gpu_id: dev.gpu_id,
        queue_type: QUEUE_TYPE_COMPUTE,
        queue_percentage: MAX_QUEUE_PERCENTAGE,
        queue_priority: MAX_QUEUE_PRIORITY,
        write_pointer_address: gart.va,
        read_pointer_address: gart.va + 8,
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
    assert!(wait_signal(&d0, &sig, 0, 6, &ev));
    assert!(k.take_fault_report(d1.gpu_id).is_some());
    assert_eq!(k.take_fault_report(d0.gpu_id), None);
    assert_eq!(k.take_fault_report(12345), None);
    q1.destroy();
}

#[test]
fn random_packets_never_stop_the_queue() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x10000);
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
    for round in 1..=40u64 {
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
        assert!(wait_signal(&dev, &sig, 0, round, &ev), "round {round}");
    }
    while k.take_fault_report(dev.gpu_id).is_some() {}
    q.destroy();
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
