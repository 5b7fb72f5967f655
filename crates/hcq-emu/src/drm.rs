//! The render node's own ioctls (`/dev/dri/renderD<minor>`): DRM's `VERSION` and amdgpu's
//! `AMDGPU_INFO` queries a KFD program makes about the device, answered from the same facts the
//! topology publishes.
//!
//! As `drm_ioctl` does, a request is found by its number alone, and the caller's encoded size
//! is reconciled with the kernel's struct: bytes move in only where both the caller's and the
//! kernel's definitions say `_IOC_WRITE`, out only where both say `_IOC_READ`, the rest of the
//! kernel's copy zeroed. Of amdgpu's queries, `ACCEL_WORKING`, `DEV_INFO`, `VRAM_GTT` and
//! `MEMORY` are answered; every other query, and every other DRM or amdgpu ioctl (buffer
//! objects, contexts, command submission: the graphics path, which KFD programs do not use),
//! is `EINVAL` (the kernel's answer to a request it does not know; for DRM core requests a
//! render node may not make, the kernel says `EACCES`).

use std::ffi::c_void;
use std::io;

use hcq_amd_sys::drm::*;
use hcq_amd_sys::ioctl::Ioctl;

use crate::clock::GPU_CLOCK_HZ;
use crate::gpu::Gpu;
use crate::util::{errno, lock};

/// amdgpu's KMS interface version in Linux 6.1, the kernel whose KFD (1.11) is emulated.
const KMS_VERSION: (i32, i32, i32) = (3, 49, 0);
const DRIVER_NAME: &str = "amdgpu";
const DRIVER_DATE: &str = "20150101";
const DRIVER_DESC: &str = "AMD GPU";

/// Runs `f` on the kernel's copy of a `T` argument with `drm_ioctl`'s size rules.
///
/// # Safety
/// `arg` must point to `request_size(request)` bytes, readable (and writable, for requests
/// that return data).
unsafe fn drm_args<T: Copy>(
    known: Ioctl<T>,
    arg: *mut c_void,
    request: u64,
    f: impl FnOnce(&mut T) -> io::Result<()>,
) -> io::Result<()> {
    // The caller's size is not held against the struct's: `drm_ioctl` moves the caller's
    // bytes into a buffer as large as the larger of the two.
    let user = request_size(request);
    let in_size = if known.kernel_reads() && request_reads_argument(request) {
        user
    } else {
        0
    };
    let out_size = if known.kernel_writes() && request_writes_argument(request) {
        user
    } else {
        0
    };
    if (in_size > 0 || out_size > 0) && arg.is_null() {
        return Err(errno(libc::EFAULT));
    }
    let mut kdata = vec![0u8; user.max(known.size())];
    // SAFETY: `arg` holds `user` readable bytes (caller's guarantee) and `kdata` at least as
    // many.
    unsafe { std::ptr::copy_nonoverlapping(arg as *const u8, kdata.as_mut_ptr(), in_size) };
    // SAFETY: `kdata` holds at least a `T`, a plain `#[repr(C)]` struct of integers.
    let mut a = unsafe { kdata.as_ptr().cast::<T>().read_unaligned() };
    let result = f(&mut a);
    // SAFETY: as above.
    unsafe { kdata.as_mut_ptr().cast::<T>().write_unaligned(a) };
    // Copied back whatever the handler returned, as drm_ioctl does.
    // SAFETY: `arg` holds `user` writable bytes for a request that returns data.
    unsafe { std::ptr::copy_nonoverlapping(kdata.as_ptr(), arg as *mut u8, out_size) };
    result
}

/// `drm_copy_field`: up to `*len` bytes of `value` to `buf` (no NUL), then `*len` = its length.
///
/// # Safety
/// `buf`, when `*len > 0`, must point to `*len` writable bytes (the caller's guarantee about
/// the pointers inside a `drm_version`).
unsafe fn copy_field(len: &mut usize, buf: u64, value: &str) -> io::Result<()> {
    if *len > 0 {
        if buf == 0 {
            return Err(errno(libc::EFAULT));
        }
        let n = (*len).min(value.len());
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), buf as usize as *mut u8, n) };
    }
    *len = value.len();
    Ok(())
}

