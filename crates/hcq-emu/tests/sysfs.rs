//! The emulated sysfs: the KFD topology and each GPU's amdgpu device directory, read the way
//! KFD programs read them (through `/sys/class/...` links), and listed whole for `hcq exec`.

mod common;

use common::small_config;
use hcq_amd_sys::seam::Syscalls;
use hcq_emu::{EmuConfig, EmuKernel, SysfsKind};

const NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

fn two_gpus() -> EmuKernel {
    EmuKernel::new(EmuConfig {
        gpus: 2,
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
fn each_gpu_has_its_render_node_and_ip_discovery_table() {
    let k = two_gpus();
    let mut minors = Vec::new();
    for node in 1..=2 {
        let props = k
            .read_to_string(&format!("{NODES}/{node}/properties"))
            .unwrap();
        let minor = property(&props, "drm_render_minor");
        let location = property(&props, "location_id");
        minors.push(minor);
        let device = format!("/sys/class/drm/renderD{minor}/device");
        // The PCI address the link leads to is the node's location (bus << 8 | devfn).
        let render = format!("/sys/class/drm/renderD{minor}");
        assert_eq!(
            k.read_to_string(&format!("{render}/dev")).unwrap(),
            format!("226:{minor}\n")
        );
        let pci = format!(
            "0000:{:02x}:{:02x}.{}",
            location >> 8,
            (location & 0xff) >> 3,
            location & 7
        );
        let direct = format!("/sys/devices/pci0000:00/{pci}");
        assert_eq!(
            k.read_to_string(&format!("{device}/vendor")).unwrap(),
            "0x1002\n"
        );
        assert_eq!(
            k.read_to_string(&format!("{direct}/device")).unwrap(),
            format!("{:#06x}\n", property(&props, "device_id"))
        );
        // GC 11.0.0, SDMA 6.0.0 and NBIF 4.3.0, by hardware id and by name.
        let die = format!("{device}/ip_discovery/die/0");
        for (hw_id, name, version) in [
            (11, "GC", [11, 0, 0]),
            (42, "SDMA0", [6, 0, 0]),
            (43, "SDMA1", [6, 0, 0]),
            (108, "NBIF", [4, 3, 0]),
        ] {
            for dir in [format!("{die}/{hw_id}/0"), format!("{die}/{name}/0")] {
                let read = |f: &str| {
                    k.read_to_string(&format!("{dir}/{f}"))
                        .unwrap()
                        .trim()
                        .parse::<u32>()
                        .unwrap()
                };
                assert_eq!([read("major"), read("minor"), read("revision")], version);
                assert_eq!(read("hw_id"), hw_id);
            }
        }
        let ids = k.read_dir(&die).unwrap();
        for id in ["11", "42", "43", "108", "GC", "SDMA0", "NBIF"] {
            assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
        }
    }
    assert_eq!(minors, [128, 129]);
    let mut class = k.read_dir("/sys/class/drm").unwrap();
    class.sort();
    assert_eq!(class, ["renderD128", "renderD129"]);
}

#[test]
fn paths_resolve_like_the_kernel_resolves_them() {
    let k = EmuKernel::new(small_config());
    let gpu_id = k.read_to_string(&format!("{NODES}/1/gpu_id")).unwrap();
    for path in [
        "/sys/class/kfd/kfd/topology/nodes/1/gpu_id",
        "/sys/class/kfd/kfd/topology/nodes/0/../1/gpu_id",
        "/sys/devices/virtual/kfd/kfd/topology/./nodes/1//gpu_id",
        "/sys/class/drm/renderD128/device/drm/renderD128/../../../../virtual/kfd/kfd/topology/nodes/1/gpu_id",
    ] {
        assert_eq!(k.read_to_string(path).unwrap(), gpu_id, "{path}");
    }
    let errno = |r: std::io::Result<String>| r.unwrap_err().raw_os_error();
    assert_eq!(
        errno(k.read_to_string("/sys/class/drm/renderD200/dev")),
        Some(libc::ENOENT)
    );
    assert_eq!(
        errno(k.read_to_string(&format!("{NODES}/1/gpu_id/x"))),
        Some(libc::ENOTDIR)
    );
    assert_eq!(
        errno(k.read_to_string(&format!("{NODES}/1"))),
        Some(libc::EISDIR)
    );
    assert_eq!(errno(k.read_to_string("sys/class/kfd")), Some(libc::ENOENT));
    assert_eq!(
        k.read_dir(&format!("{NODES}/1/gpu_id"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENOTDIR)
    );
}

#[test]
fn the_listing_is_the_tree_the_lookups_answer_from() {
    let k = two_gpus();
    let entries = k.sysfs_entries();
    let roots = k.sysfs_roots();
    assert!(roots.iter().any(|r| r == "/sys/devices/virtual/kfd/kfd"));
    assert!(roots.iter().any(|r| r == "/sys/class/drm"));
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        // Every entry lies under a root, after its parent directory.
        assert!(
            roots
                .iter()
                .any(|r| e.path == *r || e.path.starts_with(&format!("{r}/"))),
            "{} is under no root",
            e.path
        );
        if !roots.contains(&e.path) {
            let parent = e.path.rsplit_once('/').unwrap().0;
            assert!(seen.contains(parent), "{} listed before {parent}", e.path);
        }
        seen.insert(e.path.as_str());
        match &e.kind {
            SysfsKind::File(text) => assert_eq!(&k.read_to_string(&e.path).unwrap(), text),
            SysfsKind::Dir => {
                let mut listed: Vec<String> = entries
                    .iter()
                    .filter_map(|c| {
                        let (parent, name) = c.path.rsplit_once('/')?;
                        (parent == e.path).then(|| name.to_string())
                    })
                    .collect();
                let mut read = k.read_dir(&e.path).unwrap();
                listed.sort();
                read.sort();
                assert_eq!(read, listed, "{}", e.path);
            }
            // Every link leads somewhere in the tree.
            SysfsKind::Symlink(_) => assert!(
                k.read_dir(&e.path).is_ok() || k.read_to_string(&e.path).is_ok(),
                "{} leads nowhere",
                e.path
            ),
        }
    }
    assert!(entries.len() > 100);
}
