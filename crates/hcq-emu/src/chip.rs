//! The GPU models an emulated GPU can be ([`GpuArch`], `HCQ_EMU_ARCH`), and the facts about each
//! that the kernel driver publishes: the topology node's shape, identity, caches, clocks and
//! copy engines, the PCI device, the IP discovery table and amdgpu's `DEV_INFO`.
//!
//! The emulator runs one of them, the gfx1100: its RDNA3 interpreter executes the machine code
//! and its register model is that GPU's. The others are there to be *seen*: a GPU that a driver
//! written for RDNA3 meets on a real machine (an older Radeon beside the new one, or instead of
//! it) is published as the kernel publishes it, and KFD's ioctls answer for it as for any GPU
//! (memory, events, queues), but its engines run nothing: every dispatch on it and every
//! register access is reported as not modelled, rather than run as if it were a gfx1100.

use hcq_amd_sys::queue_areas::NodeShape;

/// Which GPU each emulated GPU is (`HCQ_EMU_ARCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuArch {
    /// gfx1100 (Navi 31, RDNA3): a Radeon RX 7900 XTX, or with fewer compute units
    /// ([`crate::EmuConfig::cus`]) an RX 7900 XT and smaller parts. The emulator runs it.
    #[default]
    Gfx1100,
    /// gfx1030 (Navi 21, RDNA2): a Radeon RX 6900 XT, 80 compute units in 4 shader engines.
    /// Published and answered as the kernel driver would, but its engines run nothing (see the
    /// module documentation): for testing what a program does with a GPU it does not drive.
    Gfx1030,
}

impl GpuArch {
    /// Every model, default first.
    pub const ALL: [GpuArch; 2] = [GpuArch::Gfx1100, GpuArch::Gfx1030];

    /// The value `HCQ_EMU_ARCH` takes for it: the compiler's target name.
    pub fn name(self) -> &'static str {
        self.chip().target
    }

    /// Parses a `HCQ_EMU_ARCH` value.
    pub fn from_name(name: &str) -> Option<GpuArch> {
        GpuArch::ALL.into_iter().find(|a| a.name() == name.trim())
    }

    /// Whether the emulator executes this GPU's engines (its machine code and registers).
    pub fn runs(self) -> bool {
        self == GpuArch::Gfx1100
    }

    /// Compute units of a GPU of this model configured with `cus`: the gfx1100 takes the
    /// configured count, the others have their board's.
    pub fn compute_units(self, cus: u32) -> u32 {
        match self {
            GpuArch::Gfx1100 => cus,
            _ => self.chip().full_cus,
        }
    }

    pub(crate) fn chip(self) -> &'static Chip {
        match self {
            GpuArch::Gfx1100 => &GFX1100,
            GpuArch::Gfx1030 => &GFX1030,
        }
    }

    /// The shape its topology node publishes with `cus` compute units (see
    /// [`GpuArch::compute_units`]).
    pub(crate) fn shape(self, cus: u32) -> NodeShape {
        let c = self.chip();
        NodeShape {
            gfx_target_version: c.gfx_target_version,
            simd_count: 2 * self.compute_units(cus),
            simd_per_cu: 2,
            num_xcc: 1,
            array_count: c.shader_engines * c.arrays_per_engine,
            simd_arrays_per_engine: c.arrays_per_engine,
            lds_size_in_kb: 64,
        }
    }
}

/// A block of the die as its IP discovery table lists it.
pub(crate) struct IpBlock {
    pub name: &'static str,
    /// `soc15_hw_ip.h`'s hardware id.
    pub hw_id: u32,
    /// Major, minor, revision.
    pub version: [u32; 3],
}

/// What the kernel driver publishes about one GPU model. Both are RDNA parts: two SIMD32s per
/// compute unit, wave32, 16 waves per SIMD, 64 KiB of LDS per workgroup, and the same firmware
/// and capability fields in the topology (hcq's driver reads none of those).
pub(crate) struct Chip {
    /// The compiler's target name (`gfx1100`), also the node's `name` file.
    pub target: &'static str,
    /// KFD's `gfx_target_version`.
    pub gfx_target_version: u32,
    /// PCI device id.
    pub device_id: u32,
    /// amdgpu's `AMDGPU_FAMILY_*`.
    pub family: u32,
    pub shader_engines: u32,
    pub arrays_per_engine: u32,
    /// Compute units of the full board.
    pub full_cus: u32,
    /// `max_engine_clk_fcompute`, MHz.
    pub engine_clock_mhz: u64,
    /// The memory bank's `mem_clk_max`, MHz.
    pub memory_clock_mhz: u64,
    pub vram_bit_width: u32,
    /// Cache sizes in KiB: each CU's vector L0 ("L1" to KFD), each WGP's instruction and
    /// scalar caches, each shader array's GL1, the L2 and the Infinity Cache (L3).
    pub vector_l0_kb: u32,
    pub instruction_kb: u32,
    pub scalar_kb: u32,
    pub gl1_kb: u32,
    pub l2_kb: u32,
    pub l3_kb: u32,
    /// Copy engines, and SDMA queues KFD gives user processes on each.
    pub sdma_engines: u32,
    pub sdma_queues_per_engine: u32,
    pub ip_blocks: &'static [IpBlock],
}

