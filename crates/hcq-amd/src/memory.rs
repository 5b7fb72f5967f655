//! Buffer objects: GPU memory allocated through KFD and mapped for the CPU and the GPUs.

use crate::kfd::{Kfd, Release};
use hcq_amd_sys::kfd as abi;
use hcq_amd_sys::seam::{self, Fd};
use hcq_amd_sys::shared;
use hcq_core::{Error, Result};
use std::sync::{Arc, Mutex};

/// The host page size KFD allocates and maps in (4 KiB on x86-64).
pub const PAGE_SIZE: u64 = 0x1000;

/// Where a buffer object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Device memory, CPU-mapped through the render node.
    Vram,
    /// System memory the GPU reaches over the bus.
    Gtt,
    /// Ordinary host pages registered with the GPU.
    UserPtr,
}

/// One buffer object. It is mapped for the CPU at `va` (the same address the GPU uses) and freed
/// on drop.
pub struct GpuMemory {
    kfd: Arc<Kfd>,
    /// The address, the same for the CPU and every GPU it is mapped on.
    pub va: u64,
    /// Bytes, a whole number of pages.
    pub size: u64,
    /// KFD's handle of the buffer object.
    pub handle: u64,
    /// Where the memory lives.
    pub kind: MemoryKind,
    mapped_gpus: Mutex<Vec<u32>>,
    /// The CPU mapping at `va` is this object's to unmap (not registered host memory that
    /// belongs to someone else).
    unmap_cpu: bool,
    /// The buffer object is this object's to free (KFD keeps the event page for itself).
    free: bool,
}

// SAFETY: `GpuMemory` only stores the address of its mapping; all access to the mapping goes
// through atomic accesses (`hcq_amd_sys::shared`), ordered against the GPU by signals.
unsafe impl Send for GpuMemory {}
// SAFETY: as above; the only interior mutability is the mutex-protected GPU list.
unsafe impl Sync for GpuMemory {}

impl std::fmt::Debug for GpuMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuMemory({:?} 0x{:x}+0x{:x})",
            self.kind, self.va, self.size
        )
    }
}

/// Allocation options beyond the kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocFlags {
    /// Not cached by the GPU (`KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | UNCACHED`): for memory the
    /// host and GPU both write while work runs, such as signals.
    pub uncached: bool,
    /// VRAM the CPU must be able to map (`KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC`).
    pub public: bool,
}

