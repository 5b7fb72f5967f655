//! What the emulator can be besides a gfx1100 under the release's own KFD: a GPU model it shows
//! but does not run (`HCQ_EMU_ARCH=gfx1030`), and a KFD reporting another version
//! (`HCQ_EMU_KFD_VERSION`). The figures checked are the boards' published ones and
//! `kfd_ioctl.h`'s changelog, not the emulator's own tables.

mod common;

use common::*;
use hcq_amd_sys::drm::*;
use hcq_amd_sys::kfd::*;
use hcq_amd_sys::pm4::{self, Pm4Builder};
use hcq_amd_sys::seam::{FaultKind, Syscalls};
use hcq_emu::{EmuConfig, EmuKernel, GpuArch, KfdRules, KfdVersion};

const NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

fn navi21() -> EmuKernel {
    EmuKernel::new(EmuConfig {
        arch: GpuArch::Gfx1030,
        sdma_queues: GpuArch::Gfx1030.sdma_queues(),
        ..small_config()
    })
}

fn property(props: &str, name: &str) -> u64 {
    props
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn a_gfx1030_is_published_as_a_radeon_rx_6900_xt() {
    let k = navi21();
    assert_eq!(
        k.read_to_string(&format!("{NODES}/1/name")).unwrap(),
        "gfx1030\n"
    );
    let props = k.read_to_string(&format!("{NODES}/1/properties")).unwrap();
    let p = |name| property(&props, name);
    // Navi 21 XTX: PCI 1002:73bf, gfx10.3.0; 80 CUs of 2 SIMD32s, in 4 shader engines of 2
    // shader arrays (10 CUs each), wave32, 64 KiB of LDS.
    assert_eq!(p("gfx_target_version"), 100_300);
    assert_eq!((p("vendor_id"), p("device_id")), (0x1002, 0x73bf));
    assert_eq!((p("simd_count"), p("simd_per_cu")), (160, 2));
    assert_eq!(
        (
            p("array_count"),
            p("simd_arrays_per_engine"),
            p("cu_per_simd_array")
        ),
        (8, 2, 10)
    );
    assert_eq!((p("wave_front_size"), p("lds_size_in_kb")), (32, 64));
    // Four SDMA 5.2 engines, eight user queues each.
    assert_eq!(
        (p("num_sdma_engines"), p("num_sdma_queues_per_engine")),
        (4, 8)
    );
    // Caches: 16 KiB vector L0 per CU, 32 KiB instruction and 16 KiB scalar per WGP, 128 KiB
    // GL1 per shader array, 4 MiB of L2 and 128 MiB of Infinity Cache.
    let mut by_kind: Vec<(u64, u64, u64)> = Vec::new();
    for i in 0..p("caches_count") {
        let c = k
            .read_to_string(&format!("{NODES}/1/caches/{i}/properties"))
            .unwrap();
        let shared = c
            .lines()
            .find_map(|l| l.strip_prefix("sibling_map "))
            .unwrap()
            .split(',')
            .filter(|b| *b == "1")
            .count() as u64;
        let key = (property(&c, "level"), property(&c, "size"), shared);
        by_kind.push(key);
    }
    by_kind.sort();
    by_kind.dedup_by(|a, b| a == b);
    assert_eq!(
        by_kind,
        [
            (1, 16, 1),
            (1, 16, 2),
            (1, 32, 2),
            (1, 128, 10),
            (2, 4096, 80),
            (3, 128 << 10, 80)
        ]
    );
    assert_eq!(p("caches_count"), 80 + 40 + 40 + 8 + 2);
    // Its IP discovery table: GC 10.3.0, four SDMA 5.2.0, NBIO 3.3.0.
    let minor = p("drm_render_minor");
    let die = format!("/sys/class/drm/renderD{minor}/device/ip_discovery/die/0");
    let version = |block: &str| -> Vec<String> {
        ["major", "minor", "revision"]
            .iter()
            .map(|f| {
                k.read_to_string(&format!("{die}/{block}/0/{f}"))
                    .unwrap()
                    .trim()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(version("GC"), ["10", "3", "0"]);
    assert_eq!(version("NBIF"), ["3", "3", "0"]);
    for sdma in ["SDMA0", "SDMA1", "SDMA2", "SDMA3"] {
        assert_eq!(version(sdma), ["5", "2", "0"], "{sdma}");
    }
    assert_eq!(
        k.read_to_string(&format!("/sys/class/drm/renderD{minor}/device/device"))
            .unwrap(),
        "0x73bf\n"
    );
}

/// amdgpu's `DEV_INFO` says what the topology says, for each model.
#[test]
fn dev_info_agrees_with_the_topology_for_each_model() {
    for (arch, family) in [
        (GpuArch::Gfx1100, AMDGPU_FAMILY_GC_11_0_0),
        (GpuArch::Gfx1030, AMDGPU_FAMILY_NV),
    ] {
        let k = EmuKernel::new(EmuConfig {
            arch,
            ..small_config()
        });
        let props = k.read_to_string(&format!("{NODES}/1/properties")).unwrap();
        let p = |name| property(&props, name);
        let drm = k
            .open(&format!("/dev/dri/renderD{}", p("drm_render_minor")))
            .unwrap();
        let mut d = AmdgpuInfoDevice::default();
        let mut q = AmdgpuInfo {
            return_pointer: &mut d as *mut AmdgpuInfoDevice as u64,
            return_size: std::mem::size_of::<AmdgpuInfoDevice>() as u32,
            query: AMDGPU_INFO_DEV_INFO,
            query_args: [0; 4],
        };
        ioctl(&k, drm, IOC_AMDGPU_INFO, &mut q).unwrap();
        assert_eq!(d.family, family, "{arch:?}");
        assert_eq!(u64::from(d.device_id), p("device_id"));
        let cus = p("simd_count") / p("simd_per_cu");
        assert_eq!(u64::from(d.cu_active_number), cus);
        assert_eq!(u64::from(d.num_cu_per_sh), p("cu_per_simd_array"));
        assert_eq!(
            u64::from(d.num_shader_engines),
            p("array_count") / p("simd_arrays_per_engine")
        );
        assert_eq!(d.max_engine_clock, p("max_engine_clk_fcompute") * 1000);
        let set: u32 = d.cu_bitmap.iter().flatten().map(|w| w.count_ones()).sum();
        assert_eq!(u64::from(set), cus);
    }
}

/// KFD answers for a gfx1030 as for any GPU (memory, events, queues), but the emulator runs
/// only gfx1100 machine code and registers: a dispatch and an HDP flush on it are reported,
/// not run as if it were a gfx1100.
#[test]
fn a_gfx1030_takes_queues_but_its_engines_run_nothing() {
    // Linux 6.6's rules take the queue areas' sizes as given: the helpers size them for a
    // gfx1100, and a gfx1030's engines would not use them anyway.
    let k = EmuKernel::new(EmuConfig {
        kernel: KfdRules::Linux6_6,
        ..*navi21().config()
    });
    let dev = Dev::open(&k, 0);
    let sig = Signals::new(&dev);
    let ev = dev.create_event(EVENT_SIGNAL, Some(&sig.events));
    let hw = dev.create_event(EVENT_HW_EXCEPTION, None);
    let mut q = dev.create_queue(0x1000);

    let mut words = vec![pm4::header(pm4::OP_DISPATCH_DIRECT, 3), 1, 1, 1, 1];
    let mut b = Pm4Builder::new();
    b.signal(sig.value_addr(0), 1, sig.mailbox(&ev), ev.event_id);
    words.extend_from_slice(&b.words);
    q.submit(&words);
    let (result, _) = dev.wait_event(hw.event_id, 5000);
    assert_eq!(result, WAIT_RESULT_COMPLETE);
    assert!(wait_signal(&dev, &sig, 0, 1, &ev));
    let report = k.take_fault_report(dev.gpu_id).expect("a fault report");
    assert_eq!(report.kind, FaultKind::BadCommandPacket, "{report}");
    assert!(
        report.message.contains("DISPATCH_DIRECT on a gfx1030")
            && report.message.contains("does not run"),
        "{report}"
    );
    assert_eq!(k.shader_stats(0).expect("GPU 0").dispatches, 0);

    let mut b = Pm4Builder::new();
    b.hdp_flush();
    b.signal(sig.value_addr(0), 2, sig.mailbox(&ev), ev.event_id);
    q.submit(&b.words);
    dev.wait_event(hw.event_id, 5000);
    assert!(wait_signal(&dev, &sig, 0, 2, &ev));
    let report = k.take_fault_report(dev.gpu_id).expect("a fault report");
    assert!(
        report.message.contains(&format!(
            "register {:#x} is not modelled",
            hcq_amd_sys::regs::GPU_HDP_FLUSH_REQ
        )),
        "{report}"
    );
    q.destroy();
}

fn get_version(k: &EmuKernel) -> (u32, u32) {
    let kfd = k.open("/dev/kfd").unwrap();
    let mut v = GetVersionArgs::default();
    ioctl(k, kfd, IOC_GET_VERSION, &mut v).unwrap();
    k.close(kfd);
    (v.major_version, v.minor_version)
}

/// A KFD configured as 1.8 reports 1.8 and lacks what came after: `AVAILABLE_MEMORY` (1.9) and
/// `RUNTIME_ENABLE` (1.13) are `EINVAL`, as a kernel answers a number it does not define.
#[test]
fn a_kfd_of_another_version_reports_it_and_lacks_the_later_ioctls() {
    assert_eq!(get_version(&EmuKernel::new(small_config())), (1, 16));
    let old = EmuKernel::new(EmuConfig {
        kfd_version: Some(KfdVersion { major: 1, minor: 8 }),
        ..small_config()
    });
    assert_eq!(get_version(&old), (1, 8));
    let dev = Dev::open(&old, 0);
    let mut avail = GetAvailableMemoryArgs {
        gpu_id: dev.gpu_id,
        ..Default::default()
    };
    assert_eq!(
        errno_of(ioctl(&old, dev.kfd, IOC_AVAILABLE_MEMORY, &mut avail)),
        libc::EINVAL
    );
    let mut enable = RuntimeEnableArgs::default();
    assert_eq!(
        errno_of(ioctl(&old, dev.kfd, IOC_RUNTIME_ENABLE, &mut enable)),
        libc::EINVAL
    );
    // At 1.13 both are there.
    let newer = EmuKernel::new(EmuConfig {
        kfd_version: Some(KfdVersion {
            major: 1,
            minor: 13,
        }),
        ..small_config()
    });
    let dev = Dev::open(&newer, 0);
    let mut avail = GetAvailableMemoryArgs {
        gpu_id: dev.gpu_id,
        ..Default::default()
    };
    ioctl(&newer, dev.kfd, IOC_AVAILABLE_MEMORY, &mut avail).unwrap();
    assert!(avail.available > 0);
    ioctl(
        &newer,
        dev.kfd,
        IOC_RUNTIME_ENABLE,
        &mut RuntimeEnableArgs::default(),
    )
    .unwrap();
}
