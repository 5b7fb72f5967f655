//! The emulated sysfs: the KFD topology (`/sys/devices/virtual/kfd/kfd/topology`; node 0 is
//! the CPU, nodes `1..=n` the emulated GPUs, of the configured [`GpuArch`]) and the amdgpu
//! device files of each GPU.

use hcq_amd_sys::queue_areas::{NodeShape, QueueAreas};
use hcq_amd_sys::seam::TOPOLOGY_NODES;

use crate::chip::{Chip, GpuArch, IpBlock};
use crate::sysfs::{Sysfs, SysfsBuilder};

/// The KFD device, its topology (parent of `nodes`), and the classes linking to devices.
const KFD_DEVICE: &str = "/sys/devices/virtual/kfd/kfd";
const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology";
const KFD_CLASS: &str = "/sys/class/kfd";
const DRM_CLASS: &str = "/sys/class/drm";
const PCI_ROOT: &str = "/sys/devices/pci0000:00";

/// What the topology shows of one GPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuNode {
    pub arch: GpuArch,
    pub gpu_id: u32,
    pub render_minor: u32,
    pub vram_bytes: u64,
    pub shape: NodeShape,
}

/// The emulated topology.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    pub gpus: Vec<GpuNode>,
    pub cpu_cores: u32,
}

/// PCI address of the `i`-th GPU, matching the `location_id` (bus << 8 | devfn) of its node.
fn pci_address(node: u32) -> String {
    let location = location_id(node);
    format!(
        "0000:{:02x}:{:02x}.{}",
        location >> 8,
        (location & 0xff) >> 3,
        location & 7
    )
}

fn location_id(node: u32) -> u64 {
    34304 + 0x100 * u64::from(node)
}

impl Topology {
    /// `gpu_id` of the `i`-th GPU (0-based): non-zero, distinct, 16 bits (KFD encodes gpu ids
    /// in mmap offsets with 16 bits).
    pub fn gpu_id_for(index: u32) -> u32 {
        0x4a00 + 0x11 * (index + 1)
    }

    /// The sysfs a KFD program reads: the KFD topology (node 0 the CPU, then the GPUs), the
    /// `kfd` and `drm` classes, and for each GPU its PCI device directory with the render
    /// node and the IP discovery table.
    pub fn sysfs(&self) -> Sysfs {
        let mut t = SysfsBuilder::default();
        t.root(KFD_DEVICE);
        t.file(&format!("{TOPOLOGY}/generation_id"), "1\n");
        t.file(
            &format!("{TOPOLOGY}/system_properties"),
            "platform_oem 0\nplatform_id 0\nplatform_rev 0\n",
        );
        for node in 0..=self.gpus.len() as u32 {
            let dir = format!("{TOPOLOGY_NODES}/{node}");
            let gpu = node.checked_sub(1).and_then(|i| self.gpus.get(i as usize));
            t.file(
                &format!("{dir}/gpu_id"),
                format!("{}\n", gpu.map_or(0, |g| g.gpu_id)),
            );
            t.file(
                &format!("{dir}/name"),
                gpu.map_or("\n".to_string(), |g| format!("{}\n", g.arch.name())),
            );
            t.file(
                &format!("{dir}/properties"),
                match gpu {
                    Some(g) => gpu_properties(node, g),
                    None => self.cpu_properties(),
                },
            );
            t.file(
                &format!("{dir}/mem_banks/0/properties"),
                match gpu {
                    Some(g) => format!(
                        "heap_type 1\nsize_in_bytes {}\nflags 0\nwidth 64\nmem_clk_max {}\n",
                        g.vram_bytes,
                        g.arch.chip().memory_clock_mhz
                    ),
                    None => format!(
                        "heap_type 0\nsize_in_bytes {}\nflags 0\nwidth 64\nmem_clk_max 2400\n",
                        host_memory_bytes()
                    ),
                },
            );
            t.dir(&format!("{dir}/caches"));
            if let Some(g) = gpu {
                let base = simd_id_base(node);
                for (i, c) in gpu_caches(g.arch.chip(), &g.shape).iter().enumerate() {
                    t.file(
                        &format!("{dir}/caches/{i}/properties"),
                        c.properties(base, cus(&g.shape)),
                    );
                }
            }
            t.dir(&format!("{dir}/io_links"));
        }
        t.root(KFD_CLASS);
        t.symlink(&format!("{KFD_CLASS}/kfd"), "../../devices/virtual/kfd/kfd");
        t.root(DRM_CLASS);
        for (i, g) in self.gpus.iter().enumerate() {
            let pci = pci_address(i as u32 + 1);
            let device = format!("{PCI_ROOT}/{pci}");
            // Each device is a root of its own: the host's other PCI devices stay visible.
            t.root(&device);
            t.file(&format!("{device}/vendor"), "0x1002\n");
            let chip = g.arch.chip();
            t.file(
                &format!("{device}/device"),
                format!("{:#06x}\n", chip.device_id),
            );
            let render = format!("renderD{}", g.render_minor);
            t.file(
                &format!("{device}/drm/{render}/dev"),
                format!("226:{}\n", g.render_minor),
            );
            t.symlink(
                &format!("{device}/drm/{render}/device"),
                &format!("../../../{pci}"),
            );
            t.symlink(
                &format!("{DRM_CLASS}/{render}"),
                &format!("../../devices/pci0000:00/{pci}/drm/{render}"),
            );
            let die = format!("{device}/ip_discovery/die/0");
            for IpBlock {
                name,
                hw_id,
                version,
            } in chip.ip_blocks
            {
                let (hw_id, version) = (*hw_id, *version);
                let ip = format!("{die}/{hw_id}/0");
                t.file(&format!("{ip}/hw_id"), format!("{hw_id}\n"));
                t.file(&format!("{ip}/num_instance"), "0\n");
                for (file, value) in ["major", "minor", "revision"].into_iter().zip(version) {
                    t.file(&format!("{ip}/{file}"), format!("{value}\n"));
                }
                t.file(&format!("{ip}/harvest"), "0x0\n");
                // Linux also links each block's directory by name.
                t.symlink(&format!("{die}/{name}"), &hw_id.to_string());
            }
        }
        t.build()
    }

