//! The emulated KFD as Linux 6.12 and Linux 6.6 behave: queue-buffer validation, BOs held by
//! queues, `RUNTIME_ENABLE`, event ages. The expected sizes are worked out by hand from the
//! kernel's formula (`common::GFX1100_*`), not taken from the code under test.

mod common;

use common::*;
use hcq_amd_sys::kfd::*;
use hcq_emu::{EmuConfig, EmuKernel, KfdRules};

fn kernel(rules: KfdRules) -> EmuKernel {
    EmuKernel::new(EmuConfig {
        kernel: rules,
        ..small_config()
    })
}

fn create(dev: &Dev<'_>, a: CreateQueueArgs) -> Result<CreateQueueArgs, i32> {
    let mut a = a;
    match ioctl(dev.k, dev.kfd, IOC_CREATE_QUEUE, &mut a) {
        Ok(()) => Ok(a),
        Err(e) => Err(e.raw_os_error().unwrap()),
    }
}

/// A compute queue valid under every rule set, and the buffers it names.
struct Parts {
    ring: Buf,
    gart: Buf,
    areas: ComputeQueueAreas,
}

fn parts(dev: &Dev<'_>) -> Parts {
    Parts {
        ring: dev.alloc(0x4000, ALLOC_MEM_FLAGS_GTT),
        gart: dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT),
        areas: compute_queue_areas(dev),
    }
}

fn compute(dev: &Dev<'_>, p: &Parts) -> CreateQueueArgs {
    CreateQueueArgs {
        ring_base_address: p.ring.va,
        ring_size: 0x4000,
        gpu_id: dev.gpu_id,
        queue_type: QUEUE_TYPE_COMPUTE,
        queue_percentage: MAX_QUEUE_PERCENTAGE,
        queue_priority: MAX_QUEUE_PRIORITY,
        write_pointer_address: p.gart.va,
        read_pointer_address: p.gart.va + 8,
        eop_buffer_address: p.areas.eop.va,
        eop_buffer_size: GFX1100_EOP_BYTES,
        ctx_save_restore_address: p.areas.cwsr.va,
        ctx_save_restore_size: GFX1100_CWSR_BYTES,
        ctl_stack_size: GFX1100_CTL_STACK_BYTES,
        ..Default::default()
    }
}

