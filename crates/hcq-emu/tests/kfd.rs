//! The emulated KFD through the seam: device nodes, topology, ioctls, memory.

mod common;

use std::ffi::c_void;
use std::ptr;

use common::*;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::seam::*;
use hcq_emu::{EmuConfig, EmuKernel, KfdRules, LiveObjects, FIRST_FD};

#[test]
fn topology_lists_a_cpu_node_and_the_gpus() {
    let k = EmuKernel::new(EmuConfig {
        gpus: 2,
        ..small_config()
    });
    let mut nodes = k.read_dir(TOPOLOGY_NODES).unwrap();
    nodes.sort();
    assert_eq!(nodes, ["0", "1", "2"]);
    assert_eq!(
        k.read_to_string(&format!("{TOPOLOGY_NODES}/0/gpu_id"))
            .unwrap()
            .trim(),
        "0"
    );
    let cpu = k
        .read_to_string(&format!("{TOPOLOGY_NODES}/0/properties"))
        .unwrap();
    assert!(cpu.lines().any(|l| l == "simd_count 0"));
    assert!(cpu
        .lines()
        .any(|l| l.starts_with("cpu_cores_count ") && l != "cpu_cores_count 0"));

    let mut ids = Vec::new();
    for (i, node) in [1, 2].into_iter().enumerate() {
        let id: u32 = k
            .read_to_string(&format!("{TOPOLOGY_NODES}/{node}/gpu_id"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_ne!(id, 0);
        ids.push(id);
        let props = k
            .read_to_string(&format!("{TOPOLOGY_NODES}/{node}/properties/"))
            .unwrap();
        let get = |name: &str| -> u64 {
            props
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert_eq!(get("gfx_target_version"), 110000);
        assert_eq!(get("drm_render_minor"), 128 + i as u64);
        assert_eq!(get("local_mem_size"), 256 << 20);
        assert_eq!(get("simd_count"), 192);
        assert_eq!(get("simd_per_cu"), 2);
        assert_eq!(get("max_waves_per_simd"), 16);
        assert_eq!(get("max_slots_scratch_cu"), 32);
        let bank = k
            .read_to_string(&format!("{TOPOLOGY_NODES}/{node}/mem_banks/0/properties"))
            .unwrap();
        assert!(bank
            .lines()
            .any(|l| l == format!("size_in_bytes {}", 256u64 << 20)));
    }
    assert_ne!(ids[0], ids[1]);
    assert_eq!(k.gpu_ids(), ids);

    for bad in [
        "/sys/devices/virtual/kfd/kfd/topology/nodes/3/gpu_id",
        "/sys/devices/virtual/kfd/kfd/topology/nodes/01/gpu_id",
        "/sys/devices/virtual/kfd/kfd/topology/nodes/1/nope",
        "/etc/passwd",
    ] {
        assert_eq!(errno_of(k.read_to_string(bad)), libc::ENOENT, "{bad}");
    }
    assert_eq!(
        errno_of(k.read_dir("/sys/devices/virtual/kfd/kfd/topology/nodes/9")),
        libc::ENOENT
    );
}

#[test]
fn device_nodes_and_request_validation() {
    let k = EmuKernel::new(small_config());
    let kfd = k.open("/dev/kfd").unwrap();
    let drm = k.open("/dev/dri/renderD128").unwrap();
    assert!(kfd >= FIRST_FD && drm >= FIRST_FD && kfd != drm);
    assert_eq!(errno_of(k.open("/dev/dri/renderD129")), libc::ENOENT);
    assert_eq!(errno_of(k.open("/dev/null")), libc::ENOENT);

    let mut v = GetVersionArgs::default();
    ioctl(&k, kfd, IOC_GET_VERSION, &mut v).unwrap();
    assert_eq!((v.major_version, v.minor_version), (1, 16));
    let old = EmuKernel::new(EmuConfig {
        kernel: KfdRules::Linux6_6,
        ..small_config()
    });
    let old_kfd = old.open("/dev/kfd").unwrap();
    ioctl(&old, old_kfd, IOC_GET_VERSION, &mut v).unwrap();
    assert_eq!((v.major_version, v.minor_version), (1, 14));

    assert_eq!(errno_of(ioctl(&k, 3, IOC_GET_VERSION, &mut v)), libc::EBADF);
    assert_eq!(
        errno_of(ioctl(&k, FIRST_FD + 1000, IOC_GET_VERSION, &mut v)),
        libc::EBADF
    );
    // KFD's numbers mean other requests to the render node (DRM's own, not modelled).
    assert_eq!(
        errno_of(ioctl(&k, drm, IOC_GET_VERSION, &mut v)),
        libc::EINVAL
    );
    // An unknown request number (the size and type rules: the test below).
    assert_eq!(
        errno_of(ioctl(
            &k,
            kfd,
            (IOC_GET_VERSION.request() & !0xff) | 0x7e,
            &mut v
        )),
        libc::EINVAL
    );
    // SAFETY: a null argument is rejected before anything is read.
    let r = unsafe { k.ioctl(kfd, IOC_GET_VERSION.request(), ptr::null_mut()) };
    assert_eq!(errno_of(r), libc::EFAULT);

    // ACQUIRE_VM wants the render node of that GPU.
    let gpu_id = k.gpu_ids()[0];
    assert_eq!(
        errno_of(ioctl(
            &k,
            kfd,
            IOC_ACQUIRE_VM,
            &mut AcquireVmArgs {
                drm_fd: kfd as u32,
                gpu_id
            }
        )),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(ioctl(
            &k,
            kfd,
            IOC_ACQUIRE_VM,
            &mut AcquireVmArgs {
                drm_fd: drm as u32,
                gpu_id: 7
            }
        )),
        libc::EINVAL
    );
    ioctl(
        &k,
        kfd,
        IOC_ACQUIRE_VM,
        &mut AcquireVmArgs {
            drm_fd: drm as u32,
            gpu_id,
        },
    )
    .unwrap();

    let mut c = GetClockCountersArgs {
        gpu_id,
        ..Default::default()
    };
    ioctl(&k, kfd, IOC_GET_CLOCK_COUNTERS, &mut c).unwrap();
    let first = c.gpu_clock_counter;
    std::thread::sleep(std::time::Duration::from_millis(10));
    ioctl(&k, kfd, IOC_GET_CLOCK_COUNTERS, &mut c).unwrap();
    let ticks = c.gpu_clock_counter - first;
    assert!(
        (1_000_000..5_000_000).contains(&ticks),
        "100 MHz clock advanced {ticks} ticks in 10 ms"
    );
    assert_eq!(c.system_clock_freq, 1_000_000_000);
    k.close(drm);
    k.close(kfd);
    assert_eq!(
        errno_of(ioctl(&k, kfd, IOC_GET_VERSION, &mut v)),
        libc::EBADF
    );
}

fn available(dev: &Dev) -> u64 {
    let mut a = GetAvailableMemoryArgs {
        gpu_id: dev.gpu_id,
        ..Default::default()
    };
    ioctl(dev.k, dev.kfd, IOC_AVAILABLE_MEMORY, &mut a).unwrap();
    a.available
}

#[test]
fn vram_gtt_and_userptr_buffers() {
    let k = EmuKernel::new(EmuConfig {
        vram_bytes: 64 << 20,
        ..small_config()
    });
    let dev = Dev::open(&k, 0);
    assert_eq!(available(&dev), 64 << 20);

    let vram = dev.alloc(1 << 20, ALLOC_MEM_FLAGS_VRAM);
    assert_eq!(available(&dev), 63 << 20);
    vram.write_u32(0, 0xdead_beef);
    vram.write_u32((1 << 20) - 4, 7);
    assert_eq!(vram.read_u32(0), 0xdead_beef);
    let gtt = dev.alloc(0x3000, ALLOC_MEM_FLAGS_GTT);
    gtt.write_u32(0x2ffc, 1);
    let user = dev.alloc(0x2000, ALLOC_MEM_FLAGS_USERPTR);
    user.write_u32(4, 5);
    assert_ne!(vram.handle, gtt.handle);
    assert_ne!(vram.mmap_offset, gtt.mmap_offset);

    // VRAM beyond the configured size.
    assert_eq!(
        errno_of(dev.try_alloc(64 << 20, ALLOC_MEM_FLAGS_VRAM)),
        libc::ENOMEM
    );
    let big = dev.alloc(63 << 20, ALLOC_MEM_FLAGS_VRAM);
    assert_eq!(available(&dev), 0);
    dev.free(big);
    assert_eq!(available(&dev), 63 << 20);

    // Bad requests.
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: vram.va,
        size: 0x1000,
        gpu_id: dev.gpu_id,
        flags: ALLOC_MEM_FLAGS_GTT,
        ..Default::default()
    };
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a)),
        libc::EINVAL,
        "overlap"
    );
    // SAFETY: a fresh reservation.
    let res = unsafe {
        k.mmap(
            ptr::null_mut(),
            0x4000,
            PROT_NONE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
            -1,
            0,
        )
    }
    .unwrap() as u64;
    a.va_addr = res + 8;
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a)),
        libc::EINVAL,
        "unaligned"
    );
    a.va_addr = res;
    a.size = 0;
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a)),
        libc::EINVAL,
        "zero size"
    );
    a.size = 0x1000;
    a.flags = ALLOC_MEM_FLAGS_VRAM | ALLOC_MEM_FLAGS_GTT;
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a)),
        libc::EINVAL,
        "two domains"
    );
    a.flags = ALLOC_MEM_FLAGS_GTT;
    a.gpu_id = 1;
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a)),
        libc::EINVAL,
        "bad gpu"
    );
    // A live CPU mapping is not a reservation: backing must not replace it.
    a.gpu_id = dev.gpu_id;
    a.va_addr = user.va;
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a)),
        libc::EINVAL,
        "not a reservation"
    );
    // SAFETY: our reservation.
    unsafe { k.munmap(res as usize as *mut c_void, 0x4000) }.unwrap();

    // Render-node mmap must name a live buffer of that GPU.
    // SAFETY: rejected before anything is mapped.
    let r = unsafe {
        k.mmap(
            ptr::null_mut(),
            0x1000,
            PROT_READ,
            MAP_SHARED,
            dev.drm,
            12345,
        )
    };
    assert_eq!(errno_of(r), libc::EINVAL);
    // A second view of a buffer may go anywhere but over another buffer's memory.
    // SAFETY: rejected before anything is mapped.
    let r = unsafe {
        k.mmap(
            (vram.va + 0x1000) as usize as *mut c_void,
            0x1000,
            PROT_READ,
            MAP_SHARED | MAP_FIXED,
            dev.drm,
            gtt.mmap_offset,
        )
    };
    assert_eq!(errno_of(r), libc::EINVAL);

    // MAP with a bad gpu id stops at it and reports progress.
    let ids = [dev.gpu_id, 99];
    let mut m = MapMemoryArgs {
        handle: gtt.handle,
        device_ids_array_ptr: ids.as_ptr() as u64,
        n_devices: 2,
        n_success: 0,
    };
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_MAP_MEMORY_TO_GPU, &mut m)),
        libc::EINVAL
    );
    assert_eq!(m.n_success, 1);
    let mut m = MapMemoryArgs {
        handle: 0x777,
        device_ids_array_ptr: ids.as_ptr() as u64,
        n_devices: 1,
        n_success: 0,
    };
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_MAP_MEMORY_TO_GPU, &mut m)),
        libc::EINVAL
    );

    // Freeing: unknown handles fail; the memory goes away; the address range is released.
    assert_eq!(
        errno_of(ioctl(
            &k,
            dev.kfd,
            IOC_FREE_MEMORY_OF_GPU,
            &mut FreeMemoryOfGpuArgs { handle: 0x777 }
        )),
        libc::EINVAL
    );
    let user_va = user.va;
    dev.free(vram);
    dev.free(gtt);
    dev.free(user);
    assert_eq!(available(&dev), 64 << 20);
    // The USERPTR memory was unmapped through the seam and so is gone now; a fresh buffer can
    // take the same address.
    // SAFETY: a fresh reservation at a hint.
    let again = unsafe {
        k.mmap(
            user_va as usize as *mut c_void,
            0x1000,
            PROT_NONE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
            -1,
            0,
        )
    }
    .unwrap();
    // SAFETY: ours.
    unsafe { k.munmap(again, 0x1000) }.unwrap();
}