impl GpuMemory {
    /// Allocates `size` bytes (rounded up to pages, at least one) on `gpu_id` and maps them on
    /// that GPU and for the CPU.
    pub fn alloc(
        kfd: &Arc<Kfd>,
        drm_fd: Fd,
        gpu_id: u32,
        device_name: &str,
        size: u64,
        kind: MemoryKind,
        opts: AllocFlags,
    ) -> Result<GpuMemory> {
        let size = size
            .max(1)
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or_else(|| Error::OutOfMemory {
                device: device_name.to_string(),
                requested: size,
                reason: None,
            })?;
        let mut flags = abi::ALLOC_MEM_FLAGS_WRITABLE
            | abi::ALLOC_MEM_FLAGS_EXECUTABLE
            | abi::ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
        flags |= match kind {
            MemoryKind::Vram => abi::ALLOC_MEM_FLAGS_VRAM,
            MemoryKind::Gtt => abi::ALLOC_MEM_FLAGS_GTT,
            MemoryKind::UserPtr => abi::ALLOC_MEM_FLAGS_USERPTR,
        };
        if opts.uncached {
            flags |= abi::ALLOC_MEM_FLAGS_COHERENT | abi::ALLOC_MEM_FLAGS_UNCACHED;
        }
        if opts.public {
            flags |= abi::ALLOC_MEM_FLAGS_PUBLIC;
        }
        let len = usize::try_from(size).map_err(|_| Error::OutOfMemory {
            device: device_name.into(),
            requested: size,
            reason: None,
        })?;
        let oom_or = |call: &'static str, source: std::io::Error| {
            // A kernel may explain an ENOMEM: the error then carries its message rather than
            // the bare errno.
            if source.raw_os_error() == Some(seam::ENOMEM) {
                Error::OutOfMemory {
                    device: device_name.to_string(),
                    requested: size,
                    reason: None,
                }
            } else if source.kind() == std::io::ErrorKind::OutOfMemory {
                Error::OutOfMemory {
                    device: device_name.to_string(),
                    requested: size,
                    reason: source.get_ref().map(|r| r.to_string()),
                }
            } else {
                Error::Driver { call, source }
            }
        };
        // SAFETY: an anonymous mapping at an address of the kernel's choosing replaces nothing.
        let addr = unsafe {
            if kind == MemoryKind::UserPtr {
                kfd.mmap(
                    std::ptr::null_mut(),
                    len,
                    seam::PROT_READ | seam::PROT_WRITE,
                    seam::MAP_SHARED | seam::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            } else {
                kfd.mmap(
                    std::ptr::null_mut(),
                    len,
                    seam::PROT_NONE,
                    seam::MAP_PRIVATE | seam::MAP_ANONYMOUS | seam::MAP_NORESERVE,
                    -1,
                    0,
                )
            }
        }
        .map_err(|e| {
            if e.raw_os_error() == Some(seam::ENOMEM) {
                // Before any driver is asked: the host's own address space is what is short.
                Error::OutOfMemory {
                    device: device_name.to_string(),
                    requested: size,
                    reason: Some(
                        "the host's memory map has no room for the buffer: reserving its address \
                         range failed with ENOMEM (an address-space limit such as `ulimit -v`, \
                         or the host is out of memory)"
                            .into(),
                    ),
                }
            } else {
                oom_or("mmap (reserve)", e)
            }
        })?;
        let va = addr as u64;
        let release_va = || {
            // SAFETY: `addr..addr+len` is the reservation made above and nothing else uses it.
            unsafe { kfd.release(vec![Release::Munmap { addr: va, len }]) };
        };
        let mmap_offset = if kind == MemoryKind::UserPtr { va } else { 0 };
        let args = match kfd.alloc_memory(va, size, gpu_id, flags, mmap_offset) {
            Ok(a) => a,
            // KFD's one refusal of host-visible VRAM: the BAR does not span all of VRAM.
            Err(Error::Driver { source, .. })
                if kind == MemoryKind::Vram
                    && opts.public
                    && source.raw_os_error() == Some(libc::EINVAL) =>
            {
                release_va();
                return Err(Error::Unsupported(format!(
                    "{device_name}: KFD refused host-visible VRAM (EINVAL), as it does when the \
                     PCI BAR does not span all of VRAM (a small-BAR board). hcq keeps buffers in \
                     host-visible VRAM: enable Resizable BAR (\"Above 4G Decoding\" and \
                     \"Re-Size BAR Support\" in the firmware setup)"
                )));
            }
            Err(Error::Driver { call, source }) => {
                release_va();
                return Err(oom_or(call, source));
            }
            Err(e) => {
                release_va();
                return Err(e);
            }
        };
        let mem = GpuMemory {
            kfd: kfd.clone(),
            va,
            size,
            handle: args.handle,
            kind,
            mapped_gpus: Mutex::new(Vec::new()),
            unmap_cpu: true,
            free: true,
        };
        if kind != MemoryKind::UserPtr {
            // SAFETY: maps the buffer object over our own reservation at `va`.
            let p = unsafe {
                kfd.mmap(
                    addr,
                    len,
                    seam::PROT_READ | seam::PROT_WRITE,
                    seam::MAP_SHARED | seam::MAP_FIXED,
                    drm_fd,
                    args.mmap_offset,
                )
            }
            .map_err(|source| Error::Driver {
                call: "mmap (buffer object)",
                source,
            })?;
            if p as u64 != va {
                // SAFETY: the kernel put the buffer's view at `p`, which nothing else uses.
                unsafe {
                    kfd.release(vec![Release::Munmap {
                        addr: p as u64,
                        len,
                    }])
                };
                return Err(Error::Driver {
                    call: "mmap (buffer object)",
                    source: std::io::Error::other(format!("mapped at {p:p}, wanted 0x{va:x}")),
                });
            }
        }
        mem.map_to(gpu_id)?;
        Ok(mem)
    }

