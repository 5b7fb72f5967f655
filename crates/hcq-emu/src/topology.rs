//! The KFD topology in sysfs (`/sys/devices/virtual/kfd/kfd/topology`): node 0 is the CPU,
//! nodes `1..=n` the emulated gfx1100 GPUs.

use std::io;

use hcq_amd_sys::seam::TOPOLOGY_NODES;

/// The topology directory (parent of `nodes`).
const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology";

/// What the topology shows of one GPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuNode {
    pub gpu_id: u32,
    pub render_minor: u32,
    pub vram_bytes: u64,
}

/// The emulated topology.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    pub gpus: Vec<GpuNode>,
    pub cpu_cores: u32,
}

fn not_found() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

fn not_dir() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOTDIR)
}

fn is_dir() -> io::Error {
    io::Error::from_raw_os_error(libc::EISDIR)
}

/// An entry of the tree: a directory listing or a file's text.
enum Entry {
    Dir(Vec<String>),
    File(String),
}

impl Topology {
    /// `gpu_id` of the `i`-th GPU (0-based): non-zero, distinct, 16 bits (KFD encodes gpu ids
    /// in mmap offsets with 16 bits).
    pub fn gpu_id_for(index: u32) -> u32 {
        0x4a00 + 0x11 * (index + 1)
    }

    pub fn read_to_string(&self, path: &str) -> io::Result<String> {
        match self.lookup(path)? {
            Entry::File(text) => Ok(text),
            Entry::Dir(_) => Err(is_dir()),
        }
    }

    pub fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        match self.lookup(path)? {
            Entry::Dir(names) => Ok(names),
            Entry::File(_) => Err(not_dir()),
        }
    }

    fn lookup(&self, path: &str) -> io::Result<Entry> {
        let path = path.trim_end_matches('/');
        let strs = |v: &[&str]| Entry::Dir(v.iter().map(|s| s.to_string()).collect());
        if path == TOPOLOGY {
            return Ok(strs(&["generation_id", "system_properties", "nodes"]));
        }
        if let Some(rest) = path
            .strip_prefix(TOPOLOGY)
            .and_then(|r| r.strip_prefix('/'))
        {
            match rest {
                "generation_id" => return Ok(Entry::File("1\n".into())),
                "system_properties" => {
                    return Ok(Entry::File(
                        "platform_oem 0\nplatform_id 0\nplatform_rev 0\n".into(),
                    ))
                }
                _ => {}
            }
        }
        if path == TOPOLOGY_NODES {
            return Ok(Entry::Dir(
                (0..=self.gpus.len()).map(|n| n.to_string()).collect(),
            ));
        }
        let rest = path
            .strip_prefix(TOPOLOGY_NODES)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(not_found)?;
        let mut parts = rest.split('/');
        let node_text = parts.next().ok_or_else(not_found)?;
        // Only canonical decimal node numbers exist ("01" does not).
        let node: usize = node_text.parse().map_err(|_| not_found())?;
        if node.to_string() != node_text || node > self.gpus.len() {
            return Err(not_found());
        }
        let gpu = if node == 0 {
            None
        } else {
            self.gpus.get(node - 1)
        };
        let tail: Vec<&str> = parts.collect();
        Ok(match tail.as_slice() {
            [] => strs(&[
                "gpu_id",
                "name",
                "properties",
                "mem_banks",
                "caches",
                "io_links",
            ]),
            ["gpu_id"] => Entry::File(format!("{}\n", gpu.map_or(0, |g| g.gpu_id))),
            ["name"] => Entry::File(if gpu.is_some() {
                "gfx1100\n".into()
            } else {
                "\n".into()
            }),
            ["properties"] => Entry::File(match gpu {
                Some(g) => gpu_properties(node as u32, g),
                None => self.cpu_properties(),
            }),
            ["mem_banks"] => strs(&["0"]),
            ["mem_banks", "0"] => strs(&["properties"]),
            ["mem_banks", "0", "properties"] => Entry::File(match gpu {
                Some(g) => format!(
                    "heap_type 1\nsize_in_bytes {}\nflags 0\nwidth 64\nmem_clk_max 1249\n",
                    g.vram_bytes
                ),
                None => format!(
                    "heap_type 0\nsize_in_bytes {}\nflags 0\nwidth 64\nmem_clk_max 2400\n",
                    host_memory_bytes()
                ),
            }),
            ["caches"] | ["io_links"] => Entry::Dir(Vec::new()),
            _ => return Err(not_found()),
        })
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

/// The `properties` file of a GPU node, modelled on a Radeon RX 7900 XTX (gfx1100).
fn gpu_properties(node: u32, g: &GpuNode) -> String {
    let lines: [(&str, u64); 38] = [
        ("cpu_cores_count", 0),
        ("simd_count", 192),
        ("mem_banks_count", 1),
        ("caches_count", 206),
        ("io_links_count", 1),
        ("p2p_links_count", 0),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 2_147_488_032 + 0x100 * u64::from(node)),
        ("max_waves_per_simd", 16),
        ("lds_size_in_kb", 64),
        ("gds_size_in_kb", 0),
        ("num_gws", 64),
        ("wave_front_size", 32),
        ("array_count", 12),
        ("simd_arrays_per_engine", 2),
        ("cu_per_simd_array", 8),
        ("simd_per_cu", 2),
        ("max_slots_scratch_cu", 32),
        ("gfx_target_version", 110_000),
        ("vendor_id", 4098),
        ("device_id", 29772),
        ("location_id", 34304 + 0x100 * u64::from(node)),
        ("domain", 0),
        ("drm_render_minor", u64::from(g.render_minor)),
        ("hive_id", 0),
        ("num_sdma_engines", 2),
        ("num_sdma_xgmi_engines", 0),
        ("num_sdma_queues_per_engine", 6),
        ("num_cp_queues", 8),
        ("max_engine_clk_fcompute", 2482),
        ("local_mem_size", g.vram_bytes),
        ("fw_version", 2140),
        ("capability", 671_588_992),
        ("debug_prop", 1495),
        ("sdma_fw_version", 20),
        ("unique_id", 0x0e3a_0000_0000_0000 | u64::from(g.gpu_id)),
        ("num_xcc", 1),
        ("max_engine_clk_ccompute", 2400),
    ];
    let mut text = String::new();
    for (k, v) in lines {
        text.push_str(&format!("{k} {v}\n"));
    }
    text
}

/// Physical memory of the host, for the CPU node's memory bank.
fn host_memory_bytes() -> u64 {
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