#[test]
fn munmap_of_a_live_buffer_keeps_its_memory_for_the_gpu() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let gtt = dev.alloc(0x2000, ALLOC_MEM_FLAGS_GTT);
    gtt.write_u32(0, 42);
    // The driver drops its CPU view; the buffer is still live and mapped on the GPU.
    // SAFETY: the CPU view is not used afterwards by the host side of the test.
    unsafe { k.munmap(gtt.va as usize as *mut c_void, 0x2000) }.unwrap();
    // An anonymous MAP_FIXED over memory a live buffer holds is refused.
    // SAFETY: refused before anything is mapped.
    let r = unsafe {
        k.mmap(
            gtt.va as usize as *mut c_void,
            0x1000,
            PROT_NONE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
            -1,
            0,
        )
    };
    assert_eq!(errno_of(r), libc::EINVAL);
    // Mapping the CPU view again shows the same contents.
    // SAFETY: the buffer's own address.
    let p = unsafe {
        k.mmap(
            gtt.va as usize as *mut c_void,
            0x2000,
            PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_FIXED,
            dev.drm,
            gtt.mmap_offset,
        )
    }
    .unwrap();
    assert_eq!(p as u64, gtt.va);
    assert_eq!(gtt.read_u32(0), 42);
    dev.free(gtt);
}