/// `DEV_INFO` of a GPU: its model's identity, clocks, memory and caches, and the shape its
/// topology node publishes.
fn device_info(gpu: &Gpu) -> AmdgpuInfoDevice {
    let chip = gpu.arch.chip();
    let s = &gpu.shape;
    let engines = crate::topology::shader_engines(s);
    let arrays = s.simd_arrays_per_engine;
    let cus = s.simd_count / s.simd_per_cu.max(1);
    let per_array = cus / s.array_count.max(1);
    let mut d = AmdgpuInfoDevice {
        device_id: chip.device_id,
        family: chip.family,
        num_shader_engines: engines,
        num_shader_arrays_per_engine: arrays,
        gpu_counter_freq: (GPU_CLOCK_HZ / 1000) as u32,
        max_engine_clock: chip.engine_clock_mhz * 1000,
        max_memory_clock: chip.memory_clock_mhz * 1000,
        cu_active_number: cus,
        wave_front_size: 32,
        num_cu_per_sh: per_array,
        vram_type: AMDGPU_VRAM_TYPE_GDDR6,
        vram_bit_width: chip.vram_bit_width,
        gl2c_cache_size: chip.l2_kb,
        mall_size: u64::from(chip.l3_kb) << 10,
        ..AmdgpuInfoDevice::default()
    };
    // amdgpu's layout of the active-CU bitmap: engine `se`, array `sa` at
    // `[se % 4][sa + (se / 4) * 2]`.
    for se in 0..engines as usize {
        for sa in 0..arrays as usize {
            d.cu_bitmap[se % 4][sa + (se / 4) * 2] = (1 << per_array) - 1;
        }
    }
    d
}

/// Writes `value`'s first `min(size, size_of::<T>())` bytes to `ptr`, as amdgpu's info
/// queries answer (a shorter, older struct gets its prefix).
///
/// # Safety
/// `ptr` must point to `size` writable bytes (the caller's guarantee about `return_pointer`).
unsafe fn answer<T: Copy>(ptr: u64, size: u32, value: &T) -> io::Result<()> {
    if ptr == 0 {
        return Err(errno(libc::EFAULT));
    }
    let n = (size as usize).min(std::mem::size_of::<T>());
    // SAFETY: `value` is `size_of::<T>()` bytes; the caller's guarantee covers `ptr`.
    unsafe {
        std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), ptr as usize as *mut u8, n)
    };
    Ok(())
}

/// A render node's ioctl on `gpu`.
///
/// # Safety
/// As [`hcq_amd_sys::seam::Syscalls::ioctl`]; the pointers inside the argument (strings of
/// `VERSION`, `return_pointer` of `AMDGPU_INFO`) must be valid for the lengths given with them.
pub(crate) unsafe fn render_ioctl(gpu: &Gpu, request: u64, arg: *mut c_void) -> io::Result<()> {
    let known = DrmIoctl::decode(request).ok_or_else(|| errno(libc::EINVAL))?;
    if known == DrmIoctl::Version {
        // SAFETY: the caller's guarantees.
        return unsafe {
            drm_args(IOC_VERSION, arg, request, |v| {
                (v.version_major, v.version_minor, v.version_patchlevel) = KMS_VERSION;
                copy_field(&mut v.name_len, v.name, DRIVER_NAME)?;
                copy_field(&mut v.date_len, v.date, DRIVER_DATE)?;
                copy_field(&mut v.desc_len, v.desc, DRIVER_DESC)
            })
        };
    }
    // SAFETY: the caller's guarantees.
    unsafe {
        drm_args(IOC_AMDGPU_INFO, arg, request, |q| {
            let (ptr, size) = (q.return_pointer, q.return_size);
            match q.query {
                AMDGPU_INFO_ACCEL_WORKING => answer(ptr, size, &1u32),
                AMDGPU_INFO_DEV_INFO => answer(ptr, size, &device_info(gpu)),
                AMDGPU_INFO_VRAM_GTT => answer(
                    ptr,
                    size,
                    &AmdgpuInfoVramGtt {
                        vram_size: gpu.vram_bytes,
                        vram_cpu_accessible_size: gpu.vram_bytes,
                        gtt_size: crate::topology::host_memory_bytes(),
                    },
                ),
                AMDGPU_INFO_MEMORY => {
                    let heap = |total: u64, used: u64| AmdgpuHeapInfo {
                        total_heap_size: total,
                        usable_heap_size: total,
                        heap_usage: used,
                        // amdgpu's own bound on one allocation: three quarters of the heap.
                        max_allocation: total / 4 * 3,
                    };
                    let used = *lock(&gpu.vram_used);
                    let vram = heap(gpu.vram_bytes, used);
                    let info = AmdgpuMemoryInfo {
                        vram,
                        cpu_accessible_vram: vram,
                        gtt: heap(
                            crate::topology::host_memory_bytes(),
                            gpu.gtt_used.load(std::sync::atomic::Ordering::Relaxed),
                        ),
                    };
                    answer(ptr, size, &info)
                }
                _ => Err(errno(libc::EINVAL)),
            }
        })
    }
}
