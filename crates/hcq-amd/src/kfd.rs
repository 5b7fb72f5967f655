//! Thin checked calls to KFD through the seam: one method per ioctl the driver uses, calls
//! reissued when the kernel reports them interrupted, and the release of what the driver
//! holds ([`Kfd::release`]), kept and retried when the kernel refuses it.

use hcq_amd_sys::ioctl::Ioctl;
use hcq_amd_sys::kfd::{self as abi};
use hcq_amd_sys::seam::{self, Fd, Syscalls};
use hcq_core::{Error, Result};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many times a call failed with `EINTR` (or `EAGAIN` from an ioctl) is reissued before
/// its error is reported; the seam's contract makes reissuing such a call always correct.
pub const TRANSIENT_RETRIES: u32 = 64;
/// Reissues after this many are spaced by [`TRANSIENT_BACKOFF`], so a condition that takes a
/// moment to clear (pages being migrated) is given that moment.
const IMMEDIATE_RETRIES: u32 = 8;
const TRANSIENT_BACKOFF: Duration = Duration::from_millis(1);

/// Issues `call`, and again while it fails with `EINTR`, or with `EAGAIN` when `again_too`
/// (ioctls), up to [`TRANSIENT_RETRIES`] times.
pub(crate) fn reissue<T>(
    again_too: bool,
    mut call: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match call() {
            Err(e)
                if tries < TRANSIENT_RETRIES
                    && (e.raw_os_error() == Some(seam::EINTR)
                        || (again_too && e.raw_os_error() == Some(seam::EAGAIN))) =>
            {
                tries += 1;
                if tries > IMMEDIATE_RETRIES {
                    std::thread::sleep(TRANSIENT_BACKOFF);
                }
            }
            other => return other,
        }
    }
}

/// One step of giving something back to the kernel ([`Kfd::release`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Unmaps a buffer object from these GPUs.
    Unmap {
        /// The buffer object's KFD handle.
        handle: u64,
        /// The GPUs it is still mapped on.
        gpu_ids: Vec<u32>,
    },
    /// Unmaps a CPU mapping (a buffer's view, a reservation, a doorbell page).
    Munmap {
        /// Start of the mapping.
        addr: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// Frees a buffer object (after its unmaps).
    FreeMemory {
        /// The buffer object's KFD handle.
        handle: u64,
    },
    /// Destroys a hardware queue.
    DestroyQueue {
        /// KFD's id of the queue.
        queue_id: u32,
    },
    /// Destroys a KFD event.
    DestroyEvent {
        /// KFD's id of the event.
        event_id: u32,
    },
}

/// A failed open of a device node, explained where the cause is the machine's setup: a missing
/// node (no amdgpu driver with KFD) or one the user may not open (the `render` group).
fn open_error(path: &str, call: &'static str, source: std::io::Error) -> Error {
    match source.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => Error::NoDevice(format!(
            "{path} does not exist ({source}): the amdgpu kernel driver is not loaded, or was \
             built without KFD (CONFIG_HSA_AMD), or the machine has no AMD GPU"
        )),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let group = node_group(path).unwrap_or_else(|| "render".into());
            Error::NoDevice(format!(
                "cannot open {path}: permission denied: the user must be in the group that owns \
                 it, `{group}` (`sudo usermod -aG {group} $USER`, then log in again)"
            ))
        }
        _ => Error::Driver { call, source },
    }
}

/// The name of the group owning `path`, if it can be found.
fn node_group(path: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let gid = std::fs::metadata(path).ok()?.gid();
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut f = line.split(':');
        let (name, _, id) = (f.next()?, f.next()?, f.next()?);
        (id.parse::<u32>().ok()? == gid).then(|| name.to_string())
    })
}

/// An open `/dev/kfd`.
pub struct Kfd {
    /// The kernel every call goes to (the real one or the emulated one).
    pub kernel: Arc<dyn Syscalls>,
    /// The descriptor of `/dev/kfd`.
    pub fd: Fd,
    /// Releases the kernel refused, each with the steps that must follow it.
    pending: Mutex<Vec<VecDeque<Release>>>,
}

