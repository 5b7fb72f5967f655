//! User-mode hardware queues: a ring in GTT, read/write pointers the engine and the host share,
//! and a doorbell. The compute queue (PM4) counts its pointers in dwords; the SDMA copy queue
//! counts them in bytes and never lets a packet straddle the ring's end.

use crate::kfd::{Kfd, Release};
use crate::memory::{AllocFlags, GpuMemory, MemoryKind};
use crate::topology::GpuNode;
use hcq_amd_sys::kfd as abi;
use hcq_amd_sys::sdma::{Header, SdmaBuilder, OP_INDIRECT};
use hcq_amd_sys::seam::{self, Fd};
use hcq_amd_sys::shared;
use hcq_core::{Error, Result};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of a compute queue's ring (1 MiB: about 2 500 launches before it wraps).
pub const COMPUTE_RING_BYTES: u64 = 0x10_0000;
/// Bytes of a copy queue's ring.
pub const SDMA_RING_BYTES: u64 = 0x10_0000;
const DOORBELL_PAGE_BYTES: usize = hcq_amd_sys::regs::DOORBELL_REGION_BYTES as usize;

/// Which engine a queue feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// PM4 packets for the compute pipe; pointers in dwords.
    Compute,
    /// SDMA packets for the copy engine; pointers in bytes.
    Sdma,
}

/// A user-mode queue of either kind.
pub struct HwQueue {
    kfd: Arc<Kfd>,
    /// Which engine it feeds.
    pub kind: QueueKind,
    ring: GpuMemory,
    /// Write pointer at +0, read pointer at +8, in the queue's unit.
    pointers: GpuMemory,
    /// End-of-pipe and context save areas (compute queues), the engine's own.
    eop: Option<GpuMemory>,
    ctx_save: Option<GpuMemory>,
    queue_id: u32,
    doorbell_page: *mut c_void,
    doorbell: *mut u64,
    ring_bytes: u64,
    /// Bytes written so far (never wraps).
    written: u64,
    /// Dwords submitted by the last `submit`, padding included.
    pub last_submission_dwords: u64,
    destroyed: bool,
}

// SAFETY: the raw pointers address the queue's own mappings, which live as long as it does;
// a queue is only used behind its device's lock.
unsafe impl Send for HwQueue {}

impl HwQueue {
    /// Allocates the ring, pointers and engine areas, and creates the queue with KFD on
    /// `node` (a compute queue, or an SDMA queue on one of its copy engines).
    pub fn create(
        kfd: &Arc<Kfd>,
        drm_fd: Fd,
        node: &GpuNode,
        device: &str,
        kind: QueueKind,
    ) -> Result<HwQueue> {
        let gpu_id = node.gpu_id;
        let uncached = AllocFlags {
            uncached: true,
            public: false,
        };
        let alloc =
            |size, kind, flags| GpuMemory::alloc(kfd, drm_fd, gpu_id, device, size, kind, flags);
        let ring_bytes = match kind {
            QueueKind::Compute => COMPUTE_RING_BYTES,
            QueueKind::Sdma => SDMA_RING_BYTES,
        };
        let ring = alloc(ring_bytes, MemoryKind::Gtt, uncached)?;
        let pointers = alloc(0x1000, MemoryKind::Gtt, uncached)?;
        let mut args = abi::CreateQueueArgs {
            ring_base_address: ring.va,
            write_pointer_address: pointers.va,
            read_pointer_address: pointers.va + 8,
            ring_size: ring_bytes as u32,
            gpu_id,
            queue_percentage: abi::MAX_QUEUE_PERCENTAGE,
            queue_priority: abi::NORMAL_QUEUE_PRIORITY,
            ..Default::default()
        };
        let (mut eop, mut ctx_save) = (None, None);
        match kind {
            QueueKind::Compute => {
                // The sizes the kernel computes from the node, not constants: Linux 6.12
                // refuses any other. The context save area is followed by the debugger's
                // memory in the same buffer, and only the former counts as its size.
                let areas = node.queue_areas()?;
                let eop_bytes = u64::from(areas.eop_bytes);
                let e = alloc(eop_bytes, MemoryKind::Vram, AllocFlags::default())?;
                let c = alloc(
                    areas.cwsr_buffer_bytes(),
                    MemoryKind::Vram,
                    AllocFlags::default(),
                )?;
                args.queue_type = abi::QUEUE_TYPE_COMPUTE;
                args.eop_buffer_address = e.va;
                args.eop_buffer_size = eop_bytes;
                args.ctx_save_restore_address = c.va;
                args.ctx_save_restore_size = areas.cwsr_bytes;
                args.ctl_stack_size = areas.ctl_stack_bytes;
                (eop, ctx_save) = (Some(e), Some(c));
            }
            QueueKind::Sdma => args.queue_type = abi::QUEUE_TYPE_SDMA,
        }
        kfd.create_queue(&mut args)?;
        // From here on, dropping the queue destroys it before its memory is released.
        let mut queue = HwQueue {
            kfd: kfd.clone(),
            kind,
            ring,
            pointers,
            eop,
            ctx_save,
            queue_id: args.queue_id,
            doorbell_page: std::ptr::null_mut(),
            doorbell: std::ptr::null_mut(),
            ring_bytes,
            written: 0,
            last_submission_dwords: 0,
            destroyed: false,
        };
        let page_offset = args.doorbell_offset & !(DOORBELL_PAGE_BYTES as u64 - 1);
        // SAFETY: maps the doorbell page KFD assigned to this process at a fresh address.
        let page = unsafe {
            kfd.mmap(
                std::ptr::null_mut(),
                DOORBELL_PAGE_BYTES,
                seam::PROT_READ | seam::PROT_WRITE,
                seam::MAP_SHARED,
                kfd.fd,
                page_offset,
            )
        }
        .map_err(|source| Error::Driver {
            call: "mmap (doorbell)",
            source,
        })?;
        queue.doorbell_page = page;
        // SAFETY: the doorbell lies within the two-page doorbell mapping.
        queue.doorbell =
            unsafe { (page as *mut u8).add((args.doorbell_offset - page_offset) as usize) }
                as *mut u64;
        Ok(queue)
    }