    fn cpu_properties(&self) -> String {
        let lines: [(&str, u64); 16] = [
            ("cpu_cores_count", u64::from(self.cpu_cores)),
            ("simd_count", 0),
            ("mem_banks_count", 1),
            ("caches_count", 0),
            ("io_links_count", self.gpus.len() as u64),
            ("p2p_links_count", 0),
            ("cpu_core_id_base", 0),
            ("simd_id_base", 0),
            ("max_waves_per_simd", 0),
            ("lds_size_in_kb", 0),
            ("gds_size_in_kb", 0),
            ("num_gws", 0),
            ("wave_front_size", 0),
            ("gfx_target_version", 0),
            ("drm_render_minor", 0),
            ("local_mem_size", 0),
        ];
        let mut text = String::new();
        for (k, v) in lines {
            text.push_str(&format!("{k} {v}\n"));
        }
        text
    }
}

/// The shape of an emulated gfx1100 with `cus` compute units: a Navi 31 in 6 shader engines
/// of 2 arrays, 96 CUs as the Radeon RX 7900 XTX, 84 as the RX 7900 XT. Its node's
/// `properties` say this, KFD's queue checks follow it, and the scratch ring spans its shader
/// engines.
pub(crate) fn gpu_shape(cus: u32) -> NodeShape {
    GpuArch::Gfx1100.shape(cus)
}

/// Shader engines of a shape.
pub(crate) fn shader_engines(s: &NodeShape) -> u32 {
    s.array_count / s.simd_arrays_per_engine.max(1)
}

/// What `CREATE_QUEUE` expects of the compute queues of a GPU of shape `s`.
pub(crate) fn gpu_queue_areas(s: &NodeShape) -> QueueAreas {
    QueueAreas::for_node(s).expect("every configurable GPU shape has queue areas")
}

/// Compute units of a GPU of shape `s`.
fn cus(s: &NodeShape) -> u32 {
    s.simd_count / s.simd_per_cu.max(1)
}

/// The `simd_id_base` of GPU node `node` (the first CU's id in KFD's processor numbering).
fn simd_id_base(node: u32) -> u64 {
    2_147_488_032 + 0x100 * u64::from(node)
}

/// `type` bits of a KFD cache entry.
const CACHE_DATA: u32 = 1;
const CACHE_INSTRUCTION: u32 = 2;
const CACHE_HSACU: u32 = 8;

/// One cache instance of a GPU node's `caches/N/properties`.
struct Cache {
    level: u32,
    kb: u32,
    line: u32,
    kind: u32,
    /// The CUs that share it: `first_cu..first_cu + cus`.
    first_cu: u32,
    cus: u32,
}

impl Cache {
    /// The file KFD writes (`kfd_cache_show`): sizes in KiB, and a sibling map of one 0/1
    /// per CU of the GPU, marking those that share the instance.
    fn properties(&self, simd_id_base: u64, gpu_cus: u32) -> String {
        let map: Vec<&str> = (0..gpu_cus)
            .map(|cu| {
                if (self.first_cu..self.first_cu + self.cus).contains(&cu) {
                    "1"
                } else {
                    "0"
                }
            })
            .collect();
        format!(
            "processor_id_low {}\nlevel {}\nsize {}\ncache_line_size {}\ncache_lines_per_tag 1\n\
             association 16\nlatency 1\ntype {}\nsibling_map {}\n",
            simd_id_base + u64::from(self.first_cu),
            self.level,
            self.kb,
            self.line,
            self.kind,
            map.join(",")
        )
    }
}

