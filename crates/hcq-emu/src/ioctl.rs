//! The `/dev/kfd` ioctls and the `mmap`/`munmap` side of the seam.

use std::ffi::c_void;
use std::io;
use std::sync::Arc;

use hcq_amd_sys::ioctl::Ioctl;
use hcq_amd_sys::kfd::{self, *};
use hcq_amd_sys::seam::{Fd, MAP_FIXED};

use crate::clock::{gpu_ticks, host_ns};
use crate::cp::Cp;
use crate::fds::{FdTable, Node};
use crate::gpu::Gpu;
use crate::memory::{page_round, BoKind, Snapshot, PAGE};
use crate::queue::{
    QueueShared, DOORBELL_REGION_BYTES, MAX_QUEUES_PER_GPU, MMAP_GPU_ID_MASK, MMAP_GPU_ID_SHIFT,
};
use crate::ring::RingDesc;
use crate::sdma::Sdma;
use crate::util::{errno, lock};
use crate::EmuKernel;

/// Most GPU ids one `MAP_MEMORY_TO_GPU` may name.
const MAX_MAP_DEVICES: u32 = 1024;
/// Most events one `WAIT_EVENTS` may name.
pub(crate) const MAX_WAIT_EVENTS: u32 = 2 * SIGNAL_EVENT_LIMIT;
/// The mmap-type bits of a `/dev/kfd` offset.
const MMAP_TYPE_MASK: u64 = 3 << kfd::MMAP_TYPE_SHIFT;
/// Smallest ring accepted, in bytes.
const MIN_RING_BYTES: u32 = 1024;
/// Stack of a command processor thread (the interpreter keeps wave state on it).
const CP_STACK_BYTES: usize = 16 << 20;
/// Stack of an SDMA engine thread.
const SDMA_STACK_BYTES: usize = 1 << 20;

/// Runs `f` on the kernel's copy of the argument, as `kfd_ioctl` makes it. The struct is
/// the one `ioctl`, the kernel's own definition of the request, names; the caller's request
/// (found by its number alone) says only how many bytes it passes (`usize`), which KFD does
/// not hold against the struct's size: with `_IOC_WRITE` the caller's `usize` bytes are
/// read, the rest of the kernel's struct zeroed (an older, shorter struct works); with
/// `_IOC_READ` `usize` bytes are written back, whether or not the handler failed (a newer,
/// longer struct gets its tail back untouched).
///
/// # Safety
/// `arg` must point to `request_size(request)` readable bytes (and writable, for requests
/// the kernel answers with data).
unsafe fn with_args<T: Copy>(
    ioctl: Ioctl<T>,
    arg: *mut c_void,
    request: u64,
    f: impl FnOnce(&mut T) -> io::Result<()>,
) -> io::Result<()> {
    let user = request_size(request);
    // The kernel's buffer holds the larger of the two structs.
    let mut kdata = vec![0u8; user.max(ioctl.size())];
    if user > 0 && arg.is_null() {
        return Err(errno(libc::EFAULT));
    }
    if ioctl.kernel_reads() {
        // SAFETY: `arg` holds `user` readable bytes (caller's guarantee); `kdata` at least as
        // many.
        unsafe { std::ptr::copy_nonoverlapping(arg as *const u8, kdata.as_mut_ptr(), user) };
    }
    // SAFETY: `kdata` holds at least `size_of::<T>()` bytes; every `T` here is a plain
    // `#[repr(C)]` struct of integers, for which any bytes are a value.
    let mut a = unsafe { kdata.as_ptr().cast::<T>().read_unaligned() };
    let result = f(&mut a);
    // SAFETY: as above.
    unsafe { kdata.as_mut_ptr().cast::<T>().write_unaligned(a) };
    if ioctl.kernel_writes() {
        // SAFETY: `arg` holds `user` writable bytes for a request that returns data.
        unsafe { std::ptr::copy_nonoverlapping(kdata.as_ptr(), arg as *mut u8, user) };
    }
    result
}

/// The kernel's own definition of the request with `request`'s number, as `kfd_ioctl` finds
/// it: by number alone (the caller's type byte, direction and size do not select it). A number
/// KFD does not define is `EINVAL`, as is one it defines that this emulator does not model.
pub(crate) fn known_request(request: u64) -> io::Result<KfdIoctl> {
    KfdIoctl::decode(request).ok_or_else(|| errno(libc::EINVAL))
}

