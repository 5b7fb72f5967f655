//! The PM4 compute queue: a ring in GTT, read/write pointers, and a doorbell.

use crate::kfd::Kfd;
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use hcq_amd_sys::kfd as abi;
use hcq_amd_sys::seam::{self, Fd};
use hcq_core::{Error, Result};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const RING_BYTES: u64 = 0x10_0000;
const EOP_BYTES: u64 = 0x1000;
const CTX_SAVE_RESTORE_BYTES: u64 = 0x2C0_2000;
const CTL_STACK_BYTES: u32 = 0xa000;
const DOORBELL_PAGE_BYTES: usize = 0x2000;

/// A user-mode PM4 compute queue.
pub struct ComputeQueue {
    kfd: Arc<Kfd>,
    ring: GpuMemory,
    /// Write pointer at +0, read pointer at +8 (dwords, growing without wrap).
    pointers: GpuMemory,
    _eop: GpuMemory,
    _ctx_save: GpuMemory,
    queue_id: u32,
    doorbell_page: *mut c_void,
    doorbell: *mut u64,
    ring_dwords: u64,
    wptr: u64,
}

// SAFETY: the raw pointers address the queue's own mappings, which live as long as it does;
// the queue is used behind the device's lock.
unsafe impl Send for ComputeQueue {}

impl ComputeQueue {
    pub fn create(kfd: &Arc<Kfd>, drm_fd: Fd, gpu_id: u32, device: &str) -> Result<ComputeQueue> {
        let uncached = AllocFlags {
            uncached: true,
            public: false,
        };
        let alloc =
            |size, kind, flags| GpuMemory::alloc(kfd, drm_fd, gpu_id, device, size, kind, flags);
        let ring = alloc(RING_BYTES, MemoryKind::Gtt, uncached)?;
        let pointers = alloc(0x1000, MemoryKind::Gtt, uncached)?;
        let eop = alloc(EOP_BYTES, MemoryKind::Vram, AllocFlags::default())?;
        let ctx_save = alloc(
            CTX_SAVE_RESTORE_BYTES,
            MemoryKind::Vram,
            AllocFlags::default(),
        )?;
        let mut args = abi::CreateQueueArgs {
            ring_base_address: ring.va,
            write_pointer_address: pointers.va,
            read_pointer_address: pointers.va + 8,
            ring_size: RING_BYTES as u32,
            gpu_id,
            queue_type: abi::QUEUE_TYPE_COMPUTE,
            queue_percentage: abi::MAX_QUEUE_PERCENTAGE,
            queue_priority: abi::MAX_QUEUE_PRIORITY,
            eop_buffer_address: eop.va,
            eop_buffer_size: EOP_BYTES,
            ctx_save_restore_address: ctx_save.va,
            ctx_save_restore_size: CTX_SAVE_RESTORE_BYTES as u32,
            ctl_stack_size: CTL_STACK_BYTES,
            ..Default::default()
        };
        kfd.create_queue(&mut args)?;
        let page_offset = args.doorbell_offset & !(DOORBELL_PAGE_BYTES as u64 - 1);
        // SAFETY: maps the doorbell page KFD assigned to this process at a fresh address.
        let page = unsafe {
            kfd.kernel.mmap(
                std::ptr::null_mut(),
                DOORBELL_PAGE_BYTES,
                seam::PROT_READ | seam::PROT_WRITE,
                seam::MAP_SHARED,
                kfd.fd,
                page_offset,
            )
        };
        let page = match page {
            Ok(p) => p,
            Err(source) => {
                let _ = kfd.destroy_queue(args.queue_id);
                return Err(Error::Driver {
                    call: "mmap (doorbell)",
                    source,
                });
            }
        };
        // SAFETY: the doorbell lies within the two-page doorbell mapping.
        let doorbell =
            unsafe { (page as *mut u8).add((args.doorbell_offset - page_offset) as usize) }
                as *mut u64;
        Ok(ComputeQueue {
            kfd: kfd.clone(),
            ring,
            pointers,
            _eop: eop,
            _ctx_save: ctx_save,
            queue_id: args.queue_id,
            doorbell_page: page,
            doorbell,
            ring_dwords: RING_BYTES / 4,
            wptr: 0,
        })
    }

    fn pointer(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offsets 0 and 8 are aligned u64 cells of the live pointer page.
        unsafe { &*(self.pointers.as_ptr().add(offset) as *const AtomicU64) }
    }

    /// Dwords the command processor has consumed.
    pub fn read_pointer(&self) -> u64 {
        self.pointer(8).load(Ordering::Acquire)
    }

    /// Capacity of the ring in dwords.
    pub fn capacity(&self) -> u64 {
        self.ring_dwords
    }

    /// Copies `words` into the ring and rings the doorbell. Waits (up to `timeout`) while the ring
    /// lacks room, so unread commands are never overwritten.
    pub fn submit(&mut self, words: &[u32], timeout: Duration) -> Result<()> {
        let n = words.len() as u64;
        if n > self.ring_dwords {
            return Err(Error::InvalidArgument(format!(
                "command stream of {n} dwords exceeds the {}-dword ring",
                self.ring_dwords
            )));
        }
        if self.wptr + n - self.read_pointer() > self.ring_dwords {
            let start = Instant::now();
            let mut spins = 0u32;
            while self.wptr + n - self.read_pointer() > self.ring_dwords {
                if start.elapsed() > timeout {
                    return Err(Error::Timeout {
                        what: "room in the compute ring (the GPU is not consuming commands)".into(),
                        ms: timeout.as_millis() as u64,
                    });
                }
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
        let ring = self.ring.as_ptr() as *mut u32;
        let at = (self.wptr % self.ring_dwords) as usize;
        let first = words.len().min(self.ring_dwords as usize - at);
        // SAFETY: `at + first <= ring_dwords` and the wrapped rest starts at 0 with
        // `words.len() - first <= ring_dwords` dwords; the ring mapping is live and the GPU does
        // not read these slots (checked against the read pointer above).
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr(), ring.add(at), first);
            std::ptr::copy_nonoverlapping(words.as_ptr().add(first), ring, words.len() - first);
        }
        self.wptr += n;
        self.pointer(0).store(self.wptr, Ordering::Release);
        // SAFETY: `doorbell` points into the doorbell page mapped for this queue.
        unsafe { self.kfd.kernel.write_doorbell(self.doorbell, self.wptr) };
        Ok(())
    }
}

impl Drop for ComputeQueue {
    fn drop(&mut self) {
        let _ = self.kfd.destroy_queue(self.queue_id);
        // SAFETY: the doorbell mapping belongs to this queue, which is gone.
        let _ = unsafe {
            self.kfd
                .kernel
                .munmap(self.doorbell_page, DOORBELL_PAGE_BYTES)
        };
    }
}
