//! `hcq devices` and choosing a device by name.

use crate::common::{hcq, stdout};

#[test]
fn devices_lists_the_emulated_gpus() {
    let o = hcq(&["devices"], &[("HCQ_EMU_GPUS", "2")]);
    assert!(o.status.success(), "{o:?}");
    let s = stdout(&o);
    for name in ["amd-emu:0", "amd-emu:1"] {
        let line = s
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{s}"));
        assert!(
            line.contains("gfx1100") && line.contains("emulated"),
            "{line}"
        );
    }
    // No /dev/kfd here (as on CI machines): said, with the cause, not left to guess.
    if !std::path::Path::new("/dev/kfd").exists() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("no real AMD GPU (amd:N): /dev/kfd does not exist"),
            "{err}"
        );
    }
}

#[test]
fn a_bad_device_name_is_a_clear_error() {
    let o = hcq(&["demo", "--device", "cuda:0"], &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cuda:0") && err.contains("amd-emu"), "{err}");
    let o = hcq(&["demo"], &[("HCQ_DEVICE", "amd-emu:7")]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("amd-emu:7"));
}

/// `hcq devices --json` and `-v`: each device's compute shape, checked against the emulated
/// kernel's own topology and sysfs (the properties KFD publishes, the PCI device holding the
/// render node) and its KFD version under each kernel's rules.
#[cfg(target_os = "linux")]
#[test]
fn devices_json_and_verbose_describe_the_compute_shape() {
    use hcq_amd_sys::seam::Syscalls;
    use hcq_emu::{EmuConfig, EmuKernel, KfdRules};
    const NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";
    for (rules, version) in [("6.12", "KFD 1.16"), ("6.6", "KFD 1.14")] {
        let env = [
            ("HCQ_EMU_GPUS", "2"),
            ("HCQ_EMU_CUS", "84"),
            ("HCQ_EMU_KERNEL", rules),
        ];
        let o = hcq(&["devices", "--json"], &env);
        assert!(o.status.success(), "{o:?}");
        let k = EmuKernel::new(EmuConfig {
            gpus: 2,
            cus: 84,
            kernel: KfdRules::from_name(rules).unwrap(),
            ..EmuConfig::default()
        });
        let records: Vec<serde_json::Value> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        // One object per device, then (no /dev/kfd here, as on CI machines) why there is no
        // real GPU.
        let lines: Vec<&serde_json::Value> =
            records.iter().filter(|r| r.get("name").is_some()).collect();
        assert_eq!(lines.len(), 2);
        if !std::path::Path::new("/dev/kfd").exists() {
            assert_eq!(records.len(), 3);
            let last = &records[2];
            assert_eq!(last["driver"], "amd");
            assert!(
                last["unavailable"]
                    .as_str()
                    .unwrap()
                    .starts_with("/dev/kfd does not exist: "),
                "{last}"
            );
        }
        for (i, d) in lines.iter().enumerate() {
            let props = k
                .read_to_string(&format!("{NODES}/{}/properties", i + 1))
                .unwrap();
            let prop = |name: &str| -> u64 {
                props
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            assert_eq!(d["name"], format!("amd-emu:{i}"));
            assert_eq!(d["emulated"], true);
            assert!(d["unusable"].is_null(), "{d}");
            let c = &d["compute"];
            assert_eq!(c["compute_units"], 84);
            assert_eq!(c["shader_engines"], 6);
            assert_eq!(c["simds_per_cu"], prop("simd_per_cu"));
            assert_eq!(c["wave_size"], 32);
            assert_eq!(
                c["max_waves_per_cu"],
                prop("max_waves_per_simd") * prop("simd_per_cu")
            );
            assert_eq!(c["lds_per_workgroup"], 65536);
            assert_eq!(c["max_clock_mhz"], prop("max_engine_clk_fcompute"));
            assert_eq!(c["render_minor"], prop("drm_render_minor"));
            assert_eq!(c["driver_version"], version);
            assert!(c["copy_engine_missing"].is_null(), "{d}");
            // KFD's caches of an 84-CU gfx1100 (12 shader arrays of 7 CUs), by kind: level,
            // data, instruction, KiB, CUs sharing one, instances.
            let caches: Vec<(u64, bool, bool, u64, u64, u64)> = c["caches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| {
                    (
                        k["level"].as_u64().unwrap(),
                        k["data"].as_bool().unwrap(),
                        k["instruction"].as_bool().unwrap(),
                        k["bytes"].as_u64().unwrap() / 1024,
                        k["shared_by_cus"].as_u64().unwrap(),
                        k["instances"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(
                caches,
                [
                    (1, true, false, 16, 2, 42),
                    (1, true, false, 32, 1, 84),
                    (1, false, true, 32, 2, 42),
                    (1, true, false, 256, 7, 12),
                    (2, true, false, 6 << 10, 84, 1),
                    (3, true, false, 96 << 10, 84, 1),
                ],
                "{d}"
            );
            assert_eq!(
                caches.iter().map(|k| k.5).sum::<u64>(),
                prop("caches_count"),
                "the node's caches_count"
            );
            let free = c["free_memory"].as_u64().unwrap();
            assert!(free > 0 && free <= d["memory"].as_u64().unwrap(), "{d}");
            // GTT is the host's memory: the CPU node's memory bank.
            let host = k
                .read_to_string(&format!("{NODES}/0/mem_banks/0/properties"))
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("size_in_bytes "))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap();
            assert_eq!(c["gtt_memory"].as_u64(), Some(host), "{d}");
            assert!(c["gtt_free"].as_u64().unwrap() <= host, "{d}");
            // The PCI device at that location holds the render node.
            let pci = c["pci_location"].as_str().unwrap();
            let minor = prop("drm_render_minor");
            assert_eq!(
                k.read_to_string(&format!(
                    "/sys/devices/pci0000:00/{pci}/drm/renderD{minor}/dev"
                ))
                .unwrap()
                .trim(),
                format!("226:{minor}")
            );
        }
        let o = hcq(&["devices", "-v"], &env);
        let text = stdout(&o);
        assert!(o.status.success(), "{o:?}");
        if !std::path::Path::new("/dev/kfd").exists() {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("hcq: no real AMD GPU (amd:N): /dev/kfd does not exist: "),
                "{err}"
            );
        }
        assert!(
            text.contains("84 compute units in 6 shader engines") && text.contains(version),
            "{text}"
        );
        assert!(!text.contains("no copy engine"), "{text}");
        assert!(
            text.contains("L2 data cache: 6.0 MiB shared by 84 CUs, 1 of them"),
            "{text}"
        );
    }
    // A GPU whose kernel driver has no SDMA queue left says why, in both forms.
    let env = [("HCQ_EMU_SDMA_QUEUES", "0")];
    let o = hcq(&["devices", "--json"], &env);
    assert!(o.status.success(), "{o:?}");
    let d: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    let why = d["compute"]["copy_engine_missing"].as_str().unwrap();
    assert!(why.contains("SDMA") && why.contains("os error 12"), "{why}");
    let o = hcq(&["devices", "-v"], &env);
    let text = stdout(&o);
    assert!(
        o.status.success() && text.contains("no copy engine (copies run on the compute queue)"),
        "{text}"
    );
}
