//! What the kernel driver sees of ours, where tinygrad's real-GPU history found it mattered:
//! - every interrupt the driver's signals raise names the event it is for. An end-of-pipe
//!   interrupt with context 0 after each signal's value write (tinygrad sent one until its PR
//!   #17004) names no event, and KFD answers it by scanning every signal event of the
//!   process; the emulated kernel counts those scans;
//! - its queues have normal priority (7, as a ROCm queue), not the maximum (15), with which
//!   tinygrad's queues competed with every other process's until its PR #13658;
//! - it makes KFD's runtime handshake (`RUNTIME_ENABLE`, mode 0) once, before any queue: ROCm
//!   7's kernel driver did not run tinygrad's queues without it (its PR #12502);
//! - every dispatch sets `COMPUTE_PGM_RSRC1.PRIV` on gfx11, without which tinygrad found
//!   context save and restore failing on real GPUs (its PR #6950);
//! - a GPU's SDMA queues are few and shared by every process: when KFD has none left
//!   (`ENOMEM`), the device still opens and copies on its compute queue (tinygrad's PRs
//!   #13920 and #14036 made its copy queue optional for that reason).

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
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
    let kernel: Arc<dyn Syscalls> = emu.clone();
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
    let kernel: Arc<dyn Syscalls> = emu.clone();
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

#[test]
fn every_dispatch_is_privileged_on_gfx11() {
    let (emu, dev) = open();
    let prg = dev
        .load_program(&dev.compile(SRC).unwrap(), "twice")
        .unwrap();
    assert_ne!(prg.rsrc1 & hcq_amd_sys::regs::RSRC1_PRIV, 0);
    assert_eq!(
        prg.rsrc1 & !hcq_amd_sys::regs::RSRC1_PRIV,
        prg.descriptor.compute_pgm_rsrc1,
        "nothing else changes"
    );
    let buf = dev.alloc(256 * 4).unwrap();
    let data: Vec<u8> = (0..256i32).flat_map(|i| (i - 100).to_le_bytes()).collect();
    dev.copy_in(&buf, 0, &data).unwrap();
    for _ in 0..3 {
        dev.launch(
            &prg,
            &[Arg::Buffer(&buf), Arg::I32(256)],
            |b| Ok(b.gpu_address()),
            [4, 1, 1],
            [64, 1, 1],
            false,
        )
        .unwrap();
    }
    let mut back = vec![0u8; data.len()];
    dev.copy_out(&mut back, &buf, 0).unwrap();
    for (i, c) in back.chunks(4).enumerate() {
        assert_eq!(
            i32::from_le_bytes(c.try_into().unwrap()),
            (i as i32 - 100) * 8
        );
    }
    assert_eq!(emu.shader_stats(0).unwrap().dispatches, 3);
    assert_eq!(emu.unprivileged_dispatches(dev.node.gpu_id), 0);
}

#[test]
fn the_runtime_handshake_comes_once_before_any_queue() {
    use hcq_emu::{KfdRules, RuntimeEnableCall};
    for kernel in [KfdRules::Linux6_12, KfdRules::Linux6_6] {
        let emu = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 2,
            vram_bytes: 256 << 20,
            kernel,
            ..EmuConfig::default()
        }));
        let k: Arc<dyn Syscalls> = emu.clone();
        let driver = AmdDriver::new(k, "amd-emu", true).unwrap();
        let devs = [
            AmdDevice::open(&driver, 0).unwrap(),
            AmdDevice::open(&driver, 1).unwrap(),
        ];
        let buf = devs[1].alloc(4096).unwrap();
        devs[1].copy_in(&buf, 0, &[7; 4096]).unwrap();
        assert_eq!(
            emu.runtime_enable_calls(),
            vec![RuntimeEnableCall {
                mode_mask: 0,
                queues: 0,
                errno: 0
            }],
            "{kernel:?}"
        );
    }
}