    /// Registers pages the caller owns (`addr` and `size` page-aligned) with `gpu_id`, so its
    /// engines can read and write them in place. Dropping the result unregisters them and
    /// leaves the pages alone.
    ///
    /// # Safety
    /// The pages must stay mapped until the result is dropped, and nothing the GPU does with
    /// them may race with Rust references to the same memory.
    pub unsafe fn register_host(
        kfd: &Arc<Kfd>,
        gpu_id: u32,
        addr: u64,
        size: u64,
    ) -> Result<GpuMemory> {
        let flags = abi::ALLOC_MEM_FLAGS_USERPTR
            | abi::ALLOC_MEM_FLAGS_WRITABLE
            | abi::ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
        let args = kfd.alloc_memory(addr, size, gpu_id, flags, addr)?;
        let mem = GpuMemory {
            kfd: kfd.clone(),
            va: addr,
            size,
            handle: args.handle,
            kind: MemoryKind::UserPtr,
            mapped_gpus: Mutex::new(Vec::new()),
            unmap_cpu: false,
            free: true,
        };
        mem.map_to(gpu_id)?;
        Ok(mem)
    }

    /// KFD has taken the buffer object for itself (the event page, which it refuses to free):
    /// dropping this unmaps it but leaves the freeing to the kernel.
    pub fn leave_to_kernel(&mut self) {
        self.free = false;
    }

