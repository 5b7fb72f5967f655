//! The DRM render-node ABI of the amdgpu driver (`drm/drm.h` and `drm/amdgpu_drm.h` of Linux
//! 6.x): the ioctls a KFD program issues on `/dev/dri/renderD<minor>` besides handing the node
//! to `ACQUIRE_VM`. Only the version query and the information queries are declared; every
//! struct is `#[repr(C)]` with the header's field order (as of Linux 6.16, whose structs end in
//! fields older headers lack: the kernel answers a shorter struct with its prefix), and the
//! tests below check sizes and offsets.
//!
//! DRM tolerates a size mismatch between the request and the kernel's struct (a shorter
//! argument is zero-extended, a longer one truncated), so a request is matched by its type
//! byte and number, not its size: see [`request_nr`] and [`request_size`].
//!
//! `missing_docs` is allowed in this module: the names, types and order of the structs, fields
//! and constants mirroring `drm/drm.h` and `drm/amdgpu_drm.h` are the kernel's uapi headers',
//! which document them. Items of hcq's own (the request helpers) carry their docs here.

#![allow(missing_docs)]

/// The ioctl type byte of every DRM request (`DRM_IOCTL_BASE`).
pub const DRM_IOCTL_BASE: u8 = b'd';
/// First request number of the driver's own ioctls (`DRM_COMMAND_BASE`); below are DRM core's.
pub const DRM_COMMAND_BASE: u64 = 0x40;
/// One past the last driver request number (`DRM_COMMAND_END`).
pub const DRM_COMMAND_END: u64 = 0xa0;

use crate::ioctl::{request_dir, Ioctl, DIR_READ, DIR_WRITE};
pub use crate::ioctl::{request_nr, request_size, request_type};

/// Whether the kernel reads the argument (`IOC_IN`, which Linux calls `_IOC_WRITE`).
pub const fn request_reads_argument(request: u64) -> bool {
    request_dir(request) & DIR_WRITE != 0
}
/// Whether the kernel writes the argument back (`IOC_OUT`, Linux's `_IOC_READ`).
pub const fn request_writes_argument(request: u64) -> bool {
    request_dir(request) & DIR_READ != 0
}

/// `DRM_IOCTL_VERSION` (`DRM_IOWR(0x00, struct drm_version)`): the driver's name, date,
/// description and version.
pub const IOC_VERSION: Ioctl<DrmVersion> = Ioctl::declare(0xc040_6400, "DRM_IOCTL_VERSION");
/// amdgpu's number of `DRM_IOCTL_AMDGPU_INFO`, relative to [`DRM_COMMAND_BASE`].
pub const AMDGPU_INFO: u64 = 0x05;

/// `DRM_IOCTL_AMDGPU_INFO` (`DRM_IOW(DRM_COMMAND_BASE + 0x05, struct drm_amdgpu_info)`: the
/// kernel writes its answer to `return_pointer`, not to the argument).
pub const IOC_AMDGPU_INFO: Ioctl<AmdgpuInfo> = Ioctl::declare(0x4020_6445, "DRM_IOCTL_AMDGPU_INFO");

/// Every render-node request hcq declares, for decoding a raw request number: the emulated
/// kernel's dispatcher and `hcq exec`'s view of a foreign program's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrmIoctl {
    /// [`IOC_VERSION`].
    Version,
    /// [`IOC_AMDGPU_INFO`].
    AmdgpuInfo,
}

impl DrmIoctl {
    /// Every declared request.
    pub const ALL: [DrmIoctl; 2] = [DrmIoctl::Version, DrmIoctl::AmdgpuInfo];

    /// The request as its typed constant encodes it.
    pub const fn request(self) -> u64 {
        match self {
            DrmIoctl::Version => IOC_VERSION.request(),
            DrmIoctl::AmdgpuInfo => IOC_AMDGPU_INFO.request(),
        }
    }

    /// The declared request with `request`'s number, found as `drm_ioctl` finds it: by number
    /// alone (the size is reconciled with the struct's by whoever moves the argument). `None`
    /// for a number hcq does not declare.
    pub fn decode(request: u64) -> Option<DrmIoctl> {
        DrmIoctl::ALL
            .into_iter()
            .find(|d| request_nr(d.request()) == request_nr(request))
    }
}

/// `struct drm_version`. The kernel fills each buffer with up to its length of the string (no
/// terminating NUL) and sets each length to the string's full length.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrmVersion {
    pub version_major: i32,
    pub version_minor: i32,
    pub version_patchlevel: i32,
    pub name_len: usize,
    pub name: u64,
    pub date_len: usize,
    pub date: u64,
    pub desc_len: usize,
    pub desc: u64,
}

