//! A minimal driver over the `Syscalls` seam, as the real driver uses it.
#![allow(dead_code)]

use std::ffi::c_void;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hcq_amd_sys::kfd::*;
use hcq_amd_sys::seam::*;
use hcq_emu::{EmuConfig, EmuKernel};

pub fn small_config() -> EmuConfig {
    EmuConfig {
        gpus: 1,
        max_steps: 1_000_000,
        vram_bytes: 256 << 20,
        ..EmuConfig::default()
    }
}

/// A request as the tests issue it: a typed constant, or a raw number (another size, number
/// or type byte than any constant's, as a foreign program may pass).
pub trait Request {
    /// The number passed to `ioctl(2)`.
    fn raw(&self) -> u64;
}

impl Request for u64 {
    fn raw(&self) -> u64 {
        *self
    }
}

impl<A> Request for hcq_amd_sys::ioctl::Ioctl<A> {
    fn raw(&self) -> u64 {
        self.request()
    }
}

/// Issues an ioctl with an argument the tests chose (the request's struct, or bytes of
/// another size, which the kernel must take as Linux does).
pub fn ioctl<T>(k: &EmuKernel, fd: Fd, request: impl Request, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is a live, writable `T` of at least the size every request used in the
    // tests encodes.
    unsafe { k.ioctl(fd, request.raw(), (arg as *mut T).cast::<c_void>()) }
}

