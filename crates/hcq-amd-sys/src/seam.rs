//! The kernel seam: the one narrow boundary between the AMD driver and the operating system.
//!
//! Everything the driver asks of the kernel goes through [`Syscalls`]: opening device nodes,
//! ioctls on `/dev/kfd`, mapping memory, reading the KFD topology in sysfs, and writing
//! doorbells. [`HostKernel`] forwards to the real system calls; the emulated GPU (crate
//! `hcq-emu`) is a second implementation that plays the kernel's part. Above this trait the
//! driver is the same code for a real GPU and an emulated one.

use std::ffi::{c_void, CString};
use std::io;

pub use hcq_core::{FaultKind, FaultReport};

/// A file descriptor as the kernel hands it out.
pub type Fd = i32;

/// `mmap` protection: no access at all, for address-space reservations that buffer objects are
/// later mapped over.
pub const PROT_NONE: i32 = libc::PROT_NONE;
/// `mmap` protection: the pages can be read.
pub const PROT_READ: i32 = libc::PROT_READ;
/// `mmap` protection: the pages can be written.
pub const PROT_WRITE: i32 = libc::PROT_WRITE;
/// `mmap` flag: stores reach the mapped object, so the GPU sees them (buffer objects, doorbells,
/// host memory shared with the GPU).
pub const MAP_SHARED: i32 = libc::MAP_SHARED;
/// `mmap` flag: a private copy-on-write mapping (the driver's reservations).
pub const MAP_PRIVATE: i32 = libc::MAP_PRIVATE;
/// `mmap` flag: memory backed by no file (`fd` -1, offset 0).
pub const MAP_ANONYMOUS: i32 = libc::MAP_ANONYMOUS;
/// `mmap` flag: map exactly at `addr`, replacing whatever was mapped there (a buffer object placed
/// into a reservation).
pub const MAP_FIXED: i32 = libc::MAP_FIXED;
/// `mmap` flag: reserve no swap for the mapping (large reservations that are never touched).
pub const MAP_NORESERVE: i32 = libc::MAP_NORESERVE;
/// errno: memory ran out (the host's, the GPU's, or address space); the driver turns it into an
/// out-of-memory error.
pub const ENOMEM: i32 = libc::ENOMEM;
/// errno: a signal interrupted the call, which took no effect; the driver reissues it (see
/// [`Syscalls`]).
pub const EINTR: i32 = libc::EINTR;
/// errno: from `ioctl`, the kernel asks for the call again and the driver reissues it like
/// [`EINTR`]; from `mmap`, a resource limit.
pub const EAGAIN: i32 = libc::EAGAIN;
/// errno: a pointer passed in, or one inside an ioctl argument, does not reach accessible memory.
pub const EFAULT: i32 = libc::EFAULT;
/// errno: the device failed the operation.
pub const EIO: i32 = libc::EIO;
/// errno: the object is in use (KFD: freeing a buffer still mapped to a GPU, a second `ACQUIRE_VM`
/// with another DRM file, `RUNTIME_ENABLE` twice).
pub const EBUSY: i32 = libc::EBUSY;
/// errno: KFD or DRM rejected the request or one of its arguments (an unknown request, a bad
/// handle, queue buffers of the wrong size).
pub const EINVAL: i32 = libc::EINVAL;

/// Where KFD publishes its topology.
pub const TOPOLOGY_NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

/// The system calls the driver makes: what it needs from the operating-system kernel (named
/// for the calls, so that it reads apart from the GPU kernels the driver launches).
/// Implementations must be usable from any thread.
///
/// **Interrupted calls.** An implementation may fail `open`, `ioctl`, `mmap` or `munmap` with
/// `EINTR` (a signal arrived first), and `ioctl` also with `EAGAIN` (the kernel asks for the
/// call again, as KFD does when a user pointer's pages change under it). Such a failure means
/// the call took no effect, or recorded its progress in its argument (`n_success` of
/// `MAP_MEMORY_TO_GPU`), so issuing the same call again is always correct. Implementations do
/// not retry by themselves; the driver reissues such calls a bounded number of times
/// (`hcq_amd::kfd::TRANSIENT_RETRIES`) before reporting the error. `EAGAIN` from `mmap` is a
/// resource limit, not an interruption.
pub trait Syscalls: Send + Sync + 'static {
    /// Opens a device node (`/dev/kfd`, `/dev/dri/renderD<minor>`) read-write.
    fn open(&self, path: &str) -> io::Result<Fd>;

    /// Closes a descriptor returned by [`Syscalls::open`].
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

    /// The kernel's account of the oldest fault it saw on `gpu_id` not yet taken, if it keeps
    /// one: its kind, address, PC and instruction as data, and the account in words. KFD's
    /// exception events carry only an address and a cause; the real kernel writes the rest to
    /// its log, which is not read here, so [`HostKernel`] returns `None`.
    fn take_fault_report(&self, gpu_id: u32) -> Option<FaultReport> {
        let _ = gpu_id;
        None
    }

    /// The emulator's own controls when this kernel is an emulated one, for benchmarks and
    /// tests; `None` for the real kernel. The driver never uses them.
    fn emulator(&self) -> Option<&dyn EmulatorControl> {
        None
    }
}

