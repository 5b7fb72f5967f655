//! The render node's own ioctls: DRM's VERSION and amdgpu's INFO queries, checked against the
//! facts the topology publishes for the same GPU, and `drm_ioctl`'s size rules.

mod common;

use std::ffi::c_void;

use common::*;
use hcq_amd_sys::drm::*;
use hcq_amd_sys::seam::Syscalls;
use hcq_emu::EmuKernel;

fn property(props: &str, name: &str) -> u64 {
    props
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap()
}

fn info<T: Copy + Default>(k: &EmuKernel, drm: i32, query: u32, size: u32) -> std::io::Result<T> {
    let mut out = T::default();
    let mut q = AmdgpuInfo {
        return_pointer: &mut out as *mut T as u64,
        return_size: size,
        query,
        query_args: [0; 4],
    };
    ioctl(k, drm, IOC_AMDGPU_INFO, &mut q)?;
    Ok(out)
}

#[test]
fn version_names_amdgpu_and_copies_at_most_the_buffers() {
    let k = EmuKernel::new(small_config());
    let drm = k.open("/dev/dri/renderD128").unwrap();
    let mut name = [0xaau8; 16];
    let mut date = [0xaau8; 4];
    let mut v = DrmVersion {
        version_major: -1,
        version_minor: -1,
        version_patchlevel: -1,
        name_len: name.len(),
        name: name.as_mut_ptr() as u64,
        date_len: date.len(),
        date: date.as_mut_ptr() as u64,
        desc_len: 0,
        desc: 0,
    };
    ioctl(&k, drm, IOC_VERSION, &mut v).unwrap();
    assert_eq!(v.version_major, 3);
    assert!(v.version_minor > 0);
    // Full lengths come back; each buffer gets at most its length, with no NUL.
    assert_eq!((v.name_len, v.date_len, v.desc_len), (6, 8, 7));
    assert_eq!(&name[..7], b"amdgpu\xaa");
    assert_eq!(&date, b"2015");
}

#[test]
fn info_queries_agree_with_the_topology() {
    let k = EmuKernel::new(small_config());
    let drm = k.open("/dev/dri/renderD128").unwrap();
    let props = k
        .read_to_string("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
        .unwrap();
    let working: u32 = info(&k, drm, AMDGPU_INFO_ACCEL_WORKING, 4).unwrap();
    assert_eq!(working, 1);

    let d: AmdgpuInfoDevice = info(&k, drm, AMDGPU_INFO_DEV_INFO, 448).unwrap();
    assert_eq!(u64::from(d.device_id), property(&props, "device_id"));
    assert_eq!(d.family, AMDGPU_FAMILY_GC_11_0_0);
    let engines = property(&props, "array_count") / property(&props, "simd_arrays_per_engine");
    assert_eq!(u64::from(d.num_shader_engines), engines);
    assert_eq!(
        u64::from(d.num_shader_arrays_per_engine),
        property(&props, "simd_arrays_per_engine")
    );
    let cus = property(&props, "simd_count") / property(&props, "simd_per_cu");
    assert_eq!(u64::from(d.cu_active_number), cus);
    assert_eq!(
        u64::from(d.num_cu_per_sh),
        property(&props, "cu_per_simd_array")
    );
    assert_eq!(
        u64::from(d.wave_front_size),
        property(&props, "wave_front_size")
    );
    assert_eq!(u64::from(d.gpu_counter_freq) * 1000, hcq_emu::GPU_CLOCK_HZ);
    assert_eq!(
        d.max_engine_clock,
        property(&props, "max_engine_clk_fcompute") * 1000
    );
    // The bitmap holds as many active CUs as the count says, in amdgpu's layout.
    let set: u32 = d.cu_bitmap.iter().flatten().map(|w| w.count_ones()).sum();
    assert_eq!(u64::from(set), cus);

    // An older, shorter struct gets its prefix and nothing past it.
    let mut buf = [0xa5u8; 64];
    let mut q = AmdgpuInfo {
        return_pointer: buf.as_mut_ptr() as u64,
        return_size: 8,
        query: AMDGPU_INFO_DEV_INFO,
        query_args: [0; 4],
    };
    ioctl(&k, drm, IOC_AMDGPU_INFO, &mut q).unwrap();
    assert_eq!(&buf[..4], &0x744cu32.to_le_bytes());
    assert!(buf[8..].iter().all(|&b| b == 0xa5));

    let m: AmdgpuMemoryInfo = info(&k, drm, AMDGPU_INFO_MEMORY, 96).unwrap();
    assert_eq!(m.vram.total_heap_size, property(&props, "local_mem_size"));
    assert_eq!(m.vram.max_allocation, m.vram.total_heap_size / 4 * 3);
    let g: AmdgpuInfoVramGtt = info(&k, drm, AMDGPU_INFO_VRAM_GTT, 24).unwrap();
    assert_eq!(g.vram_size, m.vram.total_heap_size);

    // What is not modelled is EINVAL, as the kernel answers what it does not know.
    for query in [AMDGPU_INFO_FW_VERSION, AMDGPU_INFO_SENSOR, 0x7fff] {
        assert_eq!(
            errno_of(info::<[u64; 8]>(&k, drm, query, 64)),
            libc::EINVAL,
            "query {query:#x}"
        );
    }
    let mut arg = [0u8; 64];
    // SAFETY: 64 bytes, more than DRM_IOCTL_GEM_CLOSE (number 0x09) encodes.
    let r = unsafe { k.ioctl(drm, 0x4008_6409, arg.as_mut_ptr() as *mut c_void) };
    assert_eq!(errno_of(r), libc::EINVAL);
}
