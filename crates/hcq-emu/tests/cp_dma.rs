//! CP DMA (`DMA_DATA`) on the emulated compute queue: copies and fills checked byte by byte
//! against host computations, `CP_SYNC` and the order DMAs land in, and the reports for what
//! is not modelled.

mod common;

use std::ffi::c_void;
use std::ptr;

use common::*;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::pm4::{self, dma_dst_sel, dma_src_sel, DmaData, Pm4Builder};
use hcq_amd_sys::seam::*;
use hcq_core::{FaultKind, FaultReport};
use hcq_emu::EmuKernel;

/// Runs `words` on `q`, then a signal of `value`, and waits for it.
fn run(q: &mut Queue, dev: &Dev, sig: &Signals, ev: &CreateEventArgs, words: &[u32], value: u64) {
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), value, sig.mailbox(ev), ev.event_id);
    let mut all = words.to_vec();
    all.extend_from_slice(&b.words);
    q.submit(&all);
    assert!(wait_signal(dev, sig, 0, value, ev), "signal {value}");
    assert!(q.wait_idle(std::time::Duration::from_secs(10)));
}

fn bytes(buf: &Buf, offset: u64, n: usize) -> Vec<u8> {
    (0..n)
        // SAFETY: inside the test's mapped buffer; the queue is idle.
        .map(|i| unsafe { ptr::read_volatile(buf.ptr::<u8>(offset + i as u64)) })
        .collect()
}

fn fill_host(buf: &Buf, seed: u32) -> Vec<u8> {
    let mut x = seed;
    let data: Vec<u8> = (0..buf.size)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    for (i, &b) in data.iter().enumerate() {
        // SAFETY: inside the test's mapped buffer; no queue touches it now.
        unsafe { ptr::write_volatile(buf.ptr::<u8>(i as u64), b) };
    }
    data
}

fn dma(d: DmaData) -> Vec<u32> {
    let mut w = Vec::new();
    d.encode(&mut w);
    w
}

/// Two GTT buffers of one page each at consecutive GPU addresses (the driver picks the
/// address; KFD only needs it to be a reservation of ours).
fn adjacent_pair(dev: &Dev) -> (Buf, Buf) {
    // SAFETY: a fresh reservation at an address the kernel picks.
    let base = unsafe {
        dev.k.mmap(
            ptr::null_mut(),
            0x2000,
            PROT_NONE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
            -1,
            0,
        )
    }
    .unwrap() as u64;
    let one = |va: u64| {
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: va,
            size: 0x1000,
            gpu_id: dev.gpu_id,
            flags: ALLOC_MEM_FLAGS_GTT | ALLOC_MEM_FLAGS_WRITABLE | ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
            ..Default::default()
        };
        ioctl(dev.k, dev.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a).unwrap();
        // SAFETY: replaces our own reservation with the buffer's CPU view.
        let p = unsafe {
            dev.k.mmap(
                va as usize as *mut c_void,
                0x1000,
                PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_FIXED,
                dev.drm,
                a.mmap_offset,
            )
        }
        .unwrap();
        assert_eq!(p as u64, va);
        let buf = Buf {
            va,
            size: 0x1000,
            handle: a.handle,
            mmap_offset: a.mmap_offset,
            guard: 0, // the pair shares one reservation, freed page by page
        };
        dev.map(&buf).unwrap();
        buf
    };
    (one(base), one(base + 0x1000))
}