    fn pointer(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offsets 0 and 8 are aligned u64 cells of the live pointer page.
        unsafe { &*(self.pointers.as_ptr().add(offset) as *const AtomicU64) }
    }

    /// Bytes per pointer unit.
    fn unit(&self) -> u64 {
        match self.kind {
            QueueKind::Compute => 4,
            QueueKind::Sdma => 1,
        }
    }

    /// Bytes the engine has consumed. The engine may report its read pointer as a running
    /// count or as an offset within the ring (which one real GPUs write for user queues is not
    /// documented); both agree with the write position modulo the ring size, and the ring is
    /// never filled to its size, so what is still unread is that difference.
    fn consumed(&self) -> u64 {
        let reported = self.pointer(8).load(Ordering::Acquire) * self.unit();
        let unread = self.written.wrapping_sub(reported) % self.ring_bytes;
        self.written - unread
    }

    /// Bytes written to the ring since it was created.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Capacity of the ring in dwords.
    pub fn capacity_dwords(&self) -> u64 {
        self.ring_bytes / 4
    }

    /// Waits (up to `timeout`, from `start`) until `bytes` more fit without overwriting
    /// anything the engine has not read, and without filling the ring to exactly its size: a
    /// read pointer reported as an offset within the ring could not tell a full ring from an
    /// empty one (amdgpu never fills its rings completely either).
    fn reserve(&self, bytes: u64, timeout: Duration) -> Result<()> {
        let room = || self.written + bytes - self.consumed() < self.ring_bytes;
        if room() {
            // The common case: no clock read.
            return Ok(());
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while !room() {
            if start.elapsed() > timeout {
                let engine = match self.kind {
                    QueueKind::Compute => "compute",
                    QueueKind::Sdma => "copy",
                };
                return Err(Error::Timeout {
                    what: format!(
                        "room in the {engine} ring (the engine is not consuming commands)"
                    ),
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
        Ok(())
    }

    /// Copies dwords to the ring at the current write position, wrapping at its end.
    fn put(&mut self, words: &[u32]) {
        let ring = self.ring.as_ptr();
        let ring_dwords = (self.ring_bytes / 4) as usize;
        let at = ((self.written % self.ring_bytes) / 4) as usize;
        let first = words.len().min(ring_dwords - at);
        let (head, wrapped) = words.split_at(first);
        // SAFETY: `at + first <= ring_dwords`, the wrapped rest starts at 0 and is shorter than
        // the ring (callers reserve first), and the mapping is live. The engine does not read
        // these slots (checked against its read pointer by `reserve`), and everything that
        // touches ring memory does so atomically.
        unsafe {
            shared::store(ring.add(4 * at), words_as_bytes(head));
            shared::store(ring, words_as_bytes(wrapped));
        }
        self.written += words.len() as u64 * 4;
    }

    /// Publishes the write pointer and rings the doorbell.
    fn kick(&mut self) {
        if self.destroyed {
            // Its doorbell page is unmapped; no engine would read the ring anyway.
            return;
        }
        let wptr = self.written / self.unit();
        self.pointer(0).store(wptr, Ordering::Release);
        // SAFETY: `doorbell` points into the doorbell page mapped for this queue.
        unsafe { self.kfd.kernel.write_doorbell(self.doorbell, wptr) };
    }

    fn too_long(&self, dwords: usize) -> Result<()> {
        // A ring never holds its whole size (see `reserve`).
        if dwords as u64 * 4 >= self.ring_bytes {
            return Err(Error::InvalidArgument(format!(
                "command stream of {dwords} dwords does not fit the {}-dword ring (it holds \
                 one dword less than its size)",
                self.ring_bytes / 4
            )));
        }
        Ok(())
    }

    /// Waits (up to `timeout`) until a PM4 submission of `dwords` dwords fits, so that the
    /// submission itself cannot time out.
    pub fn make_room(&self, dwords: usize, timeout: Duration) -> Result<()> {
        if dwords == 0 {
            return Ok(());
        }
        self.too_long(dwords)?;
        self.reserve(dwords as u64 * 4, timeout)
    }

    /// Zero dwords (NOPs) an SDMA packet of `dwords` dwords needs before it when written at
    /// byte `at`: none may straddle the ring's end, and an `INDIRECT` must end on an 8-dword
    /// boundary (the engine fetches the ring in 32-byte lines; amdgpu pads the same way).
    fn sdma_padding(&self, at: u64, packet: &[u32]) -> u64 {
        let bytes = packet.len() as u64 * 4;
        let align = |at: u64| {
            if packet
                .first()
                .is_some_and(|&h| Header::parse(h).op == OP_INDIRECT)
            {
                (32 - (at + bytes) % 32) % 32
            } else {
                0
            }
        };
        let pad = align(at);
        let to_end = self.ring_bytes - at % self.ring_bytes;
        if pad + bytes > to_end {
            to_end + align(at + to_end)
        } else {
            pad
        }
    }

    /// Bytes `builder`'s packets take in the ring from the current write position, padding
    /// included.
    fn sdma_footprint(&self, builder: &SdmaBuilder) -> u64 {
        builder.packets().fold(0, |used, p| {
            used + self.sdma_padding(self.written + used, p) + p.len() as u64 * 4
        })
    }

    /// Waits (up to `timeout`) until `builder`'s packets fit, with the padding
    /// [`HwQueue::submit_sdma`] puts between them, so that the submission itself cannot time
    /// out.
    pub fn make_room_sdma(&self, builder: &SdmaBuilder, timeout: Duration) -> Result<()> {
        if builder.words.is_empty() {
            return Ok(());
        }
        self.too_long(builder.words.len())?;
        let bytes = self.sdma_footprint(builder);
        if bytes >= self.ring_bytes {
            return Err(Error::InvalidArgument(format!(
                "copy command stream of {bytes} bytes with its padding does not fit the \
                 {}-byte ring (it holds less than its size)",
                self.ring_bytes
            )));
        }
        self.reserve(bytes, timeout)
    }

    /// Submits a PM4 stream (packets may wrap around the ring's end).
    pub fn submit(&mut self, words: &[u32], timeout: Duration) -> Result<()> {
        self.too_long(words.len())?;
        self.reserve(words.len() as u64 * 4, timeout)?;
        self.put(words);
        self.last_submission_dwords = words.len() as u64;
        self.kick();
        Ok(())
    }

    /// Submits the packets of `builder`, each preceded by the zero dwords (NOPs) it needs
    /// (`sdma_padding`: none straddles the ring's end, an `INDIRECT` ends on an
    /// 8-dword boundary). Room for the whole submission is made first, so a full ring fails it
    /// before any packet is written (a half-written submission would run later without its
    /// tail).
    pub fn submit_sdma(&mut self, builder: &SdmaBuilder, timeout: Duration) -> Result<()> {
        self.make_room_sdma(builder, timeout)?;
        let before = self.written;
        for p in builder.packets() {
            let pad = self.sdma_padding(self.written, p);
            if pad > 0 {
                self.reserve(pad, timeout)?;
                self.put(&vec![0u32; (pad / 4) as usize]);
            }
            self.reserve(p.len() as u64 * 4, timeout)?;
            self.put(p);
        }
        self.last_submission_dwords = (self.written - before) / 4;
        self.kick();
        Ok(())
    }
}

impl HwQueue {
    /// Destroys the queue now (the kernel stops whatever still runs on it) and then releases
    /// its ring, pointers and engine areas. Dropping it does the same.
    pub(crate) fn destroy(&mut self) {
        if std::mem::replace(&mut self.destroyed, true) {
            return;
        }
        // The engine may read its ring and pointers until the queue is destroyed: their memory
        // is released after it, in one chain, even if destroying takes a retry.
        let mut steps = vec![Release::DestroyQueue {
            queue_id: self.queue_id,
        }];
        if !self.doorbell_page.is_null() {
            steps.push(Release::Munmap {
                addr: self.doorbell_page as u64,
                len: DOORBELL_PAGE_BYTES,
            });
        }
        steps.extend(self.ring.take_release());
        steps.extend(self.pointers.take_release());
        for m in [&mut self.eop, &mut self.ctx_save].into_iter().flatten() {
            steps.extend(m.take_release());
        }
        // SAFETY: the doorbell mapping and the queue's memory belong to this queue, which is
        // going; nothing uses them once it is destroyed.
        unsafe { self.kfd.release(steps) };
    }
}

/// The bytes of `words` in memory order (the ring's little-endian dwords on the hosts hcq
/// supports).
fn words_as_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: any initialised u32 slice is a valid byte slice of four times its length, with
    // the same lifetime.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

impl Drop for HwQueue {
    fn drop(&mut self) {
        self.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AmdDriver;
    use hcq_amd_sys::sdma::{CopyLinear, Packet};
    use hcq_emu::{EmuConfig, EmuKernel};

    fn copy_packet() -> Packet {
        Packet::CopyLinear(CopyLinear {
            extra_info: 0,
            count: 0,
            dst_swap: 0,
            src_swap: 0,
            src: 0x1000,
            dst: 0x2000,
        })
    }

    /// A queue of `kind` on a fresh emulated GPU whose engines are held: they consume
    /// nothing, so the ring fills and stays full.
    fn held_queue(kind: QueueKind) -> (Arc<EmuKernel>, HwQueue) {
        let emu = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            max_steps: 1000,
            vram_bytes: 1 << 28,
            ..EmuConfig::default()
        }));
        let kernel: Arc<dyn seam::Syscalls> = emu.clone();
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        let node = driver.gpus[0].clone();
        let fd = driver.render_node(&node).unwrap();
        let q = HwQueue::create(&driver.kfd, fd, &node, "t", kind).unwrap();
        assert!(emu.hold_engines(0, true));
        (emu, q)
    }

    #[test]
    fn an_sdma_submission_that_does_not_fit_writes_nothing() {
        let (emu, mut q) = held_queue(QueueKind::Sdma);
        let timeout = Duration::from_millis(50);
        let mut one = SdmaBuilder::new();
        one.push(&copy_packet());
        let packet = one.words.len() as u64;
        let ring = q.capacity_dwords();
        // Leave room for one packet but not two, the second needing padding at the ring's end.
        let fill = ring / packet - 1;
        for _ in 0..fill {
            q.submit_sdma(&one, timeout).unwrap();
        }
        let free = ring - fill * packet;
        assert!(free >= packet && free < 2 * packet, "{free} dwords free");
        let mut two = SdmaBuilder::new();
        two.push(&copy_packet()).push(&copy_packet());
        let written = q.written;
        let e = q.submit_sdma(&two, timeout).unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        assert_eq!(
            q.written, written,
            "part of a failed submission reached the ring"
        );
        // One packet still fits.
        q.submit_sdma(&one, timeout).unwrap();
        assert_eq!(q.written, written + packet * 4);
        drop(q);
        emu.hold_engines(0, false);
    }

    #[test]
    fn a_ring_is_never_filled_to_exactly_its_size() {
        let (emu, mut q) = held_queue(QueueKind::Compute);
        let timeout = Duration::from_millis(50);
        let ring = q.capacity_dwords() as usize;
        // NOP packets: a header and `len - 1` dwords of body.
        let nops = |len: usize| {
            let mut w = vec![hcq_amd_sys::pm4::header(
                hcq_amd_sys::pm4::OP_NOP,
                len as u32 - 2,
            )];
            w.resize(len, 0);
            w
        };
        let e = q.submit(&nops(ring), timeout).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        q.submit(&nops(ring - 2), timeout).unwrap();
        // One more dword would fill the ring to its size; it waits for room instead.
        let e = q.submit(&nops(2), timeout).unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        assert_eq!(q.written, (ring as u64 - 2) * 4);
        drop(q);
        emu.hold_engines(0, false);
    }
}