#[test]
fn events_set_reset_wait_and_destroy() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let page = dev.alloc(0x8000, ALLOC_MEM_FLAGS_GTT);
    let e1 = dev.create_event(EVENT_SIGNAL, Some(&page));
    let e2 = dev.create_event(EVENT_SIGNAL, None);
    assert_ne!(e1.event_id, e2.event_id);
    assert_eq!(e1.event_slot_index, e1.event_id);
    // The slot of a fresh event reads as unsignaled.
    assert_eq!(
        page.atomic_u64(8 * u64::from(e1.event_slot_index))
            .load(std::sync::atomic::Ordering::SeqCst),
        u64::MAX
    );

    // Poll and timeout.
    let t = std::time::Instant::now();
    assert_eq!(dev.wait_event(e1.event_id, 0).0, WAIT_RESULT_TIMEOUT);
    assert_eq!(dev.wait_event(e1.event_id, 50).0, WAIT_RESULT_TIMEOUT);
    assert!(t.elapsed() >= std::time::Duration::from_millis(50));

    // Set wakes a waiter on another thread; auto-reset consumes it.
    std::thread::scope(|s| {
        let h = s.spawn(|| dev.wait_event(e1.event_id, 5000).0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        ioctl(
            &k,
            dev.kfd,
            IOC_SET_EVENT,
            &mut EventIdArgs {
                event_id: e1.event_id,
                pad: 0,
            },
        )
        .unwrap();
        assert_eq!(h.join().unwrap(), WAIT_RESULT_COMPLETE);
    });
    assert_eq!(dev.wait_event(e1.event_id, 0).0, WAIT_RESULT_TIMEOUT);
    ioctl(
        &k,
        dev.kfd,
        IOC_SET_EVENT,
        &mut EventIdArgs {
            event_id: e1.event_id,
            pad: 0,
        },
    )
    .unwrap();
    ioctl(
        &k,
        dev.kfd,
        IOC_RESET_EVENT,
        &mut EventIdArgs {
            event_id: e1.event_id,
            pad: 0,
        },
    )
    .unwrap();
    assert_eq!(dev.wait_event(e1.event_id, 0).0, WAIT_RESULT_TIMEOUT);

    // Wait for any / all of two.
    ioctl(
        &k,
        dev.kfd,
        IOC_SET_EVENT,
        &mut EventIdArgs {
            event_id: e2.event_id,
            pad: 0,
        },
    )
    .unwrap();
    let mut data = [
        EventData {
            event_id: e1.event_id,
            ..Default::default()
        },
        EventData {
            event_id: e2.event_id,
            ..Default::default()
        },
    ];
    let mut w = WaitEventsArgs {
        events_ptr: data.as_mut_ptr() as u64,
        num_events: 2,
        wait_for_all: 1,
        timeout: 10,
        wait_result: 9,
    };
    ioctl(&k, dev.kfd, IOC_WAIT_EVENTS, &mut w).unwrap();
    assert_eq!(w.wait_result, WAIT_RESULT_TIMEOUT);
    ioctl(
        &k,
        dev.kfd,
        IOC_SET_EVENT,
        &mut EventIdArgs {
            event_id: e2.event_id,
            pad: 0,
        },
    )
    .unwrap();
    w.wait_for_all = 0;
    ioctl(&k, dev.kfd, IOC_WAIT_EVENTS, &mut w).unwrap();
    assert_eq!(w.wait_result, WAIT_RESULT_COMPLETE);

    // Unknown ids, and the event page cannot be freed.
    let mut bad = [EventData {
        event_id: 999,
        ..Default::default()
    }];
    let mut w = WaitEventsArgs {
        events_ptr: bad.as_mut_ptr() as u64,
        num_events: 1,
        wait_for_all: 1,
        timeout: 0,
        wait_result: 0,
    };
    assert_eq!(
        errno_of(ioctl(&k, dev.kfd, IOC_WAIT_EVENTS, &mut w)),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(ioctl(
            &k,
            dev.kfd,
            IOC_SET_EVENT,
            &mut EventIdArgs {
                event_id: 999,
                pad: 0
            }
        )),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(ioctl(
            &k,
            dev.kfd,
            IOC_FREE_MEMORY_OF_GPU,
            &mut FreeMemoryOfGpuArgs {
                handle: page.handle
            }
        )),
        libc::EPERM
    );

    // Destroying an event wakes its waiters with a failure.
    std::thread::scope(|s| {
        let h = s.spawn(|| dev.wait_event(e2.event_id, u32::MAX).0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        ioctl(
            &k,
            dev.kfd,
            IOC_DESTROY_EVENT,
            &mut DestroyEventArgs {
                event_id: e2.event_id,
                pad: 0,
            },
        )
        .unwrap();
        assert_eq!(h.join().unwrap(), WAIT_RESULT_FAIL);
    });
    let hw = dev.create_event(EVENT_HW_EXCEPTION, None);
    let mem = dev.create_event(EVENT_MEMORY, None);
    assert!(hw.event_id >= SIGNAL_EVENT_LIMIT && mem.event_id > hw.event_id);
    assert_eq!(
        errno_of(ioctl(
            &k,
            dev.kfd,
            IOC_SET_EVENT,
            &mut EventIdArgs {
                event_id: hw.event_id,
                pad: 0
            }
        )),
        libc::EINVAL
    );
}

/// `kfd_ioctl` finds a request by its number alone and reconciles sizes: it reads the
/// caller's bytes (zero-extending a shorter, older struct), runs, and writes back as many bytes
/// as the caller encoded. The model below is that rule written out independently.
#[test]
fn requests_are_found_by_number_and_sizes_are_reconciled_as_kfd_does() {
    let k = EmuKernel::new(small_config());
    let kfd = k.open("/dev/kfd").unwrap();
    const SIZE_FIELD: u64 = 0x3fff << 16;
    let with_size = |request: u64, size: u64| (request & !SIZE_FIELD) | (size << 16);

    // GET_VERSION (_IOR, 8 bytes) encoded with 0, 4, 8, 16 and 100 bytes: exactly that many
    // come back, the version first and zeros after it; nothing beyond is touched.
    for size in [0usize, 4, 8, 16, 100] {
        let mut arg = [0xa5u8; 128];
        ioctl(
            &k,
            kfd,
            with_size(IOC_GET_VERSION.request(), size as u64),
            &mut arg,
        )
        .unwrap();
        let mut want = [0xa5u8; 128];
        let mut reply = [0u8; 100];
        reply[..4].copy_from_slice(&1u32.to_le_bytes());
        reply[4..8].copy_from_slice(&16u32.to_le_bytes());
        want[..size].copy_from_slice(&reply[..size]);
        assert_eq!(arg, want, "GET_VERSION with {size} bytes");
    }

    // Neither the type byte nor the direction bits select anything: 0x80085401 (TCGETS's
    // encoding of number 1) is GET_VERSION to KFD.
    for request in [
        0x8008_5401,
        (IOC_GET_VERSION.request() & !(3 << 30)) | (3 << 30),
        (IOC_GET_VERSION.request() & !(3 << 30)) | (1 << 30),
    ] {
        let mut v = GetVersionArgs::default();
        ioctl(&k, kfd, request, &mut v).unwrap();
        assert_eq!((v.major_version, v.minor_version), (1, 16), "{request:#x}");
    }

    // GET_CLOCK_COUNTERS (_IOWR, 40 bytes) from a newer header with 8 more bytes: the tail
    // comes back as the caller wrote it.
    let drm = k.open("/dev/dri/renderD128").unwrap();
    let gpu_id = k.gpu_ids()[0];
    ioctl(
        &k,
        kfd,
        IOC_ACQUIRE_VM,
        &mut AcquireVmArgs {
            drm_fd: drm as u32,
            gpu_id,
        },
    )
    .unwrap();
    let mut arg = [0xa5u8; 64];
    arg[32..36].copy_from_slice(&gpu_id.to_le_bytes());
    ioctl(
        &k,
        kfd,
        with_size(IOC_GET_CLOCK_COUNTERS.request(), 48),
        &mut arg,
    )
    .unwrap();
    let word = |i: usize| u64::from_le_bytes(arg[8 * i..8 * i + 8].try_into().unwrap());
    assert!(word(0) > 0 && word(3) > 0, "counters {:?}", &arg[..40]);
    assert_eq!(&arg[32..36], &gpu_id.to_le_bytes());
    assert!(arg[40..].iter().all(|&b| b == 0xa5), "{:?}", &arg[40..]);

    // Numbers KFD does not define are EINVAL, and the argument is left alone.
    for nr in [0x00, 0x7e, 0xff] {
        let mut arg = [0xa5u8; 64];
        assert_eq!(
            errno_of(ioctl(
                &k,
                kfd,
                (IOC_ACQUIRE_VM.request() & !0xff) | nr,
                &mut arg
            )),
            libc::EINVAL,
            "number {nr:#x}"
        );
        assert!(arg.iter().all(|&b| b == 0xa5));
    }
}

#[test]
fn closing_the_last_kfd_descriptor_reclaims_what_the_process_left() {
    let k = EmuKernel::new(small_config());
    assert!(k.live_objects().is_empty());
    let dev = Dev::open(&k, 0);
    let vram = dev.alloc(0x4000, ALLOC_MEM_FLAGS_VRAM);
    let page = dev.alloc(0x8000, ALLOC_MEM_FLAGS_GTT);
    let signal = dev.create_event(EVENT_SIGNAL, Some(&page));
    let memory = dev.create_event(EVENT_MEMORY, None);
    let q = dev.create_queue_of(QUEUE_TYPE_COMPUTE, 0x1000);
    let live = k.live_objects();
    assert_eq!(
        live,
        LiveObjects {
            buffer_objects: 6,
            gpu_mappings: 6,
            host_ranges: 6,
            doorbell_mappings: 1,
            doorbell_regions: 1,
            queues: 1,
            events: 2,
            event_pages: 1,
            file_descriptors: 2,
            acquired_vms: 1,
        }
    );
    // The event page cannot be freed; the rest is released by the process itself.
    let free = |handle| {
        errno_of(ioctl(
            &k,
            dev.kfd,
            IOC_FREE_MEMORY_OF_GPU,
            &mut FreeMemoryOfGpuArgs { handle },
        ))
    };
    assert_eq!(free(page.handle), libc::EPERM);
    dev.destroy_queue(q.queue_id);
    for id in [signal.event_id, memory.event_id] {
        ioctl(
            &k,
            dev.kfd,
            IOC_DESTROY_EVENT,
            &mut DestroyEventArgs {
                event_id: id,
                pad: 0,
            },
        )
        .unwrap();
    }
    dev.free(q.ring);
    dev.free(q.gart);
    let areas = q.areas.unwrap();
    dev.free(areas.eop);
    dev.free(areas.cwsr);
    // The VRAM buffer is left for the kernel, as is the event page's memory (unmapped by
    // the process).
    dev.unmap(&page).unwrap();
    // SAFETY: the CPU views of buffers this test no longer uses, and the queue's doorbell page.
    unsafe {
        k.munmap(page.va as usize as *mut c_void, page.size as usize)
            .unwrap();
        k.munmap(vram.va as usize as *mut c_void, vram.size as usize)
            .unwrap();
        // The page the kernel placed (4 KiB aligned, not necessarily 8 KiB).
        let page = q.doorbell as u64 - (q.doorbell_offset & 0x1fff);
        k.munmap(page as usize as *mut c_void, 0x2000).unwrap();
    }
    k.close(dev.drm);
    // Another descriptor of /dev/kfd keeps the process's context alive.
    let second = k.open("/dev/kfd").unwrap();
    k.close(dev.kfd);
    assert_eq!(k.live_objects().buffer_objects, 2);
    assert_eq!(k.last_reclaimed(), LiveObjects::default());
    k.close(second);
    assert!(k.live_objects().is_empty(), "{:?}", k.live_objects());
    assert_eq!(
        k.last_reclaimed(),
        LiveObjects {
            buffer_objects: 2,
            gpu_mappings: 1,
            host_ranges: 2,
            event_pages: 1,
            acquired_vms: 1,
            ..LiveObjects::default()
        }
    );
    // A new process context starts afresh: a new VM binding and a new event page.
    let dev = Dev::open(&k, 0);
    let page = dev.alloc(0x8000, ALLOC_MEM_FLAGS_GTT);
    let signal = dev.create_event(EVENT_SIGNAL, Some(&page));
    assert_eq!(signal.event_slot_index, 1);
    dev.unmap(&page).unwrap();
    // SAFETY: the event page's CPU view, no longer used.
    unsafe { k.munmap(page.va as usize as *mut c_void, page.size as usize) }.unwrap();
    k.close(dev.drm);
    k.close(dev.kfd);
    assert!(k.live_objects().is_empty(), "{:?}", k.live_objects());
}