pub fn errno_of(r: io::Result<impl Sized>) -> i32 {
    match r {
        Ok(_) => 0,
        // An explained ENOMEM is an error of kind OutOfMemory (see `Syscalls::ioctl`).
        Err(e) if e.kind() == io::ErrorKind::OutOfMemory && e.raw_os_error().is_none() => {
            assert!(
                e.get_ref().is_some(),
                "an OutOfMemory without its reason: {e}"
            );
            libc::ENOMEM
        }
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// A buffer object as the driver keeps it.
#[derive(Debug, Clone, Copy)]
pub struct Buf {
    pub va: u64,
    pub size: u64,
    pub handle: u64,
    pub mmap_offset: u64,
    /// Bytes of address space reserved after the buffer (see `Dev::try_alloc`).
    pub guard: u64,
}

/// The guard page after each device buffer a test allocates.
pub const GUARD_BYTES: u64 = 0x1000;

impl Buf {
    pub fn ptr<T>(&self, offset: u64) -> *mut T {
        (self.va + offset) as usize as *mut T
    }
    pub fn atomic_u64(&self, offset: u64) -> &AtomicU64 {
        // SAFETY: test buffers are mapped read-write, 8-byte aligned offsets are used, and
        // they outlive the borrow in every test.
        unsafe { AtomicU64::from_ptr(self.ptr(offset)) }
    }
    pub fn read_u32(&self, offset: u64) -> u32 {
        // SAFETY: as above; the GPU writes with atomics, read volatile here.
        unsafe { ptr::read_volatile(self.ptr::<u32>(offset)) }
    }
    pub fn write_u32(&self, offset: u64, v: u32) {
        // SAFETY: as above.
        unsafe { ptr::write_volatile(self.ptr::<u32>(offset), v) }
    }
}

/// One opened GPU.
pub struct Dev<'k> {
    pub k: &'k EmuKernel,
    pub kfd: Fd,
    pub drm: Fd,
    pub gpu_id: u32,
}

impl<'k> Dev<'k> {
    /// Opens the `n`-th GPU of the topology.
    pub fn open(k: &'k EmuKernel, n: usize) -> Dev<'k> {
        let mut nodes: Vec<u32> = k
            .read_dir(TOPOLOGY_NODES)
            .unwrap()
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        nodes.sort();
        let gpus: Vec<u32> = nodes
            .into_iter()
            .filter(|n| {
                k.read_to_string(&format!("{TOPOLOGY_NODES}/{n}/gpu_id"))
                    .unwrap()
                    .trim()
                    != "0"
            })
            .collect();
        let node = gpus[n];
        let gpu_id: u32 = k
            .read_to_string(&format!("{TOPOLOGY_NODES}/{node}/gpu_id"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let props = k
            .read_to_string(&format!("{TOPOLOGY_NODES}/{node}/properties"))
            .unwrap();
        let minor = props
            .lines()
            .find_map(|l| l.strip_prefix("drm_render_minor "))
            .unwrap()
            .trim()
            .parse::<u32>()
            .unwrap();
        let kfd = k.open("/dev/kfd").unwrap();
        let drm = k.open(&format!("/dev/dri/renderD{minor}")).unwrap();
        ioctl(
            k,
            kfd,
            IOC_ACQUIRE_VM,
            &mut AcquireVmArgs {
                drm_fd: drm as u32,
                gpu_id,
            },
        )
        .unwrap();
        Dev {
            k,
            kfd,
            drm,
            gpu_id,
        }
    }

    /// Reserves address space, allocates, maps for the CPU and the GPU (like `_gpu_alloc`).
    /// A device buffer's reservation ends in a guard page that is never mapped for the GPU:
    /// the host places new mappings next to old ones, so without it the byte past a buffer
    /// could belong to another of the test's buffers, and a test of running past the end would
    /// pass or fail with the host's address-space layout.
    pub fn try_alloc(&self, size: u64, flags: u32) -> io::Result<Buf> {
        let flags = flags
            | ALLOC_MEM_FLAGS_WRITABLE
            | ALLOC_MEM_FLAGS_EXECUTABLE
            | ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
        let userptr = flags & ALLOC_MEM_FLAGS_USERPTR != 0;
        // SAFETY: fresh anonymous mappings at addresses the kernel picks.
        let addr = unsafe {
            if userptr {
                self.k.mmap(
                    ptr::null_mut(),
                    size as usize,
                    PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS,
                    -1,
                    0,
                )
            } else {
                self.k.mmap(
                    ptr::null_mut(),
                    (size + GUARD_BYTES) as usize,
                    PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1,
                    0,
                )
            }
        }? as u64;
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: addr,
            size,
            gpu_id: self.gpu_id,
            flags,
            mmap_offset: if userptr { addr } else { 0 },
            ..Default::default()
        };
        let guard = if userptr { 0 } else { GUARD_BYTES };
        let reserved = size + guard;
        if let Err(e) = ioctl(self.k, self.kfd, IOC_ALLOC_MEMORY_OF_GPU, &mut a) {
            // SAFETY: the reservation made above.
            unsafe {
                self.k
                    .munmap(addr as usize as *mut c_void, reserved as usize)
            }
            .unwrap();
            return Err(e);
        }
        if !userptr {
            // SAFETY: replaces our own reservation with the buffer's CPU view.
            let p = unsafe {
                self.k.mmap(
                    addr as usize as *mut c_void,
                    size as usize,
                    PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED,
                    self.drm,
                    a.mmap_offset,
                )
            }?;
            assert_eq!(p as u64, addr);
        }
        let buf = Buf {
            va: addr,
            size,
            handle: a.handle,
            mmap_offset: a.mmap_offset,
            guard,
        };
        self.map(&buf)?;
        Ok(buf)
    }

    pub fn alloc(&self, size: u64, flags: u32) -> Buf {
        self.try_alloc(size, flags).unwrap()
    }

    pub fn map(&self, buf: &Buf) -> io::Result<()> {
        let ids = [self.gpu_id];
        let mut m = MapMemoryArgs {
            handle: buf.handle,
            device_ids_array_ptr: ids.as_ptr() as u64,
            n_devices: 1,
            n_success: 0,
        };
        ioctl(self.k, self.kfd, IOC_MAP_MEMORY_TO_GPU, &mut m)?;
        assert_eq!(m.n_success, 1);
        Ok(())
    }

    pub fn unmap(&self, buf: &Buf) -> io::Result<()> {
        let ids = [self.gpu_id];
        let mut m = MapMemoryArgs {
            handle: buf.handle,
            device_ids_array_ptr: ids.as_ptr() as u64,
            n_devices: 1,
            n_success: 0,
        };
        ioctl(self.k, self.kfd, IOC_UNMAP_MEMORY_FROM_GPU, &mut m)
    }

    /// Unmaps from the GPU and the CPU, then frees (like `_gpu_free`).
    pub fn free(&self, buf: Buf) {
        self.unmap(&buf).unwrap();
        let reserved = buf.size + buf.guard;
        // SAFETY: the CPU view of the buffer and its guard page, which the test no longer uses.
        unsafe {
            self.k
                .munmap(buf.va as usize as *mut c_void, reserved as usize)
        }
        .unwrap();
        ioctl(
            self.k,
            self.kfd,
            IOC_FREE_MEMORY_OF_GPU,
            &mut FreeMemoryOfGpuArgs { handle: buf.handle },
        )
        .unwrap();
    }

    pub fn create_event(&self, kind: u32, page: Option<&Buf>) -> CreateEventArgs {
        let mut a = CreateEventArgs {
            event_type: kind,
            auto_reset: 1,
            event_page_offset: page.map_or(0, |p| p.handle),
            ..Default::default()
        };
        ioctl(self.k, self.kfd, IOC_CREATE_EVENT, &mut a).unwrap();
        a
    }

    /// Waits for one event; returns the wait result and the event data.
    pub fn wait_event(&self, id: u32, timeout_ms: u32) -> (u32, EventData) {
        let mut data = [EventData {
            event_id: id,
            ..Default::default()
        }];
        let mut w = WaitEventsArgs {
            events_ptr: data.as_mut_ptr() as u64,
            num_events: 1,
            wait_for_all: 1,
            timeout: timeout_ms,
            wait_result: 99,
        };
        ioctl(self.k, self.kfd, IOC_WAIT_EVENTS, &mut w).unwrap();
        (w.wait_result, data[0])
    }

    /// Creates a queue of `queue_type` with a ring of `ring_bytes` (write pointer at byte 0 of
    /// its pointer page, read pointer at byte 8) and maps its doorbell, as the driver does for
    /// compute and SDMA queues alike.
    pub fn create_queue_of(&self, queue_type: u32, ring_bytes: u64) -> RawQueue {
        let ring = self.alloc(ring_bytes, ALLOC_MEM_FLAGS_GTT);
        let gart = self.alloc(0x1000, ALLOC_MEM_FLAGS_GTT);
        let mut q = CreateQueueArgs {
            ring_base_address: ring.va,
            ring_size: ring_bytes as u32,
            gpu_id: self.gpu_id,
            queue_type,
            queue_percentage: MAX_QUEUE_PERCENTAGE,
            queue_priority: MAX_QUEUE_PRIORITY,
            write_pointer_address: gart.va,
            read_pointer_address: gart.va + 8,
            ..Default::default()
        };
        let areas = (queue_type == QUEUE_TYPE_COMPUTE).then(|| compute_queue_areas(self));
        if let Some(areas) = &areas {
            q.eop_buffer_address = areas.eop.va;
            q.eop_buffer_size = areas.eop.size;
            q.ctx_save_restore_address = areas.cwsr.va;
            q.ctx_save_restore_size = GFX1100_CWSR_BYTES;
            q.ctl_stack_size = GFX1100_CTL_STACK_BYTES;
        }
        ioctl(self.k, self.kfd, IOC_CREATE_QUEUE, &mut q).unwrap();
        assert_eq!(q.doorbell_offset & (3 << 62), MMAP_TYPE_DOORBELL);
        let base = q.doorbell_offset & !0x1fff;
        // SAFETY: a fresh mapping of the doorbell page.
        let page = unsafe {
            self.k.mmap(
                ptr::null_mut(),
                0x2000,
                PROT_READ | PROT_WRITE,
                MAP_SHARED,
                self.kfd,
                base,
            )
        }
        .unwrap();
        RawQueue {
            ring,
            gart,
            areas,
            queue_id: q.queue_id,
            doorbell_offset: q.doorbell_offset,
            doorbell: (page as u64 + (q.doorbell_offset - base)) as usize as *mut u64,
        }
    }

    pub fn create_queue(&self, ring_bytes: u64) -> Queue<'_, 'k> {
        let raw = self.create_queue_of(QUEUE_TYPE_COMPUTE, ring_bytes);
        Queue {
            dev: self,
            ring: raw.ring,
            gart: raw.gart,
            queue_id: raw.queue_id,
            doorbell_offset: raw.doorbell_offset,
            doorbell: raw.doorbell,
            wptr: 0,
        }
    }

    pub fn destroy_queue(&self, queue_id: u32) {
        ioctl(
            self.k,
            self.kfd,
            IOC_DESTROY_QUEUE,
            &mut DestroyQueueArgs { queue_id, pad: 0 },
        )
        .unwrap();
    }
}

/// A queue just created: its ring, the page holding its pointers, and its doorbell.
/// A 96-CU gfx1100's compute-queue sizes as Linux 6.12 computes them (worked out by hand):
/// control stack 3072 waves x 12 bytes + header, page aligned; CWSR area that plus 96 CUs of
/// 0x75000 saved bytes; the buffer adds 96 KiB of debugger memory.
pub const GFX1100_CTL_STACK_BYTES: u32 = 0xa000;
pub const GFX1100_CWSR_BYTES: u32 = 0x2bea000;
pub const GFX1100_CWSR_BUFFER_BYTES: u64 = 0x2c02000;
pub const GFX1100_EOP_BYTES: u64 = 0x1000;

/// A compute queue's EOP buffer and context save area (VRAM, mapped to the GPU).
pub struct ComputeQueueAreas {
    pub eop: Buf,
    pub cwsr: Buf,
}

pub fn compute_queue_areas(dev: &Dev<'_>) -> ComputeQueueAreas {
    ComputeQueueAreas {
        eop: dev.alloc(GFX1100_EOP_BYTES, ALLOC_MEM_FLAGS_VRAM),
        cwsr: dev.alloc(GFX1100_CWSR_BUFFER_BYTES, ALLOC_MEM_FLAGS_VRAM),
    }
}

pub struct RawQueue {
    pub ring: Buf,
    pub gart: Buf,
    /// A compute queue's EOP buffer and context save area.
    pub areas: Option<ComputeQueueAreas>,
    pub queue_id: u32,
    pub doorbell_offset: u64,
    pub doorbell: *mut u64,
}

/// A compute queue as the driver keeps it.
pub struct Queue<'d, 'k> {
    pub dev: &'d Dev<'k>,
    pub ring: Buf,
    pub gart: Buf,
    pub queue_id: u32,
    pub doorbell_offset: u64,
    pub doorbell: *mut u64,
    pub wptr: u64,
}

impl Queue<'_, '_> {
    /// Copies `words` into the ring and rings the doorbell (like `HWPM4Queue.submit`).
    pub fn submit(&mut self, words: &[u32]) {
        self.write_words(words);
        self.ring_doorbell(self.wptr);
    }

    pub fn write_words(&mut self, words: &[u32]) {
        let ring_dwords = self.ring.size / 4;
        for &w in words {
            self.ring.write_u32(4 * (self.wptr % ring_dwords), w);
            self.wptr += 1;
        }
        self.gart.atomic_u64(0).store(self.wptr, Ordering::SeqCst);
    }

    pub fn ring_doorbell(&self, value: u64) {
        // SAFETY: `doorbell` points into the doorbell page mapped by `create_queue`.
        unsafe { self.dev.k.write_doorbell(self.doorbell, value) };
    }

    pub fn rptr(&self) -> u64 {
        self.gart.atomic_u64(8).load(Ordering::SeqCst)
    }

    /// Waits until the command processor has consumed everything submitted.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.rptr() == self.wptr {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    pub fn destroy(self) {
        self.dev.destroy_queue(self.queue_id);
    }
}

/// Signals as the driver lays them out: a 64-byte `amd_signal_t` in a signal page.
pub struct Signals {
    pub page: Buf,
    pub events: Buf,
}

impl Signals {
    pub fn new(dev: &Dev) -> Signals {
        let page = dev.alloc(
            0x1000,
            ALLOC_MEM_FLAGS_GTT | ALLOC_MEM_FLAGS_COHERENT | ALLOC_MEM_FLAGS_UNCACHED,
        );
        let events = dev.alloc(
            0x8000,
            ALLOC_MEM_FLAGS_GTT | ALLOC_MEM_FLAGS_COHERENT | ALLOC_MEM_FLAGS_UNCACHED,
        );
        Signals { page, events }
    }
    /// GPU address of the value of signal `i`.
    pub fn value_addr(&self, i: u64) -> u64 {
        self.page.va + 64 * i + hcq_amd_sys::signal::VALUE_OFFSET
    }
    pub fn value(&self, i: u64) -> u64 {
        self.page
            .atomic_u64(64 * i + hcq_amd_sys::signal::VALUE_OFFSET)
            .load(Ordering::SeqCst)
    }
    pub fn set_value(&self, i: u64, v: u64) {
        self.page
            .atomic_u64(64 * i + hcq_amd_sys::signal::VALUE_OFFSET)
            .store(v, Ordering::SeqCst)
    }
    pub fn mailbox(&self, ev: &CreateEventArgs) -> u64 {
        self.events.va + 8 * u64::from(ev.event_slot_index)
    }
}

/// Waits until signal `i` reaches `value`, sleeping in `WAIT_EVENTS` like `_wait_signal`.
/// Waits until slot `i` reaches `value` (`Some(false)`) or a VM fault evicts the queues of
/// `dev`'s GPU (`Some(true)`); `None` after 10 s of neither.
pub fn reached_or_evicted(
    k: &EmuKernel,
    dev: &Dev,
    sig: &Signals,
    i: u64,
    value: u64,
    event: &CreateEventArgs,
) -> Option<bool> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if sig.value(i) >= value {
            return Some(false);
        }
        if k.queues_evicted(dev.gpu_id) {
            return Some(true);
        }
        dev.wait_event(event.event_id, 10);
    }
    None
}

pub fn wait_signal(dev: &Dev, sig: &Signals, i: u64, value: u64, event: &CreateEventArgs) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if sig.value(i) >= value {
            return true;
        }
        dev.wait_event(event.event_id, 100);
    }
    false
}