#[test]
fn linux_6_12_refuses_queue_buffers_of_the_wrong_size_or_placement() {
    let k = kernel(KfdRules::Linux6_12);
    let dev = Dev::open(&k, 0);
    let p = parts(&dev);
    let good = compute(&dev, &p);
    let big_ring = dev.alloc(0x8000, ALLOC_MEM_FLAGS_GTT);
    let two_pages = dev.alloc(0x2000, ALLOC_MEM_FLAGS_GTT);
    let big_eop = dev.alloc(0x2000, ALLOC_MEM_FLAGS_VRAM);
    let small_cwsr = dev.alloc(u64::from(GFX1100_CWSR_BYTES), ALLOC_MEM_FLAGS_VRAM);
    let cases: Vec<(&str, CreateQueueArgs)> = vec![
        (
            // tinygrad 0.9.0's constant (and hcq's before): the whole buffer as the size.
            "ctx_save_restore_size includes the debugger's memory",
            CreateQueueArgs {
                ctx_save_restore_size: GFX1100_CWSR_BUFFER_BYTES as u32,
                ..good
            },
        ),
        (
            "control stack too small",
            CreateQueueArgs {
                ctl_stack_size: 0x9000,
                ..good
            },
        ),
        (
            "EOP size not the node's",
            CreateQueueArgs {
                eop_buffer_address: big_eop.va,
                eop_buffer_size: 0x2000,
                ..good
            },
        ),
        (
            "EOP buffer larger than its size",
            CreateQueueArgs {
                eop_buffer_address: big_eop.va,
                ..good
            },
        ),
        (
            "CWSR buffer without the debugger's memory",
            CreateQueueArgs {
                ctx_save_restore_address: small_cwsr.va,
                ..good
            },
        ),
        (
            "no CWSR buffer",
            CreateQueueArgs {
                ctx_save_restore_address: 0,
                ..good
            },
        ),
        (
            "CWSR address inside its buffer",
            CreateQueueArgs {
                ctx_save_restore_address: p.areas.cwsr.va + 0x1000,
                ..good
            },
        ),
        (
            "ring smaller than its buffer",
            CreateQueueArgs {
                ring_base_address: big_ring.va,
                ..good
            },
        ),
        (
            "write pointer in a two-page buffer",
            CreateQueueArgs {
                write_pointer_address: two_pages.va,
                ..good
            },
        ),
        (
            "read pointer past the buffer's first page",
            CreateQueueArgs {
                read_pointer_address: two_pages.va + 0x1008,
                ..good
            },
        ),
    ];
    for (what, a) in &cases {
        assert_eq!(create(&dev, *a).err(), Some(libc::EINVAL), "{what}");
    }
    // The sizes KFD computes pass, and so does a queue without an EOP buffer (optional).
    create(&dev, good).unwrap();
    create(
        &dev,
        CreateQueueArgs {
            eop_buffer_address: 0,
            eop_buffer_size: 0,
            ..good
        },
    )
    .unwrap();
    // SDMA queues: the ring and pointers only.
    let sdma = CreateQueueArgs {
        queue_type: QUEUE_TYPE_SDMA,
        eop_buffer_address: 0,
        eop_buffer_size: 0,
        ctx_save_restore_address: 0,
        ctx_save_restore_size: 0,
        ctl_stack_size: 0,
        ..good
    };
    create(&dev, sdma).unwrap();
    let bad_sdma = CreateQueueArgs {
        ring_base_address: big_ring.va,
        ..sdma
    };
    assert_eq!(create(&dev, bad_sdma).err(), Some(libc::EINVAL));

    // Under Linux 6.6 every case above that has its buffers mapped is accepted.
    let old = kernel(KfdRules::Linux6_6);
    let dev = Dev::open(&old, 0);
    let p = parts(&dev);
    let good = compute(&dev, &p);
    let big_ring = dev.alloc(0x8000, ALLOC_MEM_FLAGS_GTT);
    let small_cwsr = dev.alloc(u64::from(GFX1100_CWSR_BYTES), ALLOC_MEM_FLAGS_VRAM);
    for a in [
        CreateQueueArgs {
            ctx_save_restore_size: GFX1100_CWSR_BUFFER_BYTES as u32,
            ..good
        },
        CreateQueueArgs {
            ring_base_address: big_ring.va,
            ..good
        },
        CreateQueueArgs {
            ctx_save_restore_address: small_cwsr.va,
            ctl_stack_size: 0x9000,
            ..good
        },
    ] {
        create(&dev, a).unwrap();
    }
}

#[test]
fn buffers_a_queue_holds_stay_mapped_until_it_is_destroyed() {
    for rules in [KfdRules::Linux6_12, KfdRules::Linux6_6] {
        let k = kernel(rules);
        let dev = Dev::open(&k, 0);
        let p = parts(&dev);
        let q = create(&dev, compute(&dev, &p)).unwrap();
        for buf in [&p.ring, &p.gart, &p.areas.eop, &p.areas.cwsr] {
            let unmapped = dev.unmap(buf);
            match rules {
                KfdRules::Linux6_12 => {
                    assert_eq!(unmapped.unwrap_err().raw_os_error(), Some(libc::EBUSY))
                }
                KfdRules::Linux6_6 => {
                    unmapped.unwrap();
                    dev.map(buf).unwrap();
                }
            }
        }
        // A BO still mapped is never freed (every kernel).
        let free = |b: &Buf| {
            ioctl(
                &k,
                dev.kfd,
                IOC_FREE_MEMORY_OF_GPU,
                &mut FreeMemoryOfGpuArgs { handle: b.handle },
            )
            .map_err(|e| e.raw_os_error().unwrap())
        };
        assert_eq!(free(&p.ring), Err(libc::EBUSY));
        dev.destroy_queue(q.queue_id);
        for buf in [p.ring, p.gart, p.areas.eop, p.areas.cwsr] {
            dev.free(buf);
        }
        assert_eq!(k.live_objects().buffer_objects, 0, "{rules:?}");
    }
}