/// `struct drm_amdgpu_info`: what to query and where the answer goes. The header's union of
/// per-query arguments is `query_args`: `AMDGPU_INFO_HW_IP_INFO`/`_COUNT` read `[type,
/// ip_instance]`, `AMDGPU_INFO_FW_VERSION` reads `[fw_type, ip_instance, index]`
/// (`struct drm_amdgpu_query_fw`), `AMDGPU_INFO_READ_MMR_REG` reads `[dword_offset, count,
/// instance, flags]`, `AMDGPU_INFO_SENSOR` and `AMDGPU_INFO_VIDEO_CAPS` read `[type]`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct AmdgpuInfo {
    pub return_pointer: u64,
    /// Most bytes the kernel may write at `return_pointer`; a shorter answer is truncated.
    pub return_size: u32,
    pub query: u32,
    pub query_args: [u32; 4],
}

pub const AMDGPU_INFO_ACCEL_WORKING: u32 = 0x00;
pub const AMDGPU_INFO_CRTC_FROM_ID: u32 = 0x01;
pub const AMDGPU_INFO_HW_IP_INFO: u32 = 0x02;
pub const AMDGPU_INFO_HW_IP_COUNT: u32 = 0x03;
pub const AMDGPU_INFO_TIMESTAMP: u32 = 0x05;
pub const AMDGPU_INFO_FW_VERSION: u32 = 0x0e;
pub const AMDGPU_INFO_NUM_BYTES_MOVED: u32 = 0x0f;
pub const AMDGPU_INFO_VRAM_USAGE: u32 = 0x10;
pub const AMDGPU_INFO_GTT_USAGE: u32 = 0x11;
pub const AMDGPU_INFO_GDS_CONFIG: u32 = 0x13;
pub const AMDGPU_INFO_VRAM_GTT: u32 = 0x14;
pub const AMDGPU_INFO_READ_MMR_REG: u32 = 0x15;
pub const AMDGPU_INFO_DEV_INFO: u32 = 0x16;
pub const AMDGPU_INFO_VIS_VRAM_USAGE: u32 = 0x17;
pub const AMDGPU_INFO_NUM_EVICTIONS: u32 = 0x18;
pub const AMDGPU_INFO_MEMORY: u32 = 0x19;
pub const AMDGPU_INFO_VCE_CLOCK_TABLE: u32 = 0x1a;
pub const AMDGPU_INFO_VBIOS: u32 = 0x1b;
pub const AMDGPU_INFO_NUM_HANDLES: u32 = 0x1c;
pub const AMDGPU_INFO_SENSOR: u32 = 0x1d;
pub const AMDGPU_INFO_NUM_VRAM_CPU_PAGE_FAULTS: u32 = 0x1e;
pub const AMDGPU_INFO_VRAM_LOST_COUNTER: u32 = 0x1f;
pub const AMDGPU_INFO_RAS_ENABLED_FEATURES: u32 = 0x20;
pub const AMDGPU_INFO_VIDEO_CAPS: u32 = 0x21;
pub const AMDGPU_INFO_MAX_IBS: u32 = 0x22;

/// Firmware kinds of `AMDGPU_INFO_FW_VERSION` (`AMDGPU_INFO_FW_*`).
pub const AMDGPU_INFO_FW_VCE: u32 = 0x01;
pub const AMDGPU_INFO_FW_UVD: u32 = 0x02;
pub const AMDGPU_INFO_FW_GMC: u32 = 0x03;
pub const AMDGPU_INFO_FW_GFX_ME: u32 = 0x04;
pub const AMDGPU_INFO_FW_GFX_PFP: u32 = 0x05;
pub const AMDGPU_INFO_FW_GFX_CE: u32 = 0x06;
pub const AMDGPU_INFO_FW_GFX_RLC: u32 = 0x07;
pub const AMDGPU_INFO_FW_GFX_MEC: u32 = 0x08;
pub const AMDGPU_INFO_FW_SMC: u32 = 0x0a;
pub const AMDGPU_INFO_FW_SDMA: u32 = 0x0b;
pub const AMDGPU_INFO_FW_SOS: u32 = 0x0c;
pub const AMDGPU_INFO_FW_ASD: u32 = 0x0d;
pub const AMDGPU_INFO_FW_VCN: u32 = 0x0e;
pub const AMDGPU_INFO_FW_GFX_RLC_RESTORE_LIST_CNTL: u32 = 0x0f;
pub const AMDGPU_INFO_FW_GFX_RLC_RESTORE_LIST_GPM_MEM: u32 = 0x10;
pub const AMDGPU_INFO_FW_GFX_RLC_RESTORE_LIST_SRM_MEM: u32 = 0x11;
pub const AMDGPU_INFO_FW_DMCU: u32 = 0x12;
pub const AMDGPU_INFO_FW_TA: u32 = 0x13;
pub const AMDGPU_INFO_FW_DMCUB: u32 = 0x14;
pub const AMDGPU_INFO_FW_TOC: u32 = 0x15;
pub const AMDGPU_INFO_FW_CAP: u32 = 0x16;
pub const AMDGPU_INFO_FW_GFX_RLCP: u32 = 0x17;
pub const AMDGPU_INFO_FW_GFX_RLCV: u32 = 0x18;
pub const AMDGPU_INFO_FW_MES_KIQ: u32 = 0x19;
pub const AMDGPU_INFO_FW_MES: u32 = 0x1a;
pub const AMDGPU_INFO_FW_IMU: u32 = 0x1b;

