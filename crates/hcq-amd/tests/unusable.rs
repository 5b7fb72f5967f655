//! GPUs and kernels the driver cannot use, met through the seam as on a real machine: an
//! emulated kernel that publishes a GPU of another architecture (a Radeon RX 6900 XT, gfx1030)
//! or reports an older KFD. The driver must list such a GPU and say why it cannot be opened,
//! and refuse such a KFD saying what it lacks; the oldest KFD it accepts must run a kernel.

use hcq_amd::topology::unsupported_reason;
use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::Error;
use hcq_emu::{EmuConfig, EmuKernel, GpuArch, KfdVersion};
use std::sync::Arc;

mod common;

fn emulated(config: EmuConfig) -> (Arc<EmuKernel>, Arc<dyn Syscalls>) {
    let emu = Arc::new(EmuKernel::new(EmuConfig {
        max_steps: 1_000_000,
        vram_bytes: 256 << 20,
        ..config
    }));
    let kernel: Arc<dyn Syscalls> = emu.clone();
    (emu, kernel)
}

fn error_text(r: hcq_core::Result<impl Sized>) -> Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

#[test]
fn a_gpu_of_another_architecture_is_listed_and_says_why_it_cannot_be_opened() {
    let (_, kernel) = emulated(EmuConfig {
        gpus: 2,
        arch: GpuArch::Gfx1030,
        ..EmuConfig::default()
    });
    let driver = AmdDriver::new(kernel, "amd", false).expect("the driver opens");
    // Both nodes are listed, in node order, as what they are: Navi 21 is gfx1030.
    assert_eq!(driver.gpus.len(), 2);
    let why = unsupported_reason("gfx1030").expect("gfx1030 is not driven");
    for (i, node) in driver.gpus.iter().enumerate() {
        assert_eq!(node.arch, "gfx1030");
        assert_eq!(node.node, i as u32 + 1);
        assert_eq!(node.unsupported.as_deref(), Some(why.as_str()));
    }
    for i in 0..2 {
        match error_text(AmdDevice::open(&driver, i)) {
            Error::Unsupported(m) => {
                assert_eq!(m, format!("amd:{i} cannot be used: {why}"));
                assert_eq!(
                    m,
                    format!(
                        "amd:{i} cannot be used: unsupported architecture gfx1030: hcq drives \
                         only RDNA3's Navi 3x GPUs (gfx1100, gfx1101, gfx1102), whose machine \
                         code, dispatch setup and HDP flush registers it is written for"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }
    // A number past the list is still "no such device", not the architecture.
    assert!(matches!(
        AmdDevice::open(&driver, 2),
        Err(Error::NoDevice(_))
    ));
}

#[test]
fn the_gfx1100_the_emulator_runs_is_one_the_driver_drives() {
    let (_, kernel) = emulated(EmuConfig::default());
    let driver = AmdDriver::new(kernel, "amd", false).unwrap();
    assert_eq!(driver.gpus[0].arch, "gfx1100");
    assert_eq!(driver.gpus[0].unsupported, None);
}

#[test]
fn a_kfd_older_than_1_4_is_refused_naming_what_it_lacks() {
    for minor in [0, 1, 2, 3] {
        let (_, kernel) = emulated(EmuConfig {
            kfd_version: Some(KfdVersion { major: 1, minor }),
            ..EmuConfig::default()
        });
        match error_text(AmdDriver::new(kernel, "amd", false)) {
            Error::Unsupported(m) => assert_eq!(
                m,
                format!(
                    "KFD 1.{minor} is older than 1.4, which hcq needs for \
                     AMDKFD_IOC_ALLOC_MEMORY_OF_GPU's UNCACHED flag (its signals, event page and \
                     rings are memory the GPU must not cache): the kernel driver is too old \
                     (Linux 5.13 or later, or a current amdgpu-dkms, has it)"
                )
            ),
            other => panic!("1.{minor}: {other:?}"),
        }
    }
    let (_, kernel) = emulated(EmuConfig {
        kfd_version: Some(KfdVersion { major: 2, minor: 0 }),
        ..EmuConfig::default()
    });
    match error_text(AmdDriver::new(kernel, "amd", false)) {
        Error::Unsupported(m) => assert_eq!(
            m,
            "KFD 2.0 is not the KFD interface hcq is written for (1.4 or a later 1.x)"
        ),
        other => panic!("{other:?}"),
    }
}

/// KFD 1.4 has neither `AVAILABLE_MEMORY` (1.9) nor `RUNTIME_ENABLE` (1.13): the driver makes
/// no handshake, reports free memory as unknown, and runs a kernel.
#[test]
fn the_oldest_kfd_accepted_runs_a_kernel() {
    let (emu, kernel) = emulated(EmuConfig {
        kfd_version: Some(KfdVersion { major: 1, minor: 4 }),
        ..EmuConfig::default()
    });
    let driver = AmdDriver::new(kernel, "amd", false).unwrap();
    assert_eq!(driver.kfd_version, (1, 4));
    let dev = AmdDevice::open(&driver, 0).unwrap();
    assert!(emu.runtime_enable_calls().is_empty());
    let compute = dev.info().compute.expect("a compute shape");
    assert_eq!(compute.free_memory, None);
    assert_eq!(compute.driver_version, "KFD 1.4");

    let x: Vec<i32> = (0..100).map(|i| 3 * i - 50).collect();
    let y: Vec<i32> = (0..100).map(|i| 1000 - i * i).collect();
    common::check_add_i32(&dev, &x, &y);
}