fn runtime_enable(k: &EmuKernel, dev: &Dev<'_>, mode_mask: u32) -> Result<(), i32> {
    let mut a = RuntimeEnableArgs {
        r_debug: 0,
        mode_mask,
        capabilities_mask: 0,
    };
    ioctl(k, dev.kfd, IOC_RUNTIME_ENABLE, &mut a).map_err(|e| e.raw_os_error().unwrap())
}

#[test]
fn runtime_enable_once_and_before_any_queue() {
    let k = kernel(KfdRules::Linux6_12);
    let dev = Dev::open(&k, 0);
    // Withdrawing is always accepted (tinygrad 0.14 sends mode 0 on every device open).
    runtime_enable(&k, &dev, 0).unwrap();
    runtime_enable(&k, &dev, RUNTIME_ENABLE_MODE_ENABLE).unwrap();
    assert_eq!(
        runtime_enable(&k, &dev, RUNTIME_ENABLE_MODE_ENABLE),
        Err(libc::EBUSY)
    );
    runtime_enable(&k, &dev, 0).unwrap();
    let p = parts(&dev);
    let q = create(&dev, compute(&dev, &p)).unwrap();
    assert_eq!(
        runtime_enable(
            &k,
            &dev,
            RUNTIME_ENABLE_MODE_ENABLE | RUNTIME_ENABLE_MODE_TTMP_SAVE
        ),
        Err(libc::EEXIST)
    );
    dev.destroy_queue(q.queue_id);
    runtime_enable(&k, &dev, RUNTIME_ENABLE_MODE_ENABLE).unwrap();
}

#[test]
fn a_wait_with_an_old_event_age_returns_at_once() {
    let k = kernel(KfdRules::Linux6_12);
    let dev = Dev::open(&k, 0);
    let page = dev.alloc(0x8000, ALLOC_MEM_FLAGS_GTT);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&page));
    let wait = |age: u64| {
        let mut data = [EventData {
            event_id: ev.event_id,
            data: EventDataUnion {
                signal_event_data: SignalEventData {
                    last_event_age: age,
                },
            },
            ..Default::default()
        }];
        let mut w = WaitEventsArgs {
            events_ptr: data.as_mut_ptr() as u64,
            num_events: 1,
            wait_for_all: 1,
            timeout: 0,
            wait_result: 99,
        };
        ioctl(&k, dev.kfd, IOC_WAIT_EVENTS, &mut w).unwrap();
        // SAFETY: integers only.
        (w.wait_result, unsafe {
            data[0].data.signal_event_data.last_event_age
        })
    };
    // A new event is age 1: a caller that saw age 1 waits; age 0 means "not tracked".
    assert_eq!(wait(1), (WAIT_RESULT_TIMEOUT, 1));
    assert_eq!(wait(0), (WAIT_RESULT_TIMEOUT, 0));
    let set = || {
        ioctl(
            &k,
            dev.kfd,
            IOC_SET_EVENT,
            &mut EventIdArgs {
                event_id: ev.event_id,
                pad: 0,
            },
        )
        .unwrap()
    };
    set();
    assert_eq!(wait(1), (WAIT_RESULT_COMPLETE, 2));
    // The signal was consumed: a caller up to date waits, a stale one returns at once.
    assert_eq!(wait(2), (WAIT_RESULT_TIMEOUT, 2));
    assert_eq!(wait(1), (WAIT_RESULT_COMPLETE, 2));
    set();
    set();
    assert_eq!(wait(2), (WAIT_RESULT_COMPLETE, 4));
    // Untracked waits see only the pending signal, as before KFD 1.14.
    assert_eq!(wait(0), (WAIT_RESULT_TIMEOUT, 0));
}