impl Kfd {
    /// Opens `/dev/kfd`; a missing node or a permission error says what to fix.
    pub fn open(kernel: Arc<dyn Syscalls>) -> Result<Self> {
        let fd = reissue(false, || kernel.open("/dev/kfd"))
            .map_err(|source| open_error("/dev/kfd", "open /dev/kfd", source))?;
        Ok(Kfd {
            kernel,
            fd,
            pending: Mutex::default(),
        })
    }

    /// Opens another device node (a render node) through the same kernel.
    pub fn open_node(&self, path: &str) -> Result<Fd> {
        reissue(false, || self.kernel.open(path))
            .map_err(|source| open_error(path, "open render node", source))
    }

    /// The seam's `mmap`, reissued when interrupted.
    ///
    /// # Safety
    /// As [`Syscalls::mmap`].
    pub unsafe fn mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> io::Result<*mut c_void> {
        // SAFETY: forwarded with the caller's guarantees; a failed call mapped nothing.
        reissue(false, || unsafe {
            self.kernel.mmap(addr, len, prot, flags, fd, offset)
        })
    }

    /// The seam's `munmap`, reissued when interrupted.
    ///
    /// # Safety
    /// As [`Syscalls::munmap`].
    unsafe fn munmap(&self, addr: u64, len: usize) -> io::Result<()> {
        // SAFETY: forwarded with the caller's guarantees.
        reissue(false, || unsafe {
            self.kernel.munmap(addr as *mut c_void, len)
        })
    }

    /// Issues `ioctl` with `arg`, and again while the kernel reports it interrupted. The
    /// request's type names its argument struct, so the size the kernel copies is `arg`'s.
    fn ioctl<T>(&self, ioctl: Ioctl<T>, arg: &mut T) -> Result<()> {
        self.ioctl_on(self.fd, ioctl.name(), ioctl, arg)
    }

    /// [`Kfd::ioctl`] on descriptor `fd` (a render node), failing as `call`.
    fn ioctl_on<T>(&self, fd: Fd, call: &'static str, ioctl: Ioctl<T>, arg: &mut T) -> Result<()> {
        reissue(true, || {
            // SAFETY: `arg` is a live, exclusive `T`, and `Ioctl<T>` encodes exactly its size
            // (checked when the constant was declared).
            unsafe {
                self.kernel
                    .ioctl(fd, ioctl.request(), arg as *mut T as *mut c_void)
            }
        })
        .map_err(|source| Error::Driver { call, source })
    }

    /// Gives `steps` back to the kernel, in order. A step the kernel refuses is kept with the
    /// steps after it (so memory is never freed before the queue using it is destroyed, nor a
    /// buffer freed while still mapped) and tried again at every later release and when
    /// `/dev/kfd` is closed; the kernel reclaims whatever is left at that close.
    ///
    /// # Safety
    /// Nothing may use what the steps release (CPU mappings above all) once this is called.
    pub unsafe fn release(&self, steps: Vec<Release>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller gives up what `steps` release; pending steps were given up before.
        unsafe {
            pending.retain_mut(|chain| !self.run_releases(chain));
            let mut chain = VecDeque::from(steps);
            if !self.run_releases(&mut chain) {
                pending.push(chain);
            }
        }
    }

    /// Runs the steps of `chain` in order until one fails; true when all have run.
    ///
    /// # Safety
    /// As [`Kfd::release`].
    unsafe fn run_releases(&self, chain: &mut VecDeque<Release>) -> bool {
        while let Some(step) = chain.front_mut() {
            let done = match step {
                Release::Unmap { handle, gpu_ids } => self.unmap_memory_from(*handle, gpu_ids),
                Release::Munmap { addr, len } => {
                    // SAFETY: the caller gave the mapping up.
                    unsafe { self.munmap(*addr, *len) }.map_err(|source| Error::Driver {
                        call: "munmap",
                        source,
                    })
                }
                Release::FreeMemory { handle } => self.free_memory(*handle),
                Release::DestroyQueue { queue_id } => self.destroy_queue(*queue_id),
                Release::DestroyEvent { event_id } => self.destroy_event(*event_id),
            };
            if done.is_err() {
                return false;
            }
            chain.pop_front();
        }
        true
    }