/// Totals of the dispatches an emulated GPU has completed ([`EmulatorControl::shader_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShaderCounts {
    /// `DISPATCH_DIRECT` packets that ran to completion. One that faulted is not counted, nor
    /// are its waves and instructions; nor is one with nothing to run (an empty grid).
    pub dispatches: u64,
    /// Waves those dispatches ran (wave32: a workgroup of `n` work-items is `n / 32` waves,
    /// rounded up).
    pub waves: u64,
    /// Instructions executed, counted once per wave (not per lane), summed over all waves.
    pub instructions: u64,
}

/// What an emulated kernel offers beyond system calls ([`Syscalls::emulator`]): the capability
/// a benchmark asks a device's kernel for, instead of guessing from the device's name.
pub trait EmulatorControl: Send + Sync {
    /// What GPU `gpu_id` has executed so far; `None` when there is no such GPU.
    fn shader_counts(&self, gpu_id: u32) -> Option<ShaderCounts>;
    /// Holds (`true`) or releases GPU `gpu_id`'s engines: while held they take no new
    /// commands, so the host's side of a submission can be timed without the emulator taking
    /// the cores. Work waited for on a held GPU times out. `false` when there is no such GPU.
    fn hold_engines(&self, gpu_id: u32, held: bool) -> bool;
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

impl Syscalls for HostKernel {
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
        // EINTR and EAGAIN go back to the driver, which reissues the call (see [`Syscalls`]):
        // retrying here without bound could spin forever on a persistent EAGAIN.
        // SAFETY: the caller guarantees `arg` matches `request`.
        check(unsafe { libc::ioctl(fd, request as _, arg) }).map(|_| ())
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

/// Implements [`Syscalls`] for handles to a kernel (`$handle<K>`, derefs to `K`) by forwarding
/// every call, so that the two impls below cannot drift apart.
macro_rules! forward_through_handle {
    ($($(#[$doc:meta])* $handle:ty;)*) => {$(
        $(#[$doc])*
        impl<K: Syscalls + ?Sized> Syscalls for $handle {
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
    fn take_fault_report(&self, gpu_id: u32) -> Option<FaultReport> {
        (**self).take_fault_report(gpu_id)
    }
    fn emulator(&self) -> Option<&dyn EmulatorControl> {
        (**self).emulator()
    }
}
    )*};
}

forward_through_handle! {
    /// A `'static` reference to a kernel is a kernel: process-global kernels (the emulator's)
    /// can be shared without reference counting.
    &'static K;
    /// A shared kernel is a kernel, so a test can keep a handle on a wrapper (a
    /// [`FaultInjector`]) that the driver also holds.
    std::sync::Arc<K>;
}

/// A seam call that [`FaultInjector`] can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeamCall {
    /// An `open` of a device node.
    Open,
    /// An ioctl with its request number.
    Ioctl(u64),
    /// An `mmap`.
    Mmap,
    /// An `munmap`.
    Munmap,
}

/// Which calls a [`Fault`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFilter {
    /// Every `open`, `ioctl`, `mmap` and `munmap`.
    Any,
    /// Every `open`.
    Open,
    /// Every ioctl (`None`) or only those with this request number.
    Ioctl(Option<u64>),
    /// Every `mmap`.
    Mmap,
    /// Every `munmap`.
    Munmap,
}

impl CallFilter {
    fn matches(self, call: SeamCall) -> bool {
        match (self, call) {
            (CallFilter::Any, _)
            | (CallFilter::Open, SeamCall::Open)
            | (CallFilter::Ioctl(None), SeamCall::Ioctl(_))
            | (CallFilter::Mmap, SeamCall::Mmap)
            | (CallFilter::Munmap, SeamCall::Munmap) => true,
            (CallFilter::Ioctl(Some(want)), SeamCall::Ioctl(request)) => want == request,
            _ => false,
        }
    }
}

/// One injected failure: the call numbered `nth` (from 0) among those `calls` selects, counted
/// from when the fault is armed, fails with `errno` without reaching the wrapped kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Which calls count toward `nth`.
    pub calls: CallFilter,
    /// Index, from 0, of the call to fail among those `calls` selects, counted from
    /// [`FaultInjector::arm`].
    pub nth: u64,
    /// The errno the selected call fails with (e.g. [`EINTR`], [`ENOMEM`]).
    pub errno: i32,
}

#[derive(Debug, Default)]
struct InjectorState {
    fault: Option<Fault>,
    /// Calls the armed filter matched so far.
    matched: u64,
    /// The call that was failed, once it has been.
    injected: Option<SeamCall>,
    /// Every faultable call since the last [`FaultInjector::take_log`], when recording.
    log: Option<Vec<SeamCall>>,
}

/// A kernel that forwards to `K` but fails one chosen call with a chosen errno, to test the
/// driver's error paths: every `open`, `ioctl`, `mmap` and `munmap` is counted, and the one a
/// [`Fault`] selects fails instead of reaching `K` (so it has no effect, as a failed system
/// call). `close`, sysfs reads, doorbells and fault reports are forwarded untouched. It can
/// also record the calls of a run ([`FaultInjector::record`]), so that a test can first list a
/// workload's calls and then fail each in turn.
#[derive(Debug, Default)]
pub struct FaultInjector<K> {
    inner: K,
    state: std::sync::Mutex<InjectorState>,
}

impl<K: Syscalls> FaultInjector<K> {
    /// A wrapper that injects nothing until [`FaultInjector::arm`]ed.
    pub fn new(inner: K) -> Self {
        FaultInjector {
            inner,
            state: Default::default(),
        }
    }