/// Hardware IP kinds (`AMDGPU_HW_IP_*`).
pub const AMDGPU_HW_IP_GFX: u32 = 0;
pub const AMDGPU_HW_IP_COMPUTE: u32 = 1;
pub const AMDGPU_HW_IP_DMA: u32 = 2;
pub const AMDGPU_HW_IP_UVD: u32 = 3;
pub const AMDGPU_HW_IP_VCE: u32 = 4;
pub const AMDGPU_HW_IP_UVD_ENC: u32 = 5;
pub const AMDGPU_HW_IP_VCN_DEC: u32 = 6;
pub const AMDGPU_HW_IP_VCN_ENC: u32 = 7;
pub const AMDGPU_HW_IP_VCN_JPEG: u32 = 8;
pub const AMDGPU_HW_IP_VPE: u32 = 9;
pub const AMDGPU_HW_IP_NUM: u32 = 10;
pub const AMDGPU_HW_IP_INSTANCE_MAX_COUNT: u32 = 1;

/// `ids_flags` bits of [`AmdgpuInfoDevice`].
pub const AMDGPU_IDS_FLAGS_FUSION: u64 = 0x01;
pub const AMDGPU_IDS_FLAGS_PREEMPTION: u64 = 0x02;
pub const AMDGPU_IDS_FLAGS_TMZ: u64 = 0x04;
pub const AMDGPU_IDS_FLAGS_CONFORMANT_TRUNC_COORD: u64 = 0x08;

/// GPU family of GC 11.0.0 parts (`AMDGPU_FAMILY_GC_11_0_0`).
pub const AMDGPU_FAMILY_GC_11_0_0: u32 = 145;
/// GPU family of Navi 1x and 2x parts, GC 10.x (`AMDGPU_FAMILY_NV`).
pub const AMDGPU_FAMILY_NV: u32 = 143;
/// `vram_type` of GDDR6 memory.
pub const AMDGPU_VRAM_TYPE_GDDR6: u32 = 9;

/// `struct drm_amdgpu_info_device` (`AMDGPU_INFO_DEV_INFO`), as of Linux 6.16; older kernels'
/// struct is a prefix of it, and the kernel writes `min(return_size, size)` bytes.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AmdgpuInfoDevice {
    pub device_id: u32,
    pub chip_rev: u32,
    pub external_rev: u32,
    pub pci_rev: u32,
    pub family: u32,
    pub num_shader_engines: u32,
    pub num_shader_arrays_per_engine: u32,
    /// In kHz.
    pub gpu_counter_freq: u32,
    /// In kHz.
    pub max_engine_clock: u64,
    /// In kHz.
    pub max_memory_clock: u64,
    pub cu_active_number: u32,
    pub cu_ao_mask: u32,
    pub cu_bitmap: [[u32; 4]; 4],
    pub enabled_rb_pipes_mask: u32,
    pub num_rb_pipes: u32,
    pub num_hw_gfx_contexts: u32,
    pub pcie_gen: u32,
    pub ids_flags: u64,
    pub virtual_address_offset: u64,
    pub virtual_address_max: u64,
    pub virtual_address_alignment: u32,
    pub pte_fragment_size: u32,
    pub gart_page_size: u32,
    pub ce_ram_size: u32,
    pub vram_type: u32,
    pub vram_bit_width: u32,
    pub vce_harvest_config: u32,
    pub gc_double_offchip_lds_buf: u32,
    pub prim_buf_gpu_addr: u64,
    pub pos_buf_gpu_addr: u64,
    pub cntl_sb_buf_gpu_addr: u64,
    pub param_buf_gpu_addr: u64,
    pub prim_buf_size: u32,
    pub pos_buf_size: u32,
    pub cntl_sb_buf_size: u32,
    pub param_buf_size: u32,
    pub wave_front_size: u32,
    pub num_shader_visible_vgprs: u32,
    pub num_cu_per_sh: u32,
    pub num_tcc_blocks: u32,
    pub gs_vgt_table_depth: u32,
    pub gs_prim_buffer_depth: u32,
    pub max_gs_waves_per_vgt: u32,
    pub pcie_num_lanes: u32,
    pub cu_ao_bitmap: [[u32; 4]; 4],
    pub high_va_offset: u64,
    pub high_va_max: u64,
    pub pa_sc_tile_steering_override: u32,
    pub tcc_disabled_mask: u64,
    pub min_engine_clock: u64,
    pub min_memory_clock: u64,
    /// The cache sizes are in KiB.
    pub tcp_cache_size: u32,
    pub num_sqc_per_wgp: u32,
    pub sqc_data_cache_size: u32,
    pub sqc_inst_cache_size: u32,
    pub gl1c_cache_size: u32,
    pub gl2c_cache_size: u32,
    /// In bytes.
    pub mall_size: u64,
    pub enabled_rb_pipes_mask_hi: u32,
    pub shadow_size: u32,
    pub shadow_alignment: u32,
    pub csa_size: u32,
    pub csa_alignment: u32,
    pub userq_ip_mask: u32,
    pub pad: u32,
}