/// Linux 6.12's checks of a new queue's buffers (`kfd_queue_acquire_buffers`): each must be
/// exactly one GPU mapping, starting in the page of the address given and, where KFD knows
/// the size, as long as that size; a compute queue's EOP, control-stack and context-save
/// sizes must be KFD's own figures for the node ([`crate::topology::gpu_queue_areas`]).
/// Returns the GPU addresses of the mappings the queue then holds. Every refusal is `EINVAL`.
fn queue_buffers(
    snap: &Snapshot,
    a: &CreateQueueArgs,
    sdma: bool,
    areas: &hcq_amd_sys::queue_areas::QueueAreas,
) -> io::Result<Vec<u64>> {
    const PAGE_SHIFT: u32 = 12;
    let einval = || errno(libc::EINVAL);
    // KFD compares page numbers; an expected size under one page checks only the start.
    let buffer = |addr: u64, expected: u64| -> io::Result<u64> {
        let (start, end) = snap.mapping(addr).ok_or_else(einval)?;
        let page = addr >> PAGE_SHIFT;
        let pages = expected >> PAGE_SHIFT;
        if page != start >> PAGE_SHIFT || (pages != 0 && page + pages != end >> PAGE_SHIFT) {
            return Err(einval());
        }
        Ok(start)
    };
    let page = 1 << PAGE_SHIFT;
    let mut held = vec![
        buffer(a.write_pointer_address, page)?,
        buffer(a.read_pointer_address, page)?,
        buffer(a.ring_base_address, u64::from(a.ring_size))?,
    ];
    if sdma {
        return Ok(held);
    }
    // The EOP buffer is optional (not every GPU needs one); given, it is checked.
    if a.eop_buffer_address != 0 {
        if a.eop_buffer_size != u64::from(areas.eop_bytes) {
            return Err(einval());
        }
        held.push(buffer(a.eop_buffer_address, a.eop_buffer_size)?);
    }
    if a.ctl_stack_size != areas.ctl_stack_bytes || a.ctx_save_restore_size != areas.cwsr_bytes {
        return Err(einval());
    }
    held.push(buffer(
        a.ctx_save_restore_address,
        areas.cwsr_buffer_bytes(),
    )?);
    Ok(held)
}

