//! The kernel seam: the one narrow boundary between the AMD driver and the operating system.
//!
//! Everything the driver asks of the kernel goes through [`Kernel`]: opening device nodes,
//! ioctls on `/dev/kfd`, mapping memory, reading the KFD topology in sysfs, and writing
//! doorbells. [`HostKernel`] forwards to the real system calls; the emulated GPU (crate
//! `hcq-emu`) is a second implementation that plays the kernel's part. Above this trait the
//! driver is the same code for a real GPU and an emulated one.

use std::ffi::{c_void, CString};
use std::io;

/// A file descriptor as the kernel hands it out.
pub type Fd = i32;

pub const PROT_NONE: i32 = libc::PROT_NONE;
pub const PROT_READ: i32 = libc::PROT_READ;
pub const PROT_WRITE: i32 = libc::PROT_WRITE;
pub const MAP_SHARED: i32 = libc::MAP_SHARED;
pub const MAP_PRIVATE: i32 = libc::MAP_PRIVATE;
pub const MAP_ANONYMOUS: i32 = libc::MAP_ANONYMOUS;
pub const MAP_FIXED: i32 = libc::MAP_FIXED;
pub const MAP_NORESERVE: i32 = libc::MAP_NORESERVE;
pub const ENOMEM: i32 = libc::ENOMEM;

/// Where KFD publishes its topology.
pub const TOPOLOGY_NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

/// What the driver needs from the kernel. Implementations must be usable from any thread.
pub trait Kernel: Send + Sync + 'static {
    /// Opens a device node (`/dev/kfd`, `/dev/dri/renderD<minor>`) read-write.
    fn open(&self, path: &str) -> io::Result<Fd>;

    /// Closes a descriptor returned by [`Kernel::open`].
    fn close(&self, fd: Fd);

    /// Issues `request` on `fd`. The request encodes the argument size, as `_IOWR` does.
    /// Errors are errnos; an `ENOMEM` may instead come as an error of kind
    /// [`io::ErrorKind::OutOfMemory`] whose message says why (the emulated kernel does so when
    /// the host's memory is what is short).
    ///
    /// # Safety
    /// `arg` must point to a live, writable struct of exactly the size encoded in `request`,
    /// and any pointers inside it must be valid for what the request reads or writes.
    unsafe fn ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> io::Result<()>;

    /// `mmap(2)`: anonymous reservations (`fd == -1`), buffer objects (render node, at the
    /// offset `alloc_memory_of_gpu` returned) and doorbells (`/dev/kfd`).
    ///
    /// # Safety
    /// With `MAP_FIXED`, whatever was mapped at `addr..addr+len` is replaced; the caller must
    /// own that range.
    unsafe fn mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> io::Result<*mut c_void>;

    /// `munmap(2)`.
    ///
    /// # Safety
    /// Nothing may use the range afterwards.
    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> io::Result<()>;

    /// Reads a whole text file (sysfs).
    fn read_to_string(&self, path: &str) -> io::Result<String>;

    /// Names of the entries of a directory (sysfs), in no particular order.
    fn read_dir(&self, path: &str) -> io::Result<Vec<String>>;

    /// Rings a queue's doorbell: a 64-bit store into the doorbell page mapped from `/dev/kfd`.
    ///
    /// # Safety
    /// `doorbell` must point into a doorbell page this kernel mapped.
    unsafe fn write_doorbell(&self, doorbell: *mut u64, value: u64);

    /// A human-readable account of the last fault the kernel saw on `gpu_id`, if it keeps one.
    /// KFD's exception events carry only an address and a cause; the real kernel writes the
    /// rest to its log, which is not read here, so [`HostKernel`] returns `None`.
    fn take_fault_report(&self, gpu_id: u32) -> Option<String> {
        let _ = gpu_id;
        None
    }
}

/// The real kernel, through libc.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostKernel;

fn check(ret: i32) -> io::Result<i32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

impl Kernel for HostKernel {
    fn open(&self, path: &str) -> io::Result<Fd> {
        let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
        check(unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })
    }

    fn close(&self, fd: Fd) {
        // SAFETY: closing a descriptor has no memory-safety requirements.
        unsafe { libc::close(fd) };
    }

    unsafe fn ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> io::Result<()> {
        loop {
            // SAFETY: the caller guarantees `arg` matches `request`.
            let ret = unsafe { libc::ioctl(fd, request as _, arg) };
            match check(ret) {
                Ok(_) => return Ok(()),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) => {}
                Err(e) => return Err(e),
            }
        }
    }

    unsafe fn mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> io::Result<*mut c_void> {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { libc::mmap(addr, len, prot, flags, fd, offset as libc::off_t) };
        if p == libc::MAP_FAILED {
            Err(io::Error::last_os_error())
        } else {
            Ok(p)
        }
    }

    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> io::Result<()> {
        // SAFETY: forwarded with the caller's guarantees.
        check(unsafe { libc::munmap(addr, len) }).map(|_| ())
    }

    fn read_to_string(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }

    unsafe fn write_doorbell(&self, doorbell: *mut u64, value: u64) {
        // SAFETY: the caller guarantees `doorbell` is a mapped doorbell slot; the store must
        // not be elided or merged, so it is volatile.
        unsafe { doorbell.write_volatile(value) };
    }
}

/// A `'static` reference to a kernel is a kernel: process-global kernels (the emulator's) can be
/// shared without reference counting.
impl<K: Kernel + ?Sized> Kernel for &'static K {
    fn open(&self, path: &str) -> io::Result<Fd> {
        (**self).open(path)
    }
    fn close(&self, fd: Fd) {
        (**self).close(fd)
    }
    unsafe fn ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> io::Result<()> {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { (**self).ioctl(fd, request, arg) }
    }
    unsafe fn mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> io::Result<*mut c_void> {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { (**self).mmap(addr, len, prot, flags, fd, offset) }
    }
    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> io::Result<()> {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { (**self).munmap(addr, len) }
    }
    fn read_to_string(&self, path: &str) -> io::Result<String> {
        (**self).read_to_string(path)
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        (**self).read_dir(path)
    }
    unsafe fn write_doorbell(&self, doorbell: *mut u64, value: u64) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { (**self).write_doorbell(doorbell, value) }
    }
    fn take_fault_report(&self, gpu_id: u32) -> Option<String> {
        (**self).take_fault_report(gpu_id)
    }
}