#[test]
fn dma_data_copies_and_fills_byte_exact() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x4000);
    let size = (3 << 20) + 0x3000;
    let src = dev.alloc(size, ALLOC_MEM_FLAGS_GTT);
    let dst = dev.alloc(size, ALLOC_MEM_FLAGS_GTT);
    let data = fill_host(&src, 1);
    let mut expect = fill_host(&dst, 2);
    let mut v = 0;
    let mut next = || {
        v += 1;
        v
    };

    // The builder's copy (two full chunks and a tail), at unaligned offsets.
    let (from, to, n) = (3u64, 1001u64, (2 << 20) + 4097u64);
    let mut b = Pm4Builder::new();
    b.copy(dst.va + to, src.va + from, n);
    run(&mut q, &dev, &sig, &ev, &b.words, next());
    expect[to as usize..(to + n) as usize]
        .copy_from_slice(&data[from as usize..(from + n) as usize]);
    assert_eq!(bytes(&dst, 0, size as usize), expect);

    // Each source and destination select that means memory, and a fill from the packet's data.
    for (src_sel, dst_sel) in [
        (dma_src_sel::ADDRESS, dma_dst_sel::ADDRESS),
        (dma_src_sel::ADDRESS_TC_L2, dma_dst_sel::ADDRESS),
        (dma_src_sel::ADDRESS, dma_dst_sel::ADDRESS_TC_L2),
    ] {
        let (from, to, n) = (
            77u64 + u64::from(src_sel),
            5000u64 + u64::from(dst_sel),
            333u64,
        );
        let mut d = DmaData::copy(dst.va + to, src.va + from, n as u32, true);
        (d.src_sel, d.dst_sel) = (src_sel, dst_sel);
        run(&mut q, &dev, &sig, &ev, &dma(d), next());
        expect[to as usize..(to + n) as usize]
            .copy_from_slice(&data[from as usize..(from + n) as usize]);
    }
    let (to, n, value) = (0x2_0001u64, 4099u64, 0xaabb_ccddu32);
    let mut d = DmaData::copy(dst.va + to, u64::from(value), n as u32, true);
    d.src_sel = dma_src_sel::DATA;
    run(&mut q, &dev, &sig, &ev, &dma(d), next());
    for i in 0..n as usize {
        expect[to as usize + i] = value.to_le_bytes()[i % 4];
    }
    assert_eq!(bytes(&dst, 0, size as usize), expect);

    // A fixed source dword repeated; a fixed destination dword left with the last one.
    let mut d = DmaData::copy(dst.va + 0x3_0000, src.va + 0x40, 64, true);
    d.src_no_increment = true;
    let mut e = DmaData::copy(dst.va + 0x3_1000, src.va + 0x80, 64, true);
    e.dst_no_increment = true;
    let mut words = dma(d);
    words.extend(dma(e));
    run(&mut q, &dev, &sig, &ev, &words, next());
    for i in 0..16 {
        expect[0x3_0000 + 4 * i..0x3_0004 + 4 * i].copy_from_slice(&data[0x40..0x44]);
    }
    expect[0x3_1000..0x3_1004].copy_from_slice(&data[0x80 + 60..0x80 + 64]);
    // Nothing at all: a zero byte count.
    run(
        &mut q,
        &dev,
        &sig,
        &ev,
        &dma(DmaData::copy(dst.va, src.va, 0, true)),
        next(),
    );
    assert_eq!(bytes(&dst, 0, size as usize), expect);

    // A copy and a fill across two buffers that are adjacent in the GPU's address space.
    let (a, b2) = adjacent_pair(&dev);
    let mut w = Vec::new();
    let mut b = Pm4Builder::new();
    b.copy(a.va + 0x800, src.va, 0x1000);
    w.extend_from_slice(&b.words);
    let mut f = DmaData::copy(a.va + 0xffe, 0x0403_0201, 5, true);
    f.src_sel = dma_src_sel::DATA;
    w.extend(dma(f));
    run(&mut q, &dev, &sig, &ev, &w, next());
    let mut pair = bytes(&a, 0, 0x1000);
    pair.extend(bytes(&b2, 0, 0x1000));
    assert_eq!(&pair[0x800..0xffe], &data[..0x7fe]);
    assert_eq!(&pair[0xffe..0x1003], &[1, 2, 3, 4, 1]);
    assert_eq!(&pair[0x1003..0x1800], &data[0x803..0x1000]);
    assert_eq!(
        std::iter::from_fn(|| k.take_fault_report(dev.gpu_id)).collect::<Vec<_>>(),
        Vec::new()
    );
}