/// The caches KFD lists for a GPU of model `chip` and shape `s` (206 on an RX 7900 XTX): per
/// CU its vector L0 ("L1" to KFD); per pair of CUs (a WGP) an instruction and a scalar cache;
/// per shader array a GL1; and one L2 and one Infinity Cache (L3) for all CUs.
fn gpu_caches(chip: &Chip, s: &NodeShape) -> Vec<Cache> {
    let n = cus(s);
    let per_array = n / s.array_count.max(1);
    let l1 = |kb, line, kind, first_cu, cus| Cache {
        level: 1,
        kb,
        line,
        kind: kind | CACHE_HSACU,
        first_cu,
        cus,
    };
    let mut caches: Vec<Cache> = (0..n)
        .map(|cu| l1(chip.vector_l0_kb, 128, CACHE_DATA, cu, 1))
        .collect();
    caches.extend((0..n / 2).map(|w| l1(chip.instruction_kb, 64, CACHE_INSTRUCTION, 2 * w, 2)));
    caches.extend((0..n / 2).map(|w| l1(chip.scalar_kb, 64, CACHE_DATA, 2 * w, 2)));
    caches.extend(
        (0..s.array_count).map(|a| l1(chip.gl1_kb, 128, CACHE_DATA, a * per_array, per_array)),
    );
    for (level, kb) in [(2, chip.l2_kb), (3, chip.l3_kb)] {
        caches.push(Cache {
            level,
            kb,
            line: 128,
            kind: CACHE_DATA | CACHE_HSACU,
            first_cu: 0,
            cus: n,
        });
    }
    caches
}

/// The `properties` file of a GPU node, modelled on a Radeon RX 7900 XTX (gfx1100) and, for
/// the other models, with their identity, clocks, caches and copy engines.
fn gpu_properties(node: u32, g: &GpuNode) -> String {
    let s = g.shape;
    let chip = g.arch.chip();
    let lines: [(&str, u64); 38] = [
        ("cpu_cores_count", 0),
        ("simd_count", s.simd_count.into()),
        ("mem_banks_count", 1),
        ("caches_count", gpu_caches(chip, &s).len() as u64),
        ("io_links_count", 1),
        ("p2p_links_count", 0),
        ("cpu_core_id_base", 0),
        ("simd_id_base", simd_id_base(node)),
        ("max_waves_per_simd", 16),
        ("lds_size_in_kb", s.lds_size_in_kb.into()),
        ("gds_size_in_kb", 0),
        ("num_gws", 64),
        ("wave_front_size", 32),
        ("array_count", s.array_count.into()),
        ("simd_arrays_per_engine", s.simd_arrays_per_engine.into()),
        (
            "cu_per_simd_array",
            (s.simd_count / s.simd_per_cu / s.array_count).into(),
        ),
        ("simd_per_cu", s.simd_per_cu.into()),
        ("max_slots_scratch_cu", 32),
        ("gfx_target_version", s.gfx_target_version.into()),
        ("vendor_id", 4098),
        ("device_id", chip.device_id.into()),
        ("location_id", location_id(node)),
        ("domain", 0),
        ("drm_render_minor", u64::from(g.render_minor)),
        ("hive_id", 0),
        ("num_sdma_engines", chip.sdma_engines.into()),
        ("num_sdma_xgmi_engines", 0),
        (
            "num_sdma_queues_per_engine",
            chip.sdma_queues_per_engine.into(),
        ),
        ("num_cp_queues", 8),
        ("max_engine_clk_fcompute", chip.engine_clock_mhz),
        ("local_mem_size", g.vram_bytes),
        ("fw_version", 2140),
        ("capability", 671_588_992),
        ("debug_prop", 1495),
        ("sdma_fw_version", 20),
        ("unique_id", 0x0e3a_0000_0000_0000 | u64::from(g.gpu_id)),
        ("num_xcc", s.num_xcc.into()),
        ("max_engine_clk_ccompute", 2400),
    ];
    let mut text = String::new();
    for (k, v) in lines {
        text.push_str(&format!("{k} {v}\n"));
    }
    text
}

/// Physical memory of the host, for the CPU node's memory bank.
pub(crate) fn host_memory_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety requirements.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && size > 0 {
        (pages as u64).saturating_mul(size as u64)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rx_7900_xtx_lists_the_206_caches_kfd_lists_for_it() {
        // caches_count of a real RX 7900 XTX's topology node.
        let caches = gpu_caches(GpuArch::Gfx1100.chip(), &gpu_shape(96));
        assert_eq!(caches.len(), 206);
        let all: Vec<&Cache> = caches.iter().filter(|c| c.cus == 96).collect();
        assert_eq!(all.len(), 2, "one L2 and one Infinity Cache for every CU");
        // Every CU has its own vector cache, and each WGP's two CUs share the others.
        for cu in 0..96 {
            let mine = caches
                .iter()
                .filter(|c| c.level == 1 && (c.first_cu..c.first_cu + c.cus).contains(&cu))
                .count();
            assert_eq!(mine, 4, "CU {cu}: L0, instruction, scalar and GL1");
        }
        let text = caches[0].properties(simd_id_base(1), 96);
        let map = text
            .lines()
            .find_map(|l| l.strip_prefix("sibling_map "))
            .unwrap();
        assert_eq!(map.split(',').count(), 96);
        assert_eq!(map.split(',').filter(|b| *b == "1").count(), 1);
    }
}
