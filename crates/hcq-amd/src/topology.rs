//! GPU nodes from the KFD topology in sysfs.

use hcq_amd_sys::queue_areas::{NodeShape, QueueAreas};
use hcq_amd_sys::seam::{Syscalls, TOPOLOGY_NODES};
use hcq_core::{Error, Result};
use std::collections::HashMap;

/// One GPU node of the topology, which hcq may or may not be able to drive
/// ([`GpuNode::unsupported`]).
#[derive(Debug, Clone)]
pub struct GpuNode {
    /// The sysfs node number.
    pub node: u32,
    /// KFD's id of the GPU, which every ioctl names it by.
    pub gpu_id: u32,
    /// The node's `properties` file, name to value.
    pub properties: HashMap<String, u64>,
    /// e.g. `gfx1100` (`unknown` when KFD does not say).
    pub arch: String,
    /// The node's caches, grouped by kind (`caches/N/properties`).
    pub caches: Vec<hcq_core::CacheInfo>,
    /// Why hcq cannot drive this GPU (its architecture: [`unsupported_reason`]), or `None`
    /// when it can. Such a GPU is listed, and opening it is an error saying this.
    pub unsupported: Option<String>,
}

/// The architectures hcq drives: RDNA3's Navi 3x GPUs (Radeon RX 7000 and PRO W7000). What
/// the driver writes is theirs: machine code for their target (or gfx11-generic), gfx11's
/// dispatch setup, and the HDP flush through NBIO 4.3's registers where Navi 3x's IP
/// discovery table places them ([`hcq_amd_sys::regs::GPU_HDP_FLUSH_REQ`]). The RDNA3 APUs
/// (gfx1103, gfx1150 and on) have other NBIO blocks; other generations other machine code.
pub const SUPPORTED_ARCHS: [&str; 3] = ["gfx1100", "gfx1101", "gfx1102"];

/// Why hcq cannot drive a GPU of architecture `arch` (a compiler target name), or `None` when
/// it can.
pub fn unsupported_reason(arch: &str) -> Option<String> {
    if SUPPORTED_ARCHS.contains(&arch) {
        return None;
    }
    Some(format!(
        "unsupported architecture {arch}: hcq drives only RDNA3's Navi 3x GPUs ({}), whose \
         machine code, dispatch setup and HDP flush registers it is written for",
        SUPPORTED_ARCHS.join(", ")
    ))
}

impl GpuNode {
    /// A property by name; [`Error::Unsupported`] naming it when the node lacks it.
    pub fn prop(&self, name: &str) -> Result<u64> {
        self.properties.get(name).copied().ok_or_else(|| {
            Error::Unsupported(format!(
                "KFD topology node {} lacks property {name}",
                self.node
            ))
        })
    }
}

impl GpuNode {
    /// The sizes KFD expects of a compute queue's EOP buffer, control stack and context save
    /// area on this node, computed from its shape as the kernel computes them (Linux 6.12
    /// refuses any other sizes).
    pub fn queue_areas(&self) -> Result<QueueAreas> {
        let prop = |name: &str| -> Result<u32> {
            u32::try_from(self.prop(name)?).map_err(|_| {
                Error::Unsupported(format!(
                    "KFD topology node {}: property {name} is out of range",
                    self.node
                ))
            })
        };
        let shape = NodeShape {
            gfx_target_version: prop("gfx_target_version")?,
            simd_count: prop("simd_count")?,
            simd_per_cu: prop("simd_per_cu")?,
            // Older kernels do not list XCCs: their GPUs have one.
            num_xcc: self
                .properties
                .get("num_xcc")
                .map_or(Ok(1), |_| prop("num_xcc"))?,
            array_count: prop("array_count")?,
            simd_arrays_per_engine: prop("simd_arrays_per_engine")?,
            lds_size_in_kb: prop("lds_size_in_kb")?,
        };
        QueueAreas::for_node(&shape).ok_or_else(|| {
            Error::Unsupported(format!(
                "KFD topology node {} ({}): no compute-queue context save area for its shape \
                 {shape:?}",
                self.node, self.arch
            ))
        })
    }
}

/// `gfx_target_version` (e.g. 110000) as a compiler target name (`gfx1100`).
pub fn arch_name(target_version: u64) -> String {
    format!(
        "gfx{}{:x}{:x}",
        target_version / 10000,
        (target_version / 100) % 100,
        target_version % 100
    )
}