    /// Releases still pending because the kernel refused them (a diagnostic for tests).
    pub fn pending_releases(&self) -> usize {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.iter().map(VecDeque::len).sum()
    }

    /// `AMDKFD_IOC_GET_VERSION`: the ioctl interface's major and minor version.
    pub fn get_version(&self) -> Result<abi::GetVersionArgs> {
        let mut a = abi::GetVersionArgs::default();
        self.ioctl(abi::IOC_GET_VERSION, &mut a)?;
        Ok(a)
    }

    /// The GPU's memory heaps as amdgpu reports them on its render node `drm_fd`
    /// (`DRM_IOCTL_AMDGPU_INFO`, `AMDGPU_INFO_MEMORY`): VRAM, host-visible VRAM and GTT, each
    /// with its size and use.
    pub fn memory_info(&self, drm_fd: Fd) -> Result<hcq_amd_sys::drm::AmdgpuMemoryInfo> {
        use hcq_amd_sys::drm::{AmdgpuInfo, AmdgpuMemoryInfo, AMDGPU_INFO_MEMORY, IOC_AMDGPU_INFO};
        let mut out = AmdgpuMemoryInfo::default();
        let mut q = AmdgpuInfo {
            return_pointer: &mut out as *mut AmdgpuMemoryInfo as u64,
            return_size: std::mem::size_of::<AmdgpuMemoryInfo>() as u32,
            query: AMDGPU_INFO_MEMORY,
            ..Default::default()
        };
        // The kernel writes the answer through `q.return_pointer`: `out`, writable for the
        // size given, which outlives the call.
        self.ioctl_on(
            drm_fd,
            "DRM_IOCTL_AMDGPU_INFO(AMDGPU_INFO_MEMORY)",
            IOC_AMDGPU_INFO,
            &mut q,
        )?;
        Ok(out)
    }

    /// VRAM of `gpu_id` the process can still allocate (`AMDKFD_IOC_AVAILABLE_MEMORY`).
    pub fn available_memory(&self, gpu_id: u32) -> Result<u64> {
        let mut a = abi::GetAvailableMemoryArgs {
            gpu_id,
            ..Default::default()
        };
        self.ioctl(abi::IOC_AVAILABLE_MEMORY, &mut a)?;
        Ok(a.available)
    }

    /// `AMDKFD_IOC_RUNTIME_ENABLE` with `mode_mask` (0: no debugging asked for).
    pub fn runtime_enable(&self, mode_mask: u32) -> Result<()> {
        let mut a = abi::RuntimeEnableArgs {
            r_debug: 0,
            mode_mask,
            capabilities_mask: 0,
        };
        self.ioctl(abi::IOC_RUNTIME_ENABLE, &mut a)
    }

    /// `AMDKFD_IOC_ACQUIRE_VM`: binds the process's VM on `gpu_id` to the render node
    /// `drm_fd` (once per GPU and process).
    pub fn acquire_vm(&self, drm_fd: Fd, gpu_id: u32) -> Result<()> {
        let mut a = abi::AcquireVmArgs {
            drm_fd: drm_fd as u32,
            gpu_id,
        };
        self.ioctl(abi::IOC_ACQUIRE_VM, &mut a)
    }

    /// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`: a buffer object of `size` bytes at `va_addr` on
    /// `gpu_id` with KFD's `flags` (`mmap_offset` is the host address of a userptr); the reply
    /// carries its handle and mmap offset.
    pub fn alloc_memory(
        &self,
        va_addr: u64,
        size: u64,
        gpu_id: u32,
        flags: u32,
        mmap_offset: u64,
    ) -> Result<abi::AllocMemoryOfGpuArgs> {
        let mut a = abi::AllocMemoryOfGpuArgs {
            va_addr,
            size,
            handle: 0,
            mmap_offset,
            gpu_id,
            flags,
        };
        self.ioctl(abi::IOC_ALLOC_MEMORY_OF_GPU, &mut a)?;
        Ok(a)
    }