    /// What giving this buffer back takes, in order; afterwards dropping it does nothing.
    pub(crate) fn take_release(&mut self) -> Vec<Release> {
        let mut steps = Vec::new();
        let gpu_ids = std::mem::take(
            self.mapped_gpus
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        if !gpu_ids.is_empty() {
            steps.push(Release::Unmap {
                handle: self.handle,
                gpu_ids,
            });
        }
        if std::mem::take(&mut self.unmap_cpu) {
            steps.push(Release::Munmap {
                addr: self.va,
                len: self.size as usize,
            });
        }
        if std::mem::take(&mut self.free) {
            steps.push(Release::FreeMemory {
                handle: self.handle,
            });
        }
        steps
    }

    /// Makes the buffer visible to another GPU (for transfers); mapping twice is a no-op.
    pub fn map_to(&self, gpu_id: u32) -> Result<()> {
        let mut gpus = self.mapped_gpus.lock().unwrap_or_else(|e| e.into_inner());
        if gpus.contains(&gpu_id) {
            return Ok(());
        }
        gpus.push(gpu_id);
        if let Err(e) = self.kfd.map_memory(self.handle, &gpus) {
            gpus.pop();
            return Err(e);
        }
        Ok(())
    }

    /// The CPU mapping's start (access it only with `hcq_amd_sys::shared`'s atomic accessors).
    pub fn as_ptr(&self) -> *mut u8 {
        self.va as *mut u8
    }

    /// The host address of `len` bytes at `offset`, or `InvalidArgument` when the range does
    /// not lie inside the buffer.
    fn range(&self, offset: u64, len: usize, what: &str) -> Result<*mut u8> {
        let end = u64::try_from(len).ok().and_then(|n| offset.checked_add(n));
        match end {
            Some(end) if end <= self.size => Ok(self.as_ptr().wrapping_add(offset as usize)),
            _ => Err(Error::InvalidArgument(format!(
                "{what} of {len} bytes at offset {offset} outside the {}-byte buffer at {:#x}",
                self.size, self.va
            ))),
        }
    }

    /// Copies host bytes into the mapping at `offset`; a range outside the buffer is
    /// `InvalidArgument` and writes nothing.
    ///
    /// The GPU may access the mapping concurrently (the caller orders this through signals),
    /// so the bytes are stored atomically, never through a Rust reference to GPU memory.
    pub fn write(&self, offset: u64, src: &[u8]) -> Result<()> {
        let at = self.range(offset, src.len(), "write")?;
        // SAFETY: `range` checked the bytes lie inside this live CPU mapping, which is never
        // handed out as a Rust reference; the GPU side accesses it atomically.
        unsafe { shared::store(at, src) };
        Ok(())
    }

    /// Copies from the mapping at `offset` into host bytes; a range outside the buffer is
    /// `InvalidArgument` and reads nothing.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<()> {
        let at = self.range(offset, dst.len(), "read")?;
        // SAFETY: as in `write`, for reads into the private `dst`.
        unsafe { shared::load(at, dst) };
        Ok(())
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        let steps = self.take_release();
        if !steps.is_empty() {
            // SAFETY: the mapping at `va` belongs to this object and nothing refers to it any
            // more.
            unsafe { self.kfd.release(steps) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AmdDevice, AmdDriver};
    use hcq_emu::{EmuConfig, EmuKernel};

    fn device() -> AmdDevice {
        let kernel: Arc<dyn seam::Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 1000,
            vram_bytes: 64 << 20,
            ..EmuConfig::default()
        }));
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        AmdDevice::open(&driver, 0).unwrap()
    }

    #[test]
    fn a_small_bar_board_is_named_when_kfd_refuses_host_visible_vram() {
        // The emulated KFD of a board without Resizable BAR.
        let kernel: Arc<dyn seam::Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 1000,
            vram_bytes: 64 << 20,
            small_bar: true,
            ..EmuConfig::default()
        }));
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        // Opening works (its own buffers are not host-visible VRAM); the first user buffer
        // says why it fails.
        let dev = AmdDevice::open(&driver, 0).unwrap();
        let e = dev.alloc(4096).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
        assert!(
            text.contains("Resizable BAR") && text.contains("small-BAR"),
            "{text}"
        );
        // GTT and device-only VRAM are still given.
        dev.alloc_mem(4096, MemoryKind::Gtt, AllocFlags::default())
            .unwrap();
        dev.alloc_mem(4096, MemoryKind::Vram, AllocFlags::default())
            .unwrap();
    }

    #[test]
    fn read_and_write_inside_the_buffer_round_trip() {
        let dev = device();
        let m = dev
            .alloc_mem(8192, MemoryKind::Gtt, AllocFlags::default())
            .unwrap();
        let data: Vec<u8> = (0..300u32).map(|k| (k * 7 + 1) as u8).collect();
        for offset in [0u64, 1, 3, 8, 4095, 8192 - 300] {
            m.write(offset, &data).unwrap();
            let mut back = vec![0u8; data.len()];
            m.read(offset, &mut back).unwrap();
            assert_eq!(back, data, "offset {offset}");
        }
        // Empty ranges up to and at the end are fine.
        m.write(8192, &[]).unwrap();
        m.read(8192, &mut []).unwrap();
    }

    #[test]
    fn read_and_write_outside_the_buffer_are_errors_that_touch_nothing() {
        let dev = device();
        let m = dev
            .alloc_mem(4096, MemoryKind::Gtt, AllocFlags::default())
            .unwrap();
        m.write(0, &[0x5a; 4096]).unwrap();
        let cases: [(u64, usize); 5] = [
            (4096, 1),
            (4000, 97),
            (1 << 40, 4),
            (u64::MAX, 1),
            (u64::MAX - 2, 8),
        ];
        for (offset, len) in cases {
            let e = m.write(offset, &vec![0xff; len]).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument(msg) if msg.contains("outside the 4096-byte buffer")),
                "write {offset}+{len}: {e}"
            );
            let mut out = vec![0x11; len];
            let e = m.read(offset, &mut out).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument(_)),
                "read {offset}+{len}: {e}"
            );
            assert!(
                out.iter().all(|&b| b == 0x11),
                "read {offset}+{len} wrote the output"
            );
        }
        let mut all = vec![0u8; 4096];
        m.read(0, &mut all).unwrap();
        assert!(
            all.iter().all(|&b| b == 0x5a),
            "a refused write changed the buffer"
        );
    }
}
