//! Thin checked calls to KFD through the seam: one method per ioctl the driver uses.

use hcq_amd_sys::kfd::{self as abi};
use hcq_amd_sys::seam::{Fd, Kernel};
use hcq_core::{Error, Result};
use std::ffi::c_void;
use std::sync::Arc;

/// An open `/dev/kfd`.
pub struct Kfd {
    pub kernel: Arc<dyn Kernel>,
    pub fd: Fd,
}

impl Kfd {
    pub fn open(kernel: Arc<dyn Kernel>) -> Result<Self> {
        let fd = kernel.open("/dev/kfd").map_err(|source| Error::Driver {
            call: "open /dev/kfd",
            source,
        })?;
        Ok(Kfd { kernel, fd })
    }

    fn ioctl<T>(&self, call: &'static str, request: u64, arg: &mut T) -> Result<()> {
        // The kernel copies as many bytes as the request encodes: a request built for another
        // struct would make it read or write past `arg`. Checked in every build, before the
        // call.
        if abi::request_size(request) != std::mem::size_of::<T>() || !abi::is_kfd_request(request) {
            return Err(Error::Driver {
                call,
                source: std::io::Error::other(format!(
                    "request {request:#x} encodes {} bytes for a {}-byte argument",
                    abi::request_size(request),
                    std::mem::size_of::<T>()
                )),
            });
        }
        // SAFETY: `arg` is a live, exclusive `T`, and the request encodes exactly its size
        // (checked above).
        unsafe {
            self.kernel
                .ioctl(self.fd, request, arg as *mut T as *mut c_void)
        }
        .map_err(|source| Error::Driver { call, source })
    }

    pub fn get_version(&self) -> Result<abi::GetVersionArgs> {
        let mut a = abi::GetVersionArgs::default();
        self.ioctl("AMDKFD_IOC_GET_VERSION", abi::IOC_GET_VERSION, &mut a)?;
        Ok(a)
    }

    pub fn acquire_vm(&self, drm_fd: Fd, gpu_id: u32) -> Result<()> {
        let mut a = abi::AcquireVmArgs {
            drm_fd: drm_fd as u32,
            gpu_id,
        };
        self.ioctl("AMDKFD_IOC_ACQUIRE_VM", abi::IOC_ACQUIRE_VM, &mut a)
    }

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
        self.ioctl(
            "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU",
            abi::IOC_ALLOC_MEMORY_OF_GPU,
            &mut a,
        )?;
        Ok(a)
    }

    pub fn free_memory(&self, handle: u64) -> Result<()> {
        let mut a = abi::FreeMemoryOfGpuArgs { handle };
        self.ioctl(
            "AMDKFD_IOC_FREE_MEMORY_OF_GPU",
            abi::IOC_FREE_MEMORY_OF_GPU,
            &mut a,
        )
    }

    /// Maps `handle` on every GPU in `gpu_ids`; fails unless all succeed.
    pub fn map_memory(&self, handle: u64, gpu_ids: &[u32]) -> Result<()> {
        let mut a = abi::MapMemoryArgs {
            handle,
            device_ids_array_ptr: gpu_ids.as_ptr() as u64,
            n_devices: gpu_ids.len() as u32,
            n_success: 0,
        };
        self.ioctl(
            "AMDKFD_IOC_MAP_MEMORY_TO_GPU",
            abi::IOC_MAP_MEMORY_TO_GPU,
            &mut a,
        )?;
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

    pub fn unmap_memory(&self, handle: u64, gpu_ids: &[u32]) -> Result<()> {
        let mut a = abi::MapMemoryArgs {
            handle,
            device_ids_array_ptr: gpu_ids.as_ptr() as u64,
            n_devices: gpu_ids.len() as u32,
            n_success: 0,
        };
        self.ioctl(
            "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU",
            abi::IOC_UNMAP_MEMORY_FROM_GPU,
            &mut a,
        )
    }

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
        self.ioctl("AMDKFD_IOC_CREATE_EVENT", abi::IOC_CREATE_EVENT, &mut a)?;
        Ok(a)
    }

    pub fn destroy_event(&self, event_id: u32) -> Result<()> {
        let mut a = abi::DestroyEventArgs { event_id, pad: 0 };
        self.ioctl("AMDKFD_IOC_DESTROY_EVENT", abi::IOC_DESTROY_EVENT, &mut a)
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
        self.ioctl("AMDKFD_IOC_WAIT_EVENTS", abi::IOC_WAIT_EVENTS, &mut a)?;
        match a.wait_result {
            abi::WAIT_RESULT_COMPLETE => Ok(true),
            abi::WAIT_RESULT_TIMEOUT => Ok(false),
            r => Err(Error::Driver {
                call: "AMDKFD_IOC_WAIT_EVENTS",
                source: std::io::Error::other(format!("wait_result {r}")),
            }),
        }
    }

    pub fn create_queue(&self, args: &mut abi::CreateQueueArgs) -> Result<()> {
        self.ioctl("AMDKFD_IOC_CREATE_QUEUE", abi::IOC_CREATE_QUEUE, args)
    }

    pub fn destroy_queue(&self, queue_id: u32) -> Result<()> {
        let mut a = abi::DestroyQueueArgs { queue_id, pad: 0 };
        self.ioctl("AMDKFD_IOC_DESTROY_QUEUE", abi::IOC_DESTROY_QUEUE, &mut a)
    }

    pub fn clock_counters(&self, gpu_id: u32) -> Result<abi::GetClockCountersArgs> {
        let mut a = abi::GetClockCountersArgs {
            gpu_id,
            ..Default::default()
        };
        self.ioctl(
            "AMDKFD_IOC_GET_CLOCK_COUNTERS",
            abi::IOC_GET_CLOCK_COUNTERS,
            &mut a,
        )?;
        Ok(a)
    }
}

impl Drop for Kfd {
    fn drop(&mut self) {
        self.kernel.close(self.fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcq_emu::{EmuConfig, EmuKernel};

    #[test]
    fn a_request_encoding_another_size_than_its_struct_is_refused_before_the_kernel_sees_it() {
        let kernel: Arc<dyn Kernel> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 1000,
            vram_bytes: 64 << 20,
        }));
        let kfd = Kfd::open(kernel).unwrap();
        // GET_VERSION encodes 8 bytes; hand it a 4-byte and a 64-byte argument.
        let mut small = [0xa5u8; 4];
        let e = kfd
            .ioctl("AMDKFD_IOC_GET_VERSION", abi::IOC_GET_VERSION, &mut small)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("encodes 8 bytes for a 4-byte argument"),
            "{e}"
        );
        assert_eq!(
            small, [0xa5; 4],
            "the kernel wrote past a too small argument"
        );
        let mut large = [0xa5u8; 64];
        assert!(kfd
            .ioctl("AMDKFD_IOC_GET_VERSION", abi::IOC_GET_VERSION, &mut large)
            .is_err());
        assert_eq!(large, [0xa5; 64]);
        // A request of another driver's type byte is refused the same way.
        let mut v = abi::GetVersionArgs::default();
        let foreign = (abi::IOC_GET_VERSION & !0xff00) | (u64::from(b'T') << 8);
        assert!(kfd.ioctl("foreign", foreign, &mut v).is_err());
        // The right struct goes through.
        kfd.ioctl("AMDKFD_IOC_GET_VERSION", abi::IOC_GET_VERSION, &mut v)
            .unwrap();
        assert_eq!(v.major_version, abi::KFD_IOCTL_MAJOR_VERSION);
    }
}