    /// `AMDKFD_IOC_FREE_MEMORY_OF_GPU` (refused while the object is still mapped on a GPU).
    pub fn free_memory(&self, handle: u64) -> Result<()> {
        let mut a = abi::FreeMemoryOfGpuArgs { handle };
        self.ioctl(abi::IOC_FREE_MEMORY_OF_GPU, &mut a)
    }

    /// Maps `handle` on every GPU in `gpu_ids`; fails unless all succeed.
    pub fn map_memory(&self, handle: u64, gpu_ids: &[u32]) -> Result<()> {
        let mut a = abi::MapMemoryArgs {
            handle,
            device_ids_array_ptr: gpu_ids.as_ptr() as u64,
            n_devices: gpu_ids.len() as u32,
            n_success: 0,
        };
        self.ioctl(abi::IOC_MAP_MEMORY_TO_GPU, &mut a)?;
        if a.n_success as usize != gpu_ids.len() {
            return Err(Error::Driver {
                call: "AMDKFD_IOC_MAP_MEMORY_TO_GPU",
                source: std::io::Error::other(format!(
                    "mapped on {} of {} GPUs",
                    a.n_success,
                    gpu_ids.len()
                )),
            });
        }
        Ok(())
    }

    /// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU` on every GPU in `gpu_ids`.
    pub fn unmap_memory(&self, handle: u64, gpu_ids: &[u32]) -> Result<()> {
        self.unmap_memory_from(handle, &mut gpu_ids.to_vec())
    }

    /// Unmaps `handle` from `gpu_ids`; on failure leaves in `gpu_ids` the GPUs it is still
    /// mapped on (the kernel reports how many it got through).
    fn unmap_memory_from(&self, handle: u64, gpu_ids: &mut Vec<u32>) -> Result<()> {
        let mut a = abi::MapMemoryArgs {
            handle,
            device_ids_array_ptr: gpu_ids.as_ptr() as u64,
            n_devices: gpu_ids.len() as u32,
            n_success: 0,
        };
        let r = self.ioctl(abi::IOC_UNMAP_MEMORY_FROM_GPU, &mut a);
        if r.is_err() {
            gpu_ids.drain(..(a.n_success as usize).min(gpu_ids.len()));
        }
        r
    }

    /// `AMDKFD_IOC_CREATE_EVENT` of `event_type` in the event page `event_page_handle`; the
    /// reply carries the event's id, slot and trigger data.
    pub fn create_event(
        &self,
        event_type: u32,
        event_page_handle: u64,
        auto_reset: bool,
    ) -> Result<abi::CreateEventArgs> {
        let mut a = abi::CreateEventArgs {
            event_page_offset: event_page_handle,
            event_type,
            auto_reset: auto_reset as u32,
            ..Default::default()
        };
        self.ioctl(abi::IOC_CREATE_EVENT, &mut a)?;
        Ok(a)
    }

    /// `AMDKFD_IOC_DESTROY_EVENT`.
    pub fn destroy_event(&self, event_id: u32) -> Result<()> {
        let mut a = abi::DestroyEventArgs { event_id, pad: 0 };
        self.ioctl(abi::IOC_DESTROY_EVENT, &mut a)
    }

    /// Waits until any (or all) of `events` fire or `timeout_ms` passes; true if they fired.
    pub fn wait_events(
        &self,
        events: &mut [abi::EventData],
        wait_for_all: bool,
        timeout_ms: u32,
    ) -> Result<bool> {
        let mut a = abi::WaitEventsArgs {
            events_ptr: events.as_mut_ptr() as u64,
            num_events: events.len() as u32,
            wait_for_all: wait_for_all as u32,
            timeout: timeout_ms,
            wait_result: 0,
        };
        self.ioctl(abi::IOC_WAIT_EVENTS, &mut a)?;
        match a.wait_result {
            abi::WAIT_RESULT_COMPLETE => Ok(true),
            abi::WAIT_RESULT_TIMEOUT => Ok(false),
            r => Err(Error::Driver {
                call: "AMDKFD_IOC_WAIT_EVENTS",
                source: std::io::Error::other(format!("wait_result {r}")),
            }),
        }
    }