#[test]
fn dma_data_without_cp_sync_lands_after_the_cp_has_moved_on() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    // Reads the dword at 0x100 into `into` with COPY_DATA, after a DMA of 5 to 0x100.
    let copy_data = |into: u64| {
        let mut w = Vec::new();
        pm4::CopyData {
            src_sel: pm4::copy_src_sel::MEMORY,
            dst_sel: pm4::copy_dst_sel::MEMORY,
            src_cache_policy: 0,
            count_64: false,
            write_confirm: true,
            dst_cache_policy: 0,
            src: mem.va + 0x100,
            dst: mem.va + into,
        }
        .encode(&mut w);
        w
    };
    for (sync, seen) in [(false, 0), (true, 5)] {
        mem.write_u32(0, 5);
        mem.write_u32(0x100, 0);
        let mut w = dma(DmaData::copy(mem.va + 0x100, mem.va, 4, sync));
        w.extend(copy_data(0x200));
        run(&mut q, &dev, &sig, &ev, &w, 1 + sync as u64);
        assert_eq!(mem.read_u32(0x200), seen, "CP_SYNC {sync}");
        assert_eq!(mem.read_u32(0x100), 5, "the DMA landed in the end");
    }
    // DMAs land in order: an unsynced one before a synced one is done by the time the synced
    // one is; a wait lets DMAs in flight land (it would never end otherwise).
    mem.write_u32(0x100, 0);
    mem.write_u32(0x104, 0);
    mem.write_u32(4, 9);
    let mut w = dma(DmaData::copy(mem.va + 0x100, mem.va, 4, false));
    w.extend(dma(DmaData::copy(mem.va + 0x104, mem.va + 4, 4, true)));
    w.extend(copy_data(0x300));
    w.extend(dma(DmaData::copy(mem.va + 0x108, mem.va, 4, false)));
    let mut b = Pm4Builder::new();
    b.wait(mem.va + 0x108, 5);
    w.extend_from_slice(&b.words);
    run(&mut q, &dev, &sig, &ev, &w, 3);
    assert_eq!(mem.read_u32(0x300), 5);
    assert_eq!(mem.read_u32(0x104), 9);
    assert_eq!(mem.read_u32(0x108), 5);
}

#[test]
fn dma_data_reports_what_is_not_modelled_and_faults_on_unmapped_memory() {
    let k = EmuKernel::new(small_config());
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let mut q = dev.create_queue(0x1000);
    let mem = dev.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
    mem.write_u32(0x10, 0x1234);
    let base = DmaData::copy(mem.va + 0x10, mem.va, 4, true);
    type Change = fn(&mut DmaData);
    let cases: [(Change, &str); 6] = [
        (|d| d.src_sel = dma_src_sel::GDS, "GDS"),
        (|d| d.dst_sel = dma_dst_sel::GDS, "GDS"),
        (|d| d.dst_sel = 2, "DST_SEL 2"),
        (|d| d.dst_is_register = true, "register space"),
        (|d| d.engine_pfp = true, "ENGINE_SEL 1"),
        (
            |d| {
                d.src_no_increment = true;
                d.byte_count = 6;
            },
            "byte count of 6",
        ),
    ];
    for (i, (change, what)) in cases.iter().enumerate() {
        let mut d = base;
        change(&mut d);
        run(&mut q, &dev, &sig, &ev, &dma(d), i as u64 + 1);
        let r: Vec<FaultReport> = std::iter::from_fn(|| k.take_fault_report(dev.gpu_id)).collect();
        assert!(
            r.iter().all(|r| r.kind == FaultKind::BadCommandPacket),
            "{r:?}"
        );
        let r: Vec<String> = r.into_iter().map(|r| r.message).collect();
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("DMA_DATA") && r[0].contains(what), "{r:?}");
        assert_eq!(mem.read_u32(0x10), 0x1234, "{what}: skipped whole");
    }
    // A copy running off the end of its buffer: a VM fault naming the first unmapped
    // address, and nothing written.
    let d = DmaData::copy(mem.va + 0xff0, mem.va, 0x20, true);
    q.submit(&dma(d));
    let t = std::time::Instant::now();
    let report = loop {
        if let Some(r) = k.take_fault_report(dev.gpu_id) {
            break r;
        }
        assert!(t.elapsed().as_secs() < 10, "no fault report");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(
        (report.kind, report.address),
        (FaultKind::MemoryFault, Some(mem.va + 0x1000))
    );
    let report = report.message;
    assert!(
        report.contains("VM fault")
            && report.contains(&format!("write of unmapped address {:#x}", mem.va + 0x1000)),
        "{report}"
    );
    assert_eq!(mem.read_u32(0xff0), 0);
}