    /// The wrapped kernel.
    pub fn inner(&self) -> &K {
        &self.inner
    }

    fn state(&self) -> std::sync::MutexGuard<'_, InjectorState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fails the call `fault` selects, counting from now; replaces any armed fault.
    pub fn arm(&self, fault: Fault) {
        let mut st = self.state();
        st.fault = Some(fault);
        st.matched = 0;
        st.injected = None;
    }

    /// Injects nothing more.
    pub fn disarm(&self) {
        self.state().fault = None;
    }

    /// The call that the armed fault failed, if it has been reached.
    pub fn injected(&self) -> Option<SeamCall> {
        self.state().injected
    }

    /// Starts (`true`) or stops recording the faultable calls.
    pub fn record(&self, on: bool) {
        self.state().log = on.then(Vec::new);
    }

    /// The calls recorded since recording started or since the last take.
    pub fn take_log(&self) -> Vec<SeamCall> {
        self.state()
            .log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Counts `call`; the error to fail it with if it is the one the armed fault selects.
    fn intercept(&self, call: SeamCall) -> io::Result<()> {
        let mut st = self.state();
        if let Some(log) = st.log.as_mut() {
            log.push(call);
        }
        let Some(fault) = st.fault else {
            return Ok(());
        };
        if !fault.calls.matches(call) {
            return Ok(());
        }
        let index = st.matched;
        st.matched += 1;
        if index == fault.nth {
            st.injected = Some(call);
            return Err(io::Error::from_raw_os_error(fault.errno));
        }
        Ok(())
    }
}

impl<K: Syscalls> Syscalls for FaultInjector<K> {
    fn open(&self, path: &str) -> io::Result<Fd> {
        self.intercept(SeamCall::Open)?;
        self.inner.open(path)
    }
    fn close(&self, fd: Fd) {
        self.inner.close(fd)
    }
    unsafe fn ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> io::Result<()> {
        self.intercept(SeamCall::Ioctl(request))?;
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.ioctl(fd, request, arg) }
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
        self.intercept(SeamCall::Mmap)?;
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.mmap(addr, len, prot, flags, fd, offset) }
    }
    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> io::Result<()> {
        self.intercept(SeamCall::Munmap)?;
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.munmap(addr, len) }
    }
    fn read_to_string(&self, path: &str) -> io::Result<String> {
        self.inner.read_to_string(path)
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        self.inner.read_dir(path)
    }
    unsafe fn write_doorbell(&self, doorbell: *mut u64, value: u64) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.write_doorbell(doorbell, value) }
    }
    fn take_fault_report(&self, gpu_id: u32) -> Option<FaultReport> {
        self.inner.take_fault_report(gpu_id)
    }
    fn emulator(&self) -> Option<&dyn EmulatorControl> {
        self.inner.emulator()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A kernel that succeeds at everything and records what reached it.
    #[derive(Default)]
    struct Recorder {
        reached: Mutex<Vec<SeamCall>>,
    }

    impl Recorder {
        fn reached(&self) -> Vec<SeamCall> {
            self.reached.lock().unwrap().clone()
        }
        fn push(&self, call: SeamCall) {
            self.reached.lock().unwrap().push(call);
        }
    }

    impl Syscalls for Recorder {
        fn open(&self, _path: &str) -> io::Result<Fd> {
            self.push(SeamCall::Open);
            Ok(3)
        }
        fn close(&self, _fd: Fd) {}
        unsafe fn ioctl(&self, _fd: Fd, request: u64, _arg: *mut c_void) -> io::Result<()> {
            self.push(SeamCall::Ioctl(request));
            Ok(())
        }
        unsafe fn mmap(
            &self,
            _addr: *mut c_void,
            _len: usize,
            _prot: i32,
            _flags: i32,
            _fd: Fd,
            _offset: u64,
        ) -> io::Result<*mut c_void> {
            self.push(SeamCall::Mmap);
            Ok(0x1000 as *mut c_void)
        }
        unsafe fn munmap(&self, _addr: *mut c_void, _len: usize) -> io::Result<()> {
            self.push(SeamCall::Munmap);
            Ok(())
        }
        fn read_to_string(&self, _path: &str) -> io::Result<String> {
            Ok(String::new())
        }
        fn read_dir(&self, _path: &str) -> io::Result<Vec<String>> {
            Ok(Vec::new())
        }
        unsafe fn write_doorbell(&self, _doorbell: *mut u64, _value: u64) {}
    }

    /// Issues one of each call, then the ioctls `a`, `b`, `a`; returns each call's errno (0
    /// for success).
    fn calls(k: &impl Syscalls) -> Vec<i32> {
        let e = |r: io::Result<()>| r.err().map_or(0, |e| e.raw_os_error().unwrap_or(-1));
        let null = std::ptr::null_mut();
        // SAFETY: the kernels under test touch no memory.
        unsafe {
            vec![
                e(k.open("/dev/kfd").map(drop)),
                e(k.mmap(null, 4096, PROT_NONE, MAP_PRIVATE, -1, 0).map(drop)),
                e(k.munmap(null, 4096)),
                e(k.ioctl(3, 0xa, null)),
                e(k.ioctl(3, 0xb, null)),
                e(k.ioctl(3, 0xa, null)),
            ]
        }
    }

    #[test]
    fn the_nth_selected_call_fails_without_reaching_the_kernel() {
        let k = FaultInjector::new(Recorder::default());
        let all = vec![
            SeamCall::Open,
            SeamCall::Mmap,
            SeamCall::Munmap,
            SeamCall::Ioctl(0xa),
            SeamCall::Ioctl(0xb),
            SeamCall::Ioctl(0xa),
        ];
        // Unarmed: everything passes, and recording lists the calls.
        k.record(true);
        assert_eq!(calls(&k), [0; 6]);
        assert_eq!(k.take_log(), all);
        assert_eq!(k.inner().reached(), all);
        let cases = [
            (CallFilter::Any, 2, EIO, 2),
            (CallFilter::Any, 5, ENOMEM, 5),
            (CallFilter::Open, 0, EINTR, 0),
            (CallFilter::Mmap, 0, EAGAIN, 1),
            (CallFilter::Munmap, 0, EINVAL, 2),
            (CallFilter::Ioctl(None), 1, EBUSY, 4),
            (CallFilter::Ioctl(Some(0xa)), 1, EFAULT, 5),
        ];
        for (filter, nth, errno, failed) in cases {
            let k = FaultInjector::new(Recorder::default());
            k.arm(Fault {
                calls: filter,
                nth,
                errno,
            });
            let mut want = vec![0; 6];
            want[failed] = errno;
            assert_eq!(calls(&k), want, "{filter:?} {nth}");
            assert_eq!(k.injected(), Some(all[failed]));
            let mut reached = all.clone();
            reached.remove(failed);
            assert_eq!(k.inner().reached(), reached, "{filter:?} {nth}");
            // One fault per arming: the same calls again all pass.
            assert_eq!(calls(&k), [0; 6]);
        }
        // Past the last selected call, or disarmed: nothing fails.
        let k = FaultInjector::new(Recorder::default());
        k.arm(Fault {
            calls: CallFilter::Ioctl(Some(0xb)),
            nth: 1,
            errno: EIO,
        });
        assert_eq!(calls(&k), [0; 6]);
        assert_eq!(k.injected(), None);
        k.arm(Fault {
            calls: CallFilter::Any,
            nth: 0,
            errno: EIO,
        });
        k.disarm();
        assert_eq!(calls(&k), [0; 6]);
    }
}