/// A Radeon RX 7900 XTX (Navi 31).
static GFX1100: Chip = Chip {
    target: "gfx1100",
    gfx_target_version: 110_000,
    device_id: 0x744c,
    family: hcq_amd_sys::drm::AMDGPU_FAMILY_GC_11_0_0,
    shader_engines: 6,
    arrays_per_engine: 2,
    full_cus: 96,
    engine_clock_mhz: 2482,
    memory_clock_mhz: 1249,
    vram_bit_width: 384,
    vector_l0_kb: 32,
    instruction_kb: 32,
    scalar_kb: 16,
    gl1_kb: 256,
    l2_kb: 6 << 10,
    l3_kb: 96 << 10,
    // KFD keeps 2 of each SDMA 6 engine's 8 queues for the kernel (paging and graphics).
    sdma_engines: 2,
    sdma_queues_per_engine: 6,
    // The blocks a compute client reads (GC, SDMA, NBIF) and the hubs beside them, each with
    // one instance.
    ip_blocks: &[
        IpBlock {
            name: "GC",
            hw_id: 11,
            version: [11, 0, 0],
        },
        IpBlock {
            name: "MMHUB",
            hw_id: 34,
            version: [3, 0, 0],
        },
        IpBlock {
            name: "OSSSYS",
            hw_id: 40,
            version: [6, 0, 0],
        },
        IpBlock {
            name: "HDP",
            hw_id: 41,
            version: [6, 0, 0],
        },
        IpBlock {
            name: "SDMA0",
            hw_id: 42,
            version: [6, 0, 0],
        },
        IpBlock {
            name: "SDMA1",
            hw_id: 43,
            version: [6, 0, 0],
        },
        IpBlock {
            name: "NBIF",
            hw_id: 108,
            version: [4, 3, 0],
        },
    ],
};

/// A Radeon RX 6900 XT (Navi 21, amdgpu's "sienna cichlid").
static GFX1030: Chip = Chip {
    target: "gfx1030",
    gfx_target_version: 100_300,
    device_id: 0x73bf,
    family: hcq_amd_sys::drm::AMDGPU_FAMILY_NV,
    shader_engines: 4,
    arrays_per_engine: 2,
    full_cus: 80,
    engine_clock_mhz: 2250,
    // 16 Gbps GDDR6 on a 256-bit bus.
    memory_clock_mhz: 1000,
    vram_bit_width: 256,
    vector_l0_kb: 16,
    instruction_kb: 32,
    scalar_kb: 16,
    gl1_kb: 128,
    l2_kb: 4 << 10,
    l3_kb: 128 << 10,
    // Four SDMA 5.2 engines, whose 8 queues each KFD all gives to user processes.
    sdma_engines: 4,
    sdma_queues_per_engine: 8,
    ip_blocks: &[
        IpBlock {
            name: "GC",
            hw_id: 11,
            version: [10, 3, 0],
        },
        IpBlock {
            name: "MMHUB",
            hw_id: 34,
            version: [2, 1, 0],
        },
        IpBlock {
            name: "OSSSYS",
            hw_id: 40,
            version: [5, 0, 3],
        },
        IpBlock {
            name: "HDP",
            hw_id: 41,
            version: [5, 0, 3],
        },
        IpBlock {
            name: "SDMA0",
            hw_id: 42,
            version: [5, 2, 0],
        },
        IpBlock {
            name: "SDMA1",
            hw_id: 43,
            version: [5, 2, 0],
        },
        IpBlock {
            name: "SDMA2",
            hw_id: 68,
            version: [5, 2, 0],
        },
        IpBlock {
            name: "SDMA3",
            hw_id: 69,
            version: [5, 2, 0],
        },
        IpBlock {
            name: "NBIF",
            hw_id: 108,
            version: [3, 3, 0],
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_the_gfx1100_runs() {
        for a in GpuArch::ALL {
            assert_eq!(GpuArch::from_name(a.name()), Some(a));
            assert_eq!(GpuArch::from_name(&format!(" {} ", a.name())), Some(a));
        }
        assert_eq!(GpuArch::from_name("gfx90a"), None);
        assert_eq!(GpuArch::default(), GpuArch::Gfx1100);
        assert!(GpuArch::Gfx1100.runs() && !GpuArch::Gfx1030.runs());
    }

    #[test]
    fn each_model_has_its_boards_shape() {
        // gfx_target_version is major * 10000 + minor * 100 + stepping, as the target name.
        for a in GpuArch::ALL {
            let v = a.chip().gfx_target_version;
            let name = format!("gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100);
            assert_eq!(name, a.name());
        }
        let navi21 = GpuArch::Gfx1030.shape(84);
        assert_eq!(navi21.simd_count / navi21.simd_per_cu, 80, "its own 80 CUs");
        assert_eq!((navi21.array_count, navi21.simd_arrays_per_engine), (8, 2));
        let navi31 = GpuArch::Gfx1100.shape(84);
        assert_eq!(navi31.simd_count / navi31.simd_per_cu, 84);
        assert_eq!((navi31.array_count, navi31.simd_arrays_per_engine), (12, 2));
        for a in GpuArch::ALL {
            let c = a.chip();
            let sdma = c.ip_blocks.iter().filter(|b| b.name.starts_with("SDMA"));
            assert_eq!(sdma.count() as u32, c.sdma_engines, "{}", c.target);
        }
    }
}