/// Parses a `properties` file: one `name value` pair per line; malformed lines are skipped.
pub fn parse_properties(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (k, v) = (it.next()?, it.next()?);
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// All GPU nodes, ordered by node number, whether hcq can drive them or not
/// ([`GpuNode::unsupported`]); CPU nodes (`gpu_id` 0, or no SIMDs) are skipped.
pub fn gpu_nodes(kernel: &dyn Syscalls) -> Result<Vec<GpuNode>> {
    let entries = kernel
        .read_dir(TOPOLOGY_NODES)
        .map_err(|source| Error::Io {
            what: format!("reading {TOPOLOGY_NODES}"),
            source,
        })?;
    let mut nodes: Vec<u32> = entries.iter().filter_map(|e| e.parse().ok()).collect();
    nodes.sort_unstable();
    let mut gpus = Vec::new();
    for node in nodes {
        let dir = format!("{TOPOLOGY_NODES}/{node}");
        let gpu_id: u32 = match kernel.read_to_string(&format!("{dir}/gpu_id")) {
            Ok(s) => s.trim().parse().unwrap_or(0),
            Err(_) => 0,
        };
        if gpu_id == 0 {
            continue;
        }
        let text = kernel
            .read_to_string(&format!("{dir}/properties"))
            .map_err(|source| Error::Io {
                what: format!("reading {dir}/properties"),
                source,
            })?;
        let mut properties = parse_properties(&text);
        if properties.get("simd_count").copied().unwrap_or(0) == 0 {
            continue;
        }
        if properties.get("local_mem_size").copied().unwrap_or(0) == 0 {
            properties.insert("local_mem_size".into(), vram_bytes(kernel, &dir));
        }
        // A kernel that does not give the architecture leaves hcq nothing to check it by: the
        // GPU is listed as one it cannot drive, not dropped without a word.
        let (arch, unsupported) = match properties.get("gfx_target_version") {
            Some(&target) => {
                let arch = arch_name(target);
                let why = unsupported_reason(&arch);
                (arch, why)
            }
            None => (
                "unknown".to_string(),
                Some(format!(
                    "unknown architecture: KFD's topology does not give it (node {node} has \
                     no gfx_target_version, which older kernels do not publish)"
                )),
            ),
        };
        gpus.push(GpuNode {
            node,
            gpu_id,
            caches: caches(kernel, &dir),
            arch,
            unsupported,
            properties,
        });
    }
    Ok(gpus)
}

/// The node's caches (`caches/N/properties`, one per instance, sizes in KiB, the CUs sharing
/// one marked in its `sibling_map`) grouped by kind, level by level; none when unreadable.
fn caches(kernel: &dyn Syscalls, node_dir: &str) -> Vec<hcq_core::CacheInfo> {
    let dir = format!("{node_dir}/caches");
    let Ok(entries) = kernel.read_dir(&dir) else {
        return Vec::new();
    };
    let mut kinds: Vec<hcq_core::CacheInfo> = Vec::new();
    for entry in entries {
        let Ok(text) = kernel.read_to_string(&format!("{dir}/{entry}/properties")) else {
            continue;
        };
        let p = parse_properties(&text);
        let (Some(&level), Some(&kb), Some(&kind)) = (p.get("level"), p.get("size"), p.get("type"))
        else {
            continue;
        };
        let shared_by_cus = text
            .lines()
            .find_map(|l| l.strip_prefix("sibling_map "))
            .map_or(0, |m| {
                m.split(',').filter(|b| b.trim() == "1").count() as u32
            });
        let info = hcq_core::CacheInfo {
            level: level as u32,
            data: kind & 1 != 0,
            instruction: kind & 2 != 0,
            bytes: kb * 1024,
            shared_by_cus,
            instances: 1,
        };
        match kinds.iter_mut().find(|k| {
            (k.level, k.data, k.instruction, k.bytes, k.shared_by_cus)
                == (
                    info.level,
                    info.data,
                    info.instruction,
                    info.bytes,
                    info.shared_by_cus,
                )
        }) {
            Some(k) => k.instances += 1,
            None => kinds.push(info),
        }
    }
    kinds.sort_by_key(|k| (k.level, k.bytes, k.instruction));
    kinds
}

/// Device memory from the node's memory banks (heap types 1 and 2 are VRAM).
fn vram_bytes(kernel: &dyn Syscalls, node_dir: &str) -> u64 {
    let banks = format!("{node_dir}/mem_banks");
    let Ok(entries) = kernel.read_dir(&banks) else {
        return 0;
    };
    entries
        .iter()
        .filter_map(|b| {
            kernel
                .read_to_string(&format!("{banks}/{b}/properties"))
                .ok()
        })
        .map(|t| parse_properties(&t))
        .filter(|p| matches!(p.get("heap_type"), Some(1) | Some(2)))
        .filter_map(|p| p.get("size_in_bytes").copied())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        assert_eq!(arch_name(110000), "gfx1100");
        assert_eq!(arch_name(110001), "gfx1101");
        assert_eq!(arch_name(90010), "gfx90a");
        assert_eq!(arch_name(100300), "gfx1030");
    }

    #[test]
    fn only_navi_3x_is_supported_and_every_other_architecture_says_so() {
        for arch in ["gfx1100", "gfx1101", "gfx1102"] {
            assert_eq!(unsupported_reason(arch), None, "{arch}");
        }
        // Other RDNA3 parts (APUs), other generations, and names that are no target.
        for arch in [
            "gfx1103", "gfx1150", "gfx1151", "gfx1030", "gfx90a", "gfx942", "gfx1200", "gfx11", "",
        ] {
            let why = unsupported_reason(arch).unwrap_or_else(|| panic!("{arch} supported"));
            assert!(
                why.starts_with(&format!("unsupported architecture {arch}: ")),
                "{why}"
            );
            assert!(why.contains("gfx1100, gfx1101, gfx1102"), "{why}");
        }
    }

    #[test]
    fn properties_parse_and_skip_junk() {
        let p = parse_properties("simd_count 192\nbad\nname x\ndrm_render_minor 128\n");
        assert_eq!(p["simd_count"], 192);
        assert_eq!(p["drm_render_minor"], 128);
        assert_eq!(p.len(), 2);
    }
}