impl EmuKernel {
    /// # Safety
    /// As [`hcq_amd_sys::seam::Syscalls::ioctl`].
    pub(crate) unsafe fn do_ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> io::Result<()> {
        match self.fds.get(fd) {
            None => return Err(errno(libc::EBADF)),
            Some(Node::Render(g)) => {
                let gpu = self.gpus.get(g).ok_or_else(|| errno(libc::ENODEV))?;
                // SAFETY: the caller's guarantees, forwarded.
                return unsafe { crate::drm::render_ioctl(gpu, request, arg) };
            }
            Some(Node::Kfd) => {}
        }
        let known = known_request(request)?;
        // A KFD of an older version than the one configured has no such ioctl: it answers as
        // for a number it does not define.
        if !self.config.kfd_version().has(known) {
            return Err(errno(libc::EINVAL));
        }
        // SAFETY: in every arm, the caller guarantees `arg` points to as many bytes as `request`
        // encodes, which is all `with_args` reads or writes. Each arm's handler takes the
        // struct of the typed constant it names, so a handler for another struct does not
        // compile.
        unsafe {
            match known {
                KfdIoctl::GetVersion => with_args(IOC_GET_VERSION, arg, request, |a| {
                    let v = self.config.kfd_version();
                    (a.major_version, a.minor_version) = (v.major, v.minor);
                    Ok(())
                }),
                KfdIoctl::RuntimeEnable => {
                    with_args(IOC_RUNTIME_ENABLE, arg, request, |a| self.runtime_enable(a))
                }
                KfdIoctl::AcquireVm => {
                    with_args(IOC_ACQUIRE_VM, arg, request, |a| self.acquire_vm(a))
                }
                KfdIoctl::AllocMemoryOfGpu => {
                    with_args(IOC_ALLOC_MEMORY_OF_GPU, arg, request, |a| {
                        self.alloc_memory(a)
                    })
                }
                KfdIoctl::FreeMemoryOfGpu => with_args(IOC_FREE_MEMORY_OF_GPU, arg, request, |a| {
                    self.free_memory(a.handle)
                }),
                KfdIoctl::MapMemoryToGpu => with_args(IOC_MAP_MEMORY_TO_GPU, arg, request, |a| {
                    self.map_memory(a, true)
                }),
                KfdIoctl::UnmapMemoryFromGpu => {
                    with_args(IOC_UNMAP_MEMORY_FROM_GPU, arg, request, |a| {
                        self.map_memory(a, false)
                    })
                }
                KfdIoctl::CreateEvent => {
                    with_args(IOC_CREATE_EVENT, arg, request, |a| self.create_event(a))
                }
                KfdIoctl::DestroyEvent => with_args(IOC_DESTROY_EVENT, arg, request, |a| {
                    self.events.destroy(a.event_id)
                }),
                KfdIoctl::SetEvent => {
                    with_args(IOC_SET_EVENT, arg, request, |a| self.events.set(a.event_id))
                }
                KfdIoctl::ResetEvent => with_args(IOC_RESET_EVENT, arg, request, |a| {
                    self.events.reset(a.event_id)
                }),
                KfdIoctl::WaitEvents => {
                    with_args(IOC_WAIT_EVENTS, arg, request, |a| self.wait_events(a))
                }
                KfdIoctl::CreateQueue => {
                    with_args(IOC_CREATE_QUEUE, arg, request, |a| self.create_queue(a))
                }
                KfdIoctl::DestroyQueue => with_args(IOC_DESTROY_QUEUE, arg, request, |a| {
                    self.destroy_queue(a.queue_id)
                }),
                KfdIoctl::GetClockCounters => {
                    with_args(IOC_GET_CLOCK_COUNTERS, arg, request, |a| {
                        self.clock_counters(a)
                    })
                }
                KfdIoctl::AvailableMemory => with_args(IOC_AVAILABLE_MEMORY, arg, request, |a| {
                    let gpu = self
                        .gpu_by_id(a.gpu_id)
                        .ok_or_else(|| errno(libc::EINVAL))?;
                    a.available = gpu.vram_available().min(self.space.host_available());
                    Ok(())
                }),
            }
        }
    }

    /// The GPU `gpu_id` names, if the process has acquired its VM.
    fn acquired_gpu(&self, gpu_id: u32) -> io::Result<&Arc<Gpu>> {
        let gpu = self.gpu_by_id(gpu_id).ok_or_else(|| errno(libc::EINVAL))?;
        if lock(&gpu.vm_fd).is_none() {
            return Err(errno(libc::EINVAL));
        }
        Ok(gpu)
    }

    fn acquire_vm(&self, a: &mut AcquireVmArgs) -> io::Result<()> {
        let gpu = self
            .gpu_by_id(a.gpu_id)
            .ok_or_else(|| errno(libc::EINVAL))?;
        let fd = a.drm_fd as Fd;
        if self.fds.get(fd) != Some(Node::Render(gpu.index)) {
            return Err(errno(libc::EINVAL));
        }
        let mut vm = lock(&gpu.vm_fd);
        match *vm {
            None => *vm = Some(fd),
            Some(prev) if prev == fd => {}
            Some(_) => return Err(errno(libc::EBUSY)),
        }
        Ok(())
    }

