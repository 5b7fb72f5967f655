//! The driver over its own emulated kernel instance (not the process-global one).

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::Arg;
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;

mod common;
use common::DEMO;

fn driver(gpus: u32) -> Arc<AmdDriver> {
    let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
        gpus,
        max_steps: 10_000_000,
        vram_bytes: 1 << 30,
        ..EmuConfig::default()
    }));
    AmdDriver::new(kernel, "amd-emu", true).unwrap()
}

fn add_i32_works(dev: &AmdDevice) {
    let x: Vec<i32> = (0..300).map(|i| i * 7 - 1000).collect();
    let y: Vec<i32> = (0..300).map(|i| i32::MAX - i).collect();
    common::check_add_i32(dev, &x, &y);
}

#[test]
fn a_device_can_be_closed_and_opened_again() {
    let d = driver(1);
    for _ in 0..3 {
        let dev = AmdDevice::open(&d, 0).unwrap();
        add_i32_works(&dev);
        drop(dev);
    }
}

#[test]
fn two_gpus_each_run_their_own_queue() {
    let d = driver(2);
    assert_eq!(d.gpus.len(), 2);
    let (d0, d1) = (
        AmdDevice::open(&d, 0).unwrap(),
        AmdDevice::open(&d, 1).unwrap(),
    );
    assert_ne!(d0.node.gpu_id, d1.node.gpu_id);
    add_i32_works(&d0);
    add_i32_works(&d1);
    assert!(matches!(
        AmdDevice::open(&d, 2),
        Err(hcq_core::Error::NoDevice(_))
    ));
}

#[test]
fn the_timeline_wraps_before_2_pow_31_and_results_stay_right() {
    let d = driver(1);
    let options = hcq_amd::DeviceOptions {
        timeline_start: (1 << 31) - 6,
        ..Default::default()
    };
    let dev = AmdDevice::open_with(&d, 0, options).unwrap();
    for _ in 0..4 {
        add_i32_works(&dev); // several submissions and a synchronisation each
    }
    assert!(
        dev.timeline_swaps() >= 1,
        "the timeline swapped to its shadow signal"
    );
    assert!(dev.timeline_value() < 100);
}

#[test]
fn the_kernel_argument_ring_wraps_with_work_in_flight() {
    let d = driver(1);
    let options = hcq_amd::DeviceOptions {
        kernargs_bytes: 4096,
        ..Default::default()
    };
    let dev = AmdDevice::open_with(&d, 0, options).unwrap();
    let prg = dev.load_program(DEMO, "add_i32").unwrap();
    let n = 64usize;
    let bufs: Vec<_> = (0..3).map(|_| dev.alloc(4 * n as u64).unwrap()).collect();
    let bytes = |v: &[i32]| v.iter().flat_map(|e| e.to_le_bytes()).collect::<Vec<u8>>();
    dev.copy_in(&bufs[0], 0, &bytes(&vec![0; n])).unwrap();
    dev.copy_in(&bufs[1], 0, &bytes(&vec![1; n])).unwrap();
    // 100 launches of a kernel with a 288-byte argument segment through a 4 KiB ring, without
    // waiting in between: acc += 1, alternating buffers.
    for i in 0..100 {
        let (dst, src) = if i % 2 == 0 {
            (&bufs[2], &bufs[0])
        } else {
            (&bufs[0], &bufs[2])
        };
        let args = [
            Arg::Buffer(dst),
            Arg::Buffer(src),
            Arg::Buffer(&bufs[1]),
            Arg::I32(n as i32),
        ];
        dev.launch(
            &prg,
            &args,
            |b| Ok(b.gpu_address()),
            [1, 1, 1],
            [64, 1, 1],
            false,
        )
        .unwrap();
    }
    let mut out = vec![0u8; 4 * n];
    dev.copy_out(&mut out, &bufs[0], 0).unwrap();
    let got: Vec<i32> = out
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![100; n]);
}

#[test]
fn copies_spanning_a_timeline_wrap_complete() {
    let d = driver(1);
    // Four staged chunks of at most 4 MiB each way (below the direct copy-in threshold).
    let size = 15 * (1 << 20) + 5;
    let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    for start in [(1u64 << 31) - 2, (1 << 31) - 4, (1 << 31) - 6] {
        let options = hcq_amd::DeviceOptions {
            timeline_start: start,
            ..Default::default()
        };
        let dev = AmdDevice::open_with(&d, 0, options).unwrap();
        let buf = dev.alloc(size as u64).unwrap();
        dev.copy_in(&buf, 0, &data).unwrap();
        let mut out = vec![0u8; size];
        dev.copy_out(&mut out, &buf, 0).unwrap();
        assert!(out == data, "start {start}");
        assert!(dev.timeline_swaps() >= 1, "start {start}");
    }
}

const MIB: usize = 1 << 20;

/// Timeline values a copy-out of `out.len()` bytes used: one for an in-place copy, one per
/// staged chunk of at most 4 MiB.
fn copy_out_submissions(dev: &AmdDevice, out: &mut [u8], buf: &hcq_amd::AmdBuffer) -> u64 {
    let before = dev.timeline_value();
    dev.copy_out(out, buf, 0).unwrap();
    dev.timeline_value() - before
}

#[test]
fn large_copies_out_land_in_place_and_small_ones_are_staged() {
    let d = driver(1);
    let dev = AmdDevice::open(&d, 0).unwrap();
    for (n, submissions) in [(16 * MIB - 1, 4), (16 * MIB, 1), (24 * MIB + 3, 1)] {
        let data: Vec<u8> = (0..n).map(|i| (i * 13 % 253) as u8).collect();
        let buf = dev.alloc(n as u64).unwrap();
        dev.copy_in(&buf, 0, &data).unwrap();
        let mut out = vec![0u8; n + 1];
        assert_eq!(
            copy_out_submissions(&dev, &mut out[1..], &buf),
            submissions,
            "size {n}"
        );
        assert!(out[1..] == data[..], "size {n}");
        assert_eq!(out[0], 0, "size {n}: the byte before the copy changed");
    }
}

#[test]
fn copies_whose_pages_are_already_registered_are_staged() {
    let d = driver(1);
    let dev = AmdDevice::open(&d, 0).unwrap();
    let n = 17 * MIB + 9;
    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 241) as u8).collect();
    let buf = dev.alloc(n as u64).unwrap();
    let page = hcq_amd::memory::PAGE_SIZE;
    let last_page = |bytes: &[u8]| (bytes.as_ptr() as u64 + n as u64 - 1) & !(page - 1);
    // SAFETY: `data` outlives the registration, and no GPU work uses it.
    let held = unsafe {
        hcq_amd::memory::GpuMemory::register_host(&d.kfd, dev.node.gpu_id, last_page(&data), page)
    }
    .unwrap();
    // The copy cannot register the pages again, so it takes the staging path: five chunks.
    let before = dev.timeline_value();
    dev.copy_in(&buf, 0, &data).unwrap();
    assert_eq!(dev.timeline_value() - before, 5);
    drop(held);

    let mut out = vec![0u8; n];
    // SAFETY: `out` outlives the registration, and no GPU work uses it.
    let held = unsafe {
        hcq_amd::memory::GpuMemory::register_host(&d.kfd, dev.node.gpu_id, last_page(&out), page)
    }
    .unwrap();
    assert_eq!(copy_out_submissions(&dev, &mut out, &buf), 5);
    drop(held);
    assert!(out == data);
    out.fill(0);
    assert_eq!(copy_out_submissions(&dev, &mut out, &buf), 1);
    assert!(out == data);
}
