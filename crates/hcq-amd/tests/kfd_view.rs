//! What the kernel driver sees of ours, where tinygrad's real-GPU history found it mattered:
//! - every interrupt the driver's signals raise names the event it is for. An end-of-pipe
//!   interrupt with context 0 after each signal's value write (tinygrad sent one until its PR
//!   #17004) names no event, and KFD answers it by scanning every signal event of the
//!   process; the emulated kernel counts those scans;
//! - its queues have normal priority (7, as a ROCm queue), not the maximum (15), with which
//!   tinygrad's queues competed with every other process's until its PR #13658;
//! - a GPU's SDMA queues are few and shared by every process: when KFD has none left
//!   (`ENOMEM`), the device still opens and copies on its compute queue (tinygrad's PRs
//!   #13920 and #14036 made its copy queue optional for that reason).

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Kernel;
use hcq_core::Arg;
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;

const SRC: &str = r#"
extern "C" __attribute__((global)) void twice(int* x, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) x[i] *= 2;
}
"#;

fn open() -> (Arc<EmuKernel>, AmdDevice) {
    let emu = Arc::new(EmuKernel::new(EmuConfig {
        gpus: 1,
        vram_bytes: 256 << 20,
        ..EmuConfig::default()
    }));
    let kernel: Arc<dyn Kernel> = emu.clone();
    let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
    let dev = AmdDevice::open(&driver, 0).unwrap();
    (emu, dev)
}

#[test]
fn queues_have_normal_priority() {
    let (emu, dev) = open();
    let queues = emu.queue_priorities(dev.node.gpu_id);
    assert_eq!(
        queues,
        vec![(false, 7), (true, 7)],
        "(SDMA, priority) per queue"
    );
}

#[test]
fn launches_copies_and_waits_make_kfd_scan_no_event() {
    let (emu, dev) = open();
    let prg = dev
        .load_program(&dev.compile(SRC).unwrap(), "twice")
        .unwrap();
    let n = 256usize;
    let values: Vec<i32> = (0..n as i32).map(|i| i * 3 - 100).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let buf = dev.alloc(bytes.len() as u64).unwrap();
    dev.copy_in(&buf, 0, &bytes).unwrap();
    let before = emu.event_scans();
    const ROUNDS: u32 = 20;
    for round in 0..ROUNDS {
        // Odd rounds wait on the launch itself (timed), even ones queue it.
        dev.launch(
            &prg,
            &[Arg::Buffer(&buf), Arg::I32(n as i32)],
            |b| Ok(b.gpu_address()),
            [(n / 64) as u32, 1, 1],
            [64, 1, 1],
            round % 2 == 1,
        )
        .unwrap();
    }
    dev.synchronize().unwrap();
    let mut back = vec![0u8; bytes.len()];
    dev.copy_out(&mut back, &buf, 0).unwrap();
    for (i, chunk) in back.chunks(4).enumerate() {
        let got = i32::from_le_bytes(chunk.try_into().unwrap());
        assert_eq!(got, values[i].wrapping_mul(1 << ROUNDS), "element {i}");
    }
    assert_eq!(
        emu.event_scans() - before,
        0,
        "interrupts that named no event after {ROUNDS} launches, a copy and waits"
    );
}

#[test]
fn a_device_kfd_gives_no_sdma_queue_copies_on_its_compute_queue() {
    let emu = Arc::new(EmuKernel::new(EmuConfig {
        gpus: 1,
        vram_bytes: 256 << 20,
        sdma_queues: 1,
        ..EmuConfig::default()
    }));
    let kernel: Arc<dyn Kernel> = emu.clone();
    let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
    let first = AmdDevice::open(&driver, 0).unwrap();
    let second = AmdDevice::open(&driver, 0).expect("opens without a copy engine");
    assert_eq!(first.copy_engine_missing(), None);
    let why = second
        .copy_engine_missing()
        .expect("the only SDMA queue is taken");
    assert!(why.contains("SDMA") && why.contains("os error 12"), "{why}");
    assert_eq!(
        emu.queue_priorities(first.node.gpu_id)
            .iter()
            .filter(|(sdma, _)| *sdma)
            .count(),
        1
    );
    for (dev, sdma) in [(&first, true), (&second, false)] {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let buf = dev.alloc(data.len() as u64 + 8).unwrap();
        dev.copy_in(&buf, 8, &data).unwrap();
        let other = dev.alloc(data.len() as u64).unwrap();
        dev.transfer(dev, &other, 0, &buf, 8, data.len() as u64)
            .unwrap();
        let mut back = vec![0u8; data.len()];
        dev.copy_out(&mut back, &other, 0).unwrap();
        assert!(back == data, "copies with an SDMA queue: {sdma}");
        let (_, copy_ring) = dev.ring_bytes_written();
        assert_eq!(
            copy_ring > 0,
            sdma,
            "the copy ring is used only when there is one"
        );
    }
    // The queue goes back to KFD with its device: the next device gets it.
    drop(first);
    let third = AmdDevice::open(&driver, 0).unwrap();
    assert_eq!(third.copy_engine_missing(), None);
}