    fn alloc_memory(&self, a: &mut AllocMemoryOfGpuArgs) -> io::Result<()> {
        let gpu = self.acquired_gpu(a.gpu_id)?;
        let domain = a.flags
            & (ALLOC_MEM_FLAGS_VRAM
                | ALLOC_MEM_FLAGS_GTT
                | ALLOC_MEM_FLAGS_USERPTR
                | ALLOC_MEM_FLAGS_DOORBELL);
        let kind = match domain {
            ALLOC_MEM_FLAGS_VRAM => BoKind::Vram,
            ALLOC_MEM_FLAGS_GTT => BoKind::Gtt,
            ALLOC_MEM_FLAGS_USERPTR => BoKind::Userptr,
            _ => return Err(errno(libc::EINVAL)),
        };
        // A board whose BAR does not span VRAM has no host-visible VRAM to give.
        if self.config.small_bar && kind == BoKind::Vram && a.flags & ALLOC_MEM_FLAGS_PUBLIC != 0 {
            return Err(errno(libc::EINVAL));
        }
        let size = page_round(a.size)
            .filter(|&s| s > 0)
            .ok_or_else(|| errno(libc::EINVAL))?;
        let va = a.va_addr;
        let end = va.checked_add(size).ok_or_else(|| errno(libc::EINVAL))?;
        if va == 0 || !va.is_multiple_of(PAGE) || end > (1 << 47) {
            return Err(errno(libc::EINVAL));
        }
        let mut bos = lock(&self.bos);
        if !bos.va_free(va, end) {
            return Err(errno(libc::EINVAL));
        }
        if kind == BoKind::Vram {
            let mut used = lock(&gpu.vram_used);
            if used.checked_add(size).is_none_or(|u| u > gpu.vram_bytes) {
                return Err(self.vram_exhausted(gpu.vram_bytes, *used));
            }
            *used += size;
        }
        let storage = match kind {
            BoKind::Userptr => {
                let user = if a.mmap_offset != 0 {
                    a.mmap_offset
                } else {
                    va
                };
                if user % PAGE != 0 {
                    Err(errno(libc::EINVAL))
                } else {
                    self.space.hold_user(user, size)
                }
            }
            _ => self.space.back(va, size, kind == BoKind::Gtt),
        };
        let result = storage.and_then(|s| bos.insert(gpu.index, gpu.gpu_id, va, size, kind, s));
        match result {
            Ok((handle, offset)) => {
                a.handle = handle;
                a.mmap_offset = offset;
                if kind == BoKind::Gtt {
                    gpu.gtt_used
                        .fetch_add(size, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            }
            Err(e) => {
                if kind == BoKind::Vram {
                    *lock(&gpu.vram_used) -= size;
                }
                Err(e)
            }
        }
    }

    /// `ENOMEM` for a VRAM allocation beyond the GPU's size, saying whether the host's memory
    /// is what made it that small.
    fn vram_exhausted(&self, vram: u64, used: u64) -> io::Error {
        let mut why = format!(
            "the emulated GPU has {} of VRAM, {} of it in use, {} free",
            crate::host_memory::bytes(vram),
            crate::host_memory::bytes(used),
            crate::host_memory::bytes(vram.saturating_sub(used))
        );
        if vram < self.config.vram_bytes {
            why += &format!(
                " (HCQ_EMU_VRAM is {}, but the host's memory can back no more than the smaller \
                 size: the emulator holds at most half of the tightest memory limit)",
                crate::host_memory::bytes(self.config.vram_bytes)
            );
        }
        io::Error::new(io::ErrorKind::OutOfMemory, why)
    }

    /// `RUNTIME_ENABLE`: a runtime says it is there (for the debugger), once, before it has
    /// queues; `mode_mask` 0 withdraws, which is always accepted.
    fn runtime_enable(&self, a: &mut RuntimeEnableArgs) -> io::Result<()> {
        let result = self.runtime_enable_checked(a);
        lock(&self.runtime_enable_calls).push(crate::RuntimeEnableCall {
            mode_mask: a.mode_mask,
            queues: lock(&self.queues).queues.len(),
            errno: result
                .as_ref()
                .err()
                .map_or(0, |e| e.raw_os_error().unwrap_or(-1)),
        });
        result
    }

    fn runtime_enable_checked(&self, a: &mut RuntimeEnableArgs) -> io::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        if a.mode_mask & RUNTIME_ENABLE_MODE_ENABLE == 0 {
            self.runtime_enabled.store(false, Relaxed);
            return Ok(());
        }
        if self.runtime_enabled.load(Relaxed) {
            return Err(errno(libc::EBUSY));
        }
        if !lock(&self.queues).queues.is_empty() {
            return Err(errno(libc::EEXIST));
        }
        self.runtime_enabled.store(true, Relaxed);
        Ok(())
    }

    fn free_memory(&self, handle: u64) -> io::Result<()> {
        if self.events.is_page(handle) {
            return Err(errno(libc::EPERM));
        }
        let mut bos = lock(&self.bos);
        // A BO still mapped to a GPU is not freed (every kernel): unmap it first.
        if !bos
            .get(handle)
            .ok_or_else(|| errno(libc::EINVAL))?
            .mapped_on
            .is_empty()
        {
            return Err(errno(libc::EBUSY));
        }
        let bo = bos.remove(handle).ok_or_else(|| errno(libc::EINVAL))?;
        drop(bos);
        if let Some(gpu) = self.gpus.get(bo.gpu) {
            match bo.kind {
                BoKind::Vram => {
                    let mut used = lock(&gpu.vram_used);
                    *used = used.saturating_sub(bo.size);
                }
                BoKind::Gtt => {
                    gpu.gtt_used
                        .fetch_sub(bo.size, std::sync::atomic::Ordering::Relaxed);
                }
                _ => {}
            }
        }
        // The storage is released when the last page-table snapshot using it is dropped.
        drop(bo);
        Ok(())
    }

    fn map_memory(&self, a: &mut MapMemoryArgs, map: bool) -> io::Result<()> {
        if a.n_devices == 0 || a.n_devices > MAX_MAP_DEVICES || a.n_success > a.n_devices {
            return Err(errno(libc::EINVAL));
        }
        if a.device_ids_array_ptr == 0 {
            return Err(errno(libc::EFAULT));
        }
        let ids = a.device_ids_array_ptr as usize as *const u32;
        let mut bos = lock(&self.bos);
        let bo = bos.get_mut(a.handle).ok_or_else(|| errno(libc::EINVAL))?;
        for i in a.n_success..a.n_devices {
            // SAFETY: the caller guarantees `device_ids_array_ptr` points to `n_devices` ids
            // (pointers inside the ioctl struct are the caller's contract); `i < n_devices`.
            let gpu_id = unsafe { ids.add(i as usize).read_unaligned() };
            let gpu = self.acquired_gpu(gpu_id)?;
            if map {
                gpu.page_table.map(bo.va, &bo.storage);
                if !bo.mapped_on.contains(&gpu.index) {
                    bo.mapped_on.push(gpu.index);
                }
            } else {
                // Linux 6.12: not while a queue of the process uses it.
                if self.config.kernel.validates_queue_buffers()
                    && lock(&self.queues)
                        .queues
                        .values()
                        .any(|q| q.gpu == gpu.index && q.buffers.contains(&bo.va))
                {
                    return Err(errno(libc::EBUSY));
                }
                gpu.page_table.unmap(bo.va);
                gpu.code_cache.forget(bo.va, bo.size);
                bo.mapped_on.retain(|&g| g != gpu.index);
            }
            a.n_success = i + 1;
        }
        Ok(())
    }

    fn create_event(&self, a: &mut CreateEventArgs) -> io::Result<()> {
        let page = if a.event_page_offset != 0 {
            let bos = lock(&self.bos);
            let bo = bos
                .get(a.event_page_offset)
                .ok_or_else(|| errno(libc::EINVAL))?;
            Some((bo.handle, Arc::clone(&bo.storage)))
        } else {
            None
        };
        self.events.create(a, page)
    }

    fn wait_events(&self, a: &mut WaitEventsArgs) -> io::Result<()> {
        if a.num_events == 0 || a.num_events > MAX_WAIT_EVENTS {
            return Err(errno(libc::EINVAL));
        }
        if a.events_ptr == 0 {
            return Err(errno(libc::EFAULT));
        }
        let ptr = a.events_ptr as usize as *mut EventData;
        let n = a.num_events as usize;
        // SAFETY: the caller guarantees `events_ptr` points to `num_events` writable
        // `kfd_event_data` (pointers inside the ioctl struct are the caller's contract).
        let mut data: Vec<EventData> = (0..n)
            .map(|i| unsafe { ptr.add(i).read_unaligned() })
            .collect();
        a.wait_result = self
            .events
            .wait(&mut data, a.wait_for_all != 0, a.timeout)?;
        for (i, d) in data.into_iter().enumerate() {
            // SAFETY: as above.
            unsafe { ptr.add(i).write_unaligned(d) };
        }
        Ok(())
    }

    fn create_queue(&self, a: &mut CreateQueueArgs) -> io::Result<()> {
        let gpu = self.acquired_gpu(a.gpu_id)?;
        let sdma = match a.queue_type {
            QUEUE_TYPE_COMPUTE => false,
            QUEUE_TYPE_SDMA => true,
            // AQL queues are not emulated (yet).
            _ => return Err(errno(libc::EINVAL)),
        };
        if a.queue_percentage > MAX_QUEUE_PERCENTAGE || a.queue_priority > MAX_QUEUE_PRIORITY {
            return Err(errno(libc::EINVAL));
        }
        if !a.ring_size.is_power_of_two()
            || a.ring_size < MIN_RING_BYTES
            || !a.ring_base_address.is_multiple_of(256)
        {
            return Err(errno(libc::EINVAL));
        }
        let snap = gpu.page_table.snapshot();
        let mapped = |addr: u64, len: u64| snap.translate(addr, len).is_some();
        if !mapped(a.ring_base_address, u64::from(a.ring_size))
            || !a.read_pointer_address.is_multiple_of(8)
            || !a.write_pointer_address.is_multiple_of(8)
            || !mapped(a.read_pointer_address, 8)
            || !mapped(a.write_pointer_address, 8)
        {
            return Err(errno(libc::EINVAL));
        }
        let buffers = if self.config.kernel.validates_queue_buffers() {
            queue_buffers(
                &snap,
                a,
                sdma,
                &crate::topology::gpu_queue_areas(&gpu.shape),
            )?
        } else {
            Vec::new()
        };
        drop(snap);
        let mut queues = lock(&self.queues);
        if queues.count_on(gpu.index) >= MAX_QUEUES_PER_GPU {
            return Err(errno(libc::ENOSPC));
        }
        // KFD's device queue manager hands out the GPU's SDMA queues from a bitmap shared by
        // every process; with none left it says "No more SDMA queue to allocate": ENOMEM.
        if sdma && queues.sdma_count_on(gpu.index) >= self.config.sdma_queues as usize {
            return Err(errno(libc::ENOMEM));
        }
        let slot = self
            .doorbells
            .free_slot(gpu.index)
            .ok_or_else(|| errno(libc::ENOSPC))?;
        let queue_id = queues.free_id();
        let doorbell = self.doorbells.slot(gpu.index, slot)?;
        let shared = QueueShared::new(&gpu.hold, doorbell);
        let ring = RingDesc {
            queue_id,
            ring_base: a.ring_base_address,
            ring_bytes: u64::from(a.ring_size),
            rptr_addr: a.read_pointer_address,
        };
        let thread = if sdma {
            let engine = Sdma::new(Arc::clone(gpu), Arc::clone(&shared), ring);
            crate::start_engine_thread(
                format!("hcq-emu-sdma{}-q{queue_id}", gpu.index),
                SDMA_STACK_BYTES,
                Box::new(move || engine.run()),
            )
        } else {
            let cp = Cp::new(Arc::clone(gpu), Arc::clone(&shared), ring);
            crate::start_engine_thread(
                format!("hcq-emu-cp{}-q{queue_id}", gpu.index),
                CP_STACK_BYTES,
                Box::new(move || cp.run()),
            )
        }
        .map_err(|_| errno(libc::ENOMEM))?;
        self.doorbells.bind(gpu.index, slot, Arc::clone(&shared));
        queues.queues.insert(
            queue_id,
            crate::queue::Queue {
                gpu: gpu.index,
                slot,
                shared,
                thread: Some(thread),
                buffers,
                priority: a.queue_priority,
                sdma,
            },
        );
        a.queue_id = queue_id;
        a.doorbell_offset = MMAP_TYPE_DOORBELL
            | (u64::from(gpu.gpu_id) << MMAP_GPU_ID_SHIFT)
            | (u64::from(slot) * 8);
        Ok(())
    }

    fn destroy_queue(&self, queue_id: u32) -> io::Result<()> {
        let mut q = lock(&self.queues)
            .queues
            .remove(&queue_id)
            .ok_or_else(|| errno(libc::EINVAL))?;
        self.doorbells.unbind(q.gpu, q.slot);
        q.shared.stop();
        self.watch.notify();
        if let Some(t) = q.thread.take() {
            let _ = t.join();
        }
        Ok(())
    }

    fn clock_counters(&self, a: &mut GetClockCountersArgs) -> io::Result<()> {
        self.gpu_by_id(a.gpu_id)
            .ok_or_else(|| errno(libc::EINVAL))?;
        a.gpu_clock_counter = gpu_ticks();
        a.cpu_clock_counter = host_ns(libc::CLOCK_MONOTONIC_RAW);
        a.system_clock_counter = host_ns(libc::CLOCK_BOOTTIME);
        a.system_clock_freq = 1_000_000_000;
        Ok(())
    }

    /// # Safety
    /// As [`hcq_amd_sys::seam::Syscalls::mmap`].
    pub(crate) unsafe fn do_mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> io::Result<*mut c_void> {
        let len = page_round(len as u64)
            .filter(|&l| l > 0)
            .ok_or_else(|| errno(libc::EINVAL))?;
        let fixed = flags & MAP_FIXED != 0;
        let start = addr as usize as u64;
        if fixed {
            let end = start.checked_add(len).ok_or_else(|| errno(libc::EINVAL))?;
            if !start.is_multiple_of(PAGE) {
                return Err(errno(libc::EINVAL));
            }
            // A fixed mapping may replace a buffer's CPU view only through the render node.
            if !(FdTable::is_emulated(fd) && matches!(self.fds.get(fd), Some(Node::Render(_)))) {
                if self.space.overlaps(start, end) {
                    return Err(errno(libc::EINVAL));
                }
                self.doorbells.remove_overlapping(start, end);
            }
        }
        if fd == -1 || !FdTable::is_emulated(fd) {
            // SAFETY: an ordinary mapping, forwarded with the caller's guarantees; it does not
            // touch memory held for buffers (checked above for MAP_FIXED).
            return unsafe { host_mmap(addr, len, prot, flags, fd, offset) };
        }
        match self.fds.get(fd) {
            None => Err(errno(libc::EBADF)),
            Some(Node::Kfd) => {
                if offset & MMAP_TYPE_MASK != MMAP_TYPE_DOORBELL {
                    return Err(errno(libc::EINVAL));
                }
                let gpu_id = ((offset >> MMAP_GPU_ID_SHIFT) & MMAP_GPU_ID_MASK) as u32;
                let gpu = self.gpu_by_id(gpu_id).ok_or_else(|| errno(libc::EINVAL))?;
                let rest = offset & !(MMAP_TYPE_MASK | (MMAP_GPU_ID_MASK << MMAP_GPU_ID_SHIFT));
                if rest != 0 || len > DOORBELL_REGION_BYTES {
                    return Err(errno(libc::EINVAL));
                }
                // Every mapping is the same pages, read-write and shared whatever the caller
                // asked for, as a mapping of the doorbell BAR is.
                // SAFETY: with MAP_FIXED the caller owns the range (the seam's contract), and
                // it holds no buffer memory (checked above).
                let p = unsafe { self.doorbells.map(gpu.index, fixed.then_some(start), len) }?;
                Ok(p as usize as *mut c_void)
            }
            Some(Node::Render(g)) => {
                let bos = lock(&self.bos);
                let bo = bos.by_offset(offset).ok_or_else(|| errno(libc::EINVAL))?;
                let rel = offset - bo.mmap_offset;
                if bo.gpu != g
                    || !rel.is_multiple_of(PAGE)
                    || rel.checked_add(len).is_none_or(|e| e > bo.size)
                {
                    return Err(errno(libc::EINVAL));
                }
                let target = bo.va + rel;
                if !fixed || start == target {
                    self.space.remapped(target, target + len);
                    return Ok(target as usize as *mut c_void);
                }
                // Elsewhere: a second mapping of the buffer's pages, which stay where they are
                // (the GPU and the BO's own view keep using them). The alias is the process's
                // own mapping: it is not held, so its `munmap` unmaps it at once.
                if self.space.overlaps(start, start + len) {
                    return Err(errno(libc::EINVAL));
                }
                self.doorbells.remove_overlapping(start, start + len);
                // SAFETY: the BO's view `[target, target + len)` is a shared mapping (VRAM and
                // GTT BOs are backed by `AddressSpace::back`; USERPTR BOs have no mmap offset)
                // that stays mapped while the BO lives, and the BO table's lock is held. The
                // caller owns the fixed range, which holds no buffer memory (checked above).
                let p = unsafe { crate::memory::alias_shared(target, len, Some(start)) }?;
                Ok(p as usize as *mut c_void)
            }
        }
    }

    pub(crate) fn do_munmap(&self, addr: u64, len: u64) -> io::Result<()> {
        let len = page_round(len)
            .filter(|&l| l > 0)
            .ok_or_else(|| errno(libc::EINVAL))?;
        let end = addr.checked_add(len).ok_or_else(|| errno(libc::EINVAL))?;
        if !addr.is_multiple_of(PAGE) {
            return Err(errno(libc::EINVAL));
        }
        self.doorbells.remove_overlapping(addr, end);
        self.space.munmap(addr, end)
    }
}

/// `mmap(2)`.
///
/// # Safety
/// As `mmap(2)`: with `MAP_FIXED`, the caller must own the replaced range.
unsafe fn host_mmap(
    addr: *mut c_void,
    len: u64,
    prot: i32,
    flags: i32,
    fd: Fd,
    offset: u64,
) -> io::Result<*mut c_void> {
    let offset = libc::off_t::try_from(offset).map_err(|_| errno(libc::EINVAL))?;
    // SAFETY: the caller's guarantees.
    let p = unsafe { libc::mmap(addr, len as usize, prot, flags, fd, offset) };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcq_amd_sys::ioctl::with_size;

    /// Linux refuses no size mismatch (`kfd_ioctl` copies the caller's `_IOC_SIZE` bytes into
    /// a buffer as large as the larger struct, zeroed past them, and copies as many back):
    /// the size field of the request is compared with the typed constant's struct only to
    /// move the right bytes.
    #[test]
    fn a_size_other_than_the_structs_is_reconciled_as_kfd_does_not_refused() {
        // ACQUIRE_VM (_IOW, 8 bytes) from a 4-byte struct: the handler sees the caller's
        // `drm_fd` and a zero `gpu_id`, and nothing is written back.
        let mut bytes = [0xa5u8; 16];
        bytes[..4].copy_from_slice(&7u32.to_le_bytes());
        let mut seen = None;
        // SAFETY: `bytes` holds more than the 4 bytes the request encodes.
        unsafe {
            with_args(
                IOC_ACQUIRE_VM,
                bytes.as_mut_ptr().cast(),
                with_size(IOC_ACQUIRE_VM.request(), 4),
                |a| {
                    seen = Some((a.drm_fd, a.gpu_id));
                    a.gpu_id = 99;
                    Ok(())
                },
            )
        }
        .unwrap();
        assert_eq!(seen, Some((7, 0)));
        assert_eq!(&bytes[4..], &[0xa5; 12]);

        // AVAILABLE_MEMORY (_IOWR, 16 bytes) from a 24-byte struct: the answer comes back in
        // the first 16 bytes, the caller's tail is returned as written, nothing past it is
        // touched, and a failing handler's struct is copied back too.
        let mut bytes = [0xa5u8; 32];
        bytes[8..12].copy_from_slice(&3u32.to_le_bytes());
        // SAFETY: `bytes` holds more than the 24 bytes the request encodes.
        let result = unsafe {
            with_args(
                IOC_AVAILABLE_MEMORY,
                bytes.as_mut_ptr().cast(),
                with_size(IOC_AVAILABLE_MEMORY.request(), 24),
                |a| {
                    assert_eq!(a.gpu_id, 3);
                    a.available = 0x1122_3344_5566_7788;
                    Err(errno(libc::EINVAL))
                },
            )
        };
        assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::EINVAL));
        assert_eq!(&bytes[..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&bytes[16..], &[0xa5; 16]);
    }

    /// Every declared request reaches a handler, found by its number; any other number is
    /// `EINVAL`, as `kfd_ioctl` answers a number it does not define.
    #[test]
    fn declared_numbers_decode_to_their_requests_and_others_are_einval() {
        for k in KfdIoctl::ALL {
            assert_eq!(known_request(k.request()).unwrap(), k);
        }
        for nr in [0x00, 0x04, 0x7e, 0xff] {
            let e = known_request(0xc008_4b00 | nr).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "number {nr:#x}");
        }
    }
}