/// `struct drm_amdgpu_info_hw_ip` (`AMDGPU_INFO_HW_IP_INFO`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AmdgpuInfoHwIp {
    pub hw_ip_version_major: u32,
    pub hw_ip_version_minor: u32,
    pub capabilities_flags: u64,
    pub ib_start_alignment: u32,
    pub ib_size_alignment: u32,
    /// Bit `n` set: ring `n` is available.
    pub available_rings: u32,
    /// Bits 23:16 major, 15:8 minor, 7:0 revision of the IP discovery version.
    pub ip_discovery_version: u32,
    pub userq_num_slots: u32,
}

/// `struct drm_amdgpu_info_firmware` (`AMDGPU_INFO_FW_VERSION`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AmdgpuInfoFirmware {
    pub ver: u32,
    pub feature: u32,
}

/// `struct drm_amdgpu_info_vram_gtt` (`AMDGPU_INFO_VRAM_GTT`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AmdgpuInfoVramGtt {
    pub vram_size: u64,
    pub vram_cpu_accessible_size: u64,
    pub gtt_size: u64,
}

/// `struct drm_amdgpu_heap_info`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AmdgpuHeapInfo {
    pub total_heap_size: u64,
    pub usable_heap_size: u64,
    pub heap_usage: u64,
    pub max_allocation: u64,
}

/// `struct drm_amdgpu_memory_info` (`AMDGPU_INFO_MEMORY`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AmdgpuMemoryInfo {
    pub vram: AmdgpuHeapInfo,
    pub cpu_accessible_vram: AmdgpuHeapInfo,
    pub gtt: AmdgpuHeapInfo,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// Sizes and offsets of the uapi structs on x86-64, and the request numbers they make.
    #[test]
    fn layouts_match_the_uapi_header() {
        assert_eq!(size_of::<DrmVersion>(), 64);
        assert_eq!(offset_of!(DrmVersion, name_len), 16);
        assert_eq!(size_of::<AmdgpuInfo>(), 32);
        assert_eq!(offset_of!(AmdgpuInfo, query), 12);
        assert_eq!(size_of::<AmdgpuInfoDevice>(), 448);
        assert_eq!(offset_of!(AmdgpuInfoDevice, max_engine_clock), 32);
        assert_eq!(offset_of!(AmdgpuInfoDevice, cu_bitmap), 56);
        assert_eq!(offset_of!(AmdgpuInfoDevice, wave_front_size), 240);
        assert_eq!(size_of::<AmdgpuInfoHwIp>(), 40);
        assert_eq!(size_of::<AmdgpuInfoVramGtt>(), 24);
        assert_eq!(size_of::<AmdgpuMemoryInfo>(), 96);
        assert_eq!(IOC_VERSION.request(), 0xc040_6400);
        assert_eq!(IOC_AMDGPU_INFO.request(), 0x4020_6445);
        assert_eq!(IOC_AMDGPU_INFO.nr(), DRM_COMMAND_BASE + AMDGPU_INFO);
        for d in DrmIoctl::ALL {
            assert_eq!(request_type(d.request()), DRM_IOCTL_BASE);
            assert_eq!(DrmIoctl::decode(d.request()), Some(d));
        }
        assert_eq!(request_size(IOC_VERSION.request()), size_of::<DrmVersion>());
        assert_eq!(
            request_size(IOC_AMDGPU_INFO.request()),
            size_of::<AmdgpuInfo>()
        );
        assert_eq!(DrmIoctl::decode(0xc040_6401), None);
    }
}