    /// `AMDKFD_IOC_CREATE_QUEUE` with the caller's filled-in arguments; KFD writes back the
    /// queue id and doorbell offset.
    pub fn create_queue(&self, args: &mut abi::CreateQueueArgs) -> Result<()> {
        self.ioctl(abi::IOC_CREATE_QUEUE, args)
    }

    /// `AMDKFD_IOC_DESTROY_QUEUE`.
    pub fn destroy_queue(&self, queue_id: u32) -> Result<()> {
        let mut a = abi::DestroyQueueArgs { queue_id, pad: 0 };
        self.ioctl(abi::IOC_DESTROY_QUEUE, &mut a)
    }

    /// `AMDKFD_IOC_GET_CLOCK_COUNTERS`: the GPU's clock and the host's clocks read together
    /// (for placing GPU timestamps on the host's time line).
    pub fn clock_counters(&self, gpu_id: u32) -> Result<abi::GetClockCountersArgs> {
        let mut a = abi::GetClockCountersArgs {
            gpu_id,
            ..Default::default()
        };
        self.ioctl(abi::IOC_GET_CLOCK_COUNTERS, &mut a)?;
        Ok(a)
    }
}

impl Drop for Kfd {
    fn drop(&mut self) {
        let pending = std::mem::take(self.pending.get_mut().unwrap_or_else(|e| e.into_inner()));
        for mut chain in pending {
            // SAFETY: these releases were given up when first attempted.
            unsafe { self.run_releases(&mut chain) };
        }
        self.kernel.close(self.fd);
    }
}

#[cfg(test)]
mod open_error_tests {
    use super::*;

    #[test]
    fn missing_and_forbidden_nodes_say_what_to_do() {
        let e = open_error(
            "/dev/kfd",
            "open /dev/kfd",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        let text = e.to_string();
        assert!(matches!(e, Error::NoDevice(_)), "{e:?}");
        assert!(text.contains("/dev/kfd does not exist") && text.contains("CONFIG_HSA_AMD"));
        // A node owned by root's group (any readable path does for the group lookup).
        let e = open_error(
            "/etc/passwd",
            "open render node",
            std::io::Error::from_raw_os_error(libc::EACCES),
        );
        let text = e.to_string();
        assert!(text.contains("permission denied"), "{text}");
        assert!(
            text.contains("`root`") && text.contains("usermod -aG root"),
            "{text}"
        );
        // Anything else is the driver's error, errno kept.
        let e = open_error(
            "/dev/kfd",
            "open /dev/kfd",
            std::io::Error::from_raw_os_error(libc::EIO),
        );
        assert_eq!(e.os_error(), Some(libc::EIO));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcq_emu::{EmuConfig, EmuKernel};

    /// The driver can issue a request only with the struct its typed constant names (a
    /// request encoding another size than its argument does not compile: see the
    /// `compile_fail` examples of `hcq_amd_sys::ioctl`), and the kernel answers it.
    #[test]
    fn a_typed_request_carries_its_own_struct_to_the_kernel() {
        let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 1000,
            vram_bytes: 64 << 20,
            ..EmuConfig::default()
        }));
        let kfd = Kfd::open(kernel).unwrap();
        let mut v = abi::GetVersionArgs::default();
        kfd.ioctl(abi::IOC_GET_VERSION, &mut v).unwrap();
        assert_eq!(v.major_version, abi::KFD_IOCTL_MAJOR_VERSION);
        // A failed request is reported under the header's name of the request.
        let mut a = abi::DestroyQueueArgs {
            queue_id: 12345,
            pad: 0,
        };
        let e = kfd.ioctl(abi::IOC_DESTROY_QUEUE, &mut a).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Driver {
                    call: "AMDKFD_IOC_DESTROY_QUEUE",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.os_error(), Some(libc::EINVAL));
    }
}
