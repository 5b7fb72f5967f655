//! The `SIGSYS` and `SIGTRAP` handlers: every system call a program thread makes arrives here,
//! with the registers of the call.
//!
//! A call is either
//! - *emulated*: it concerns an emulated device (an `open` of `/dev/kfd`, an `ioctl`, `mmap` or
//!   `close` of such a descriptor, an `munmap` of memory the emulator holds), or a path of the
//!   generated tree (re-issued here with the tree's path); the result goes back in `rax`;
//! - *issued here*: any other call, made by the handler with the program's arguments;
//! - *re-issued in place*: calls that must run in the program's own context (thread and
//!   process creation, `execve`), which go back to the program through a trampoline of the
//!   gate ([`gate::trampoline`]) that makes the call with the program's registers and jumps
//!   back to the instruction after its `syscall`;
//! - a program's `rt_sigreturn`, re-issued from the gate;
//! - calls about `SIGSYS`, which this library needs: the program's handler for it is kept
//!   aside and its blocking is refused, since a blocked `SIGSYS` would kill the process at its
//!   next call.
//!
//! The handler may run while the program holds locks of its own or of libc (a `mmap` from
//! inside `malloc`): on the paths of calls that are only issued here it takes no lock the
//! program could hold and allocates nothing.

use std::ffi::c_void;

use hcq_amd_sys::seam::Syscalls;

use crate::files;
use crate::gate::{self, Handler, KernelSigaction, ALLOW, BLOCK};
use crate::sys::{errno_of, raw};
use hcq_amd_sys::kfd::{KfdIoctl, IOC_ACQUIRE_VM};

const REG_RDI: usize = libc::REG_RDI as usize;
const REG_RSI: usize = libc::REG_RSI as usize;
const REG_RDX: usize = libc::REG_RDX as usize;
const REG_R10: usize = libc::REG_R10 as usize;
const REG_R8: usize = libc::REG_R8 as usize;
const REG_R9: usize = libc::REG_R9 as usize;
const REG_RAX: usize = libc::REG_RAX as usize;
const REG_RIP: usize = libc::REG_RIP as usize;

/// `si_code` of a `SIGSYS` raised by Syscall User Dispatch.
const SYS_USER_DISPATCH: i32 = 2;
const PR_SET_SYSCALL_USER_DISPATCH: usize = 59;
const F_DUPFD: usize = 0;
const F_DUPFD_CLOEXEC: usize = 1030;
const CLOSE_RANGE_CLOEXEC: usize = 4;
/// Longest path read from the program (PATH_MAX).
const PATH_MAX: usize = 4096;

/// What becomes of an intercepted call.
enum Outcome {
    /// Done: this value goes back to the program in `rax`.
    Return(isize),
    /// Run by the kernel at the program's own `syscall` instruction.
    InPlace,
    /// The program's `rt_sigreturn`.
    Sigreturn,
}

/// Handlers the program installed for the signals this library keeps for itself.
static PROGRAM_HANDLERS: std::sync::Mutex<[KernelSigaction; 1]> = std::sync::Mutex::new(
    [KernelSigaction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    }; 1],
);

fn program_slot(signal: i32) -> Option<usize> {
    match signal {
        libc::SIGSYS => Some(0),
        _ => None,
    }
}

fn bit(signal: i32) -> u64 {
    1u64 << (signal - 1)
}

/// Registers of the intercepted call.
struct Call<'a> {
    gregs: &'a mut [libc::greg_t; 23],
    sigmask: &'a mut libc::sigset_t,
}

impl Call<'_> {
    fn nr(&self) -> libc::c_long {
        self.gregs[REG_RAX] as libc::c_long
    }
    fn args(&self) -> [usize; 6] {
        [REG_RDI, REG_RSI, REG_RDX, REG_R10, REG_R8, REG_R9].map(|r| self.gregs[r] as usize)
    }
}

pub extern "C" fn on_sigsys(signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let selector = gate::selector();
    gate::set_selector(ALLOW);
    // SAFETY: errno is this thread's; the handler's own calls must not change the program's.
    let saved_errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    let (info, uc) = unsafe { (&*info, &mut *(ctx as *mut libc::ucontext_t)) };
    if info.si_code != SYS_USER_DISPATCH {
        // A SIGSYS of the program's own (seccomp, a kill): its handler's business.
        chain(signal, info as *const _ as *mut _, ctx);
        gate::set_selector(selector);
    } else {
        let mut call = Call {
            gregs: &mut uc.uc_mcontext.gregs,
            sigmask: &mut uc.uc_sigmask,
        };
        let nr = call.nr();
        match dispatch(&mut call) {
            Outcome::Return(value) => {
                call.gregs[REG_RAX] = value as libc::greg_t;
                gate::set_selector(BLOCK);
            }
            Outcome::InPlace => match gate::trampoline(call.gregs[REG_RIP] as usize) {
                Some(trampoline) => {
                    call.gregs[REG_RIP] = trampoline as libc::greg_t;
                    call.gregs[REG_RAX] = nr as libc::greg_t;
                    gate::set_selector(BLOCK);
                }
                None => {
                    crate::report("hcq exec: too many call sites creating threads or processes");
                    call.gregs[REG_RAX] = -(libc::EAGAIN as isize) as libc::greg_t;
                    gate::set_selector(BLOCK);
                }
            },
            Outcome::Sigreturn => {
                call.gregs[REG_RIP] = gate::sigreturn_address() as libc::greg_t;
                call.gregs[REG_RAX] = libc::SYS_rt_sigreturn as libc::greg_t;
                gate::set_selector(BLOCK);
            }
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved_errno };
}

/// Hands a signal this library does not own to the program's handler for it (called with
/// the selector at `ALLOW`; the program's handler runs intercepted, as it would have).
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let Some(slot) = program_slot(signal) else {
        return;
    };
    let act = PROGRAM_HANDLERS.lock().unwrap_or_else(|e| e.into_inner())[slot];
    match act.handler {
        h if h == libc::SIG_IGN => {}
        h if h == libc::SIG_DFL => {
            // The default action (a core dump): put it back and raise the signal again.
            let default = KernelSigaction::default();
            // SAFETY: installs the default disposition, then sends the signal to this thread.
            unsafe {
                raw(
                    libc::SYS_rt_sigaction,
                    [signal as usize, &default as *const _ as usize, 0, 8, 0, 0],
                );
                let tid = raw(libc::SYS_gettid, [0; 6]);
                let pid = raw(libc::SYS_getpid, [0; 6]);
                raw(
                    libc::SYS_tgkill,
                    [pid as usize, tid as usize, signal as usize, 0, 0, 0],
                );
            }
        }
        h => {
            // The program's handler runs intercepted, as the rest of the program.
            if gate::intercepted_thread() {
                gate::set_selector(BLOCK);
            }
            if act.flags & libc::SA_SIGINFO as u64 != 0 {
                // SAFETY: the program registered this address as its SA_SIGINFO handler.
                let f: Handler = unsafe { std::mem::transmute::<usize, Handler>(h) };
                f(signal, info, ctx);
            } else {
                // SAFETY: the program registered this address as its plain handler.
                let f: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute::<usize, extern "C" fn(libc::c_int)>(h) };
                f(signal);
            }
        }
    }
}

fn dispatch(call: &mut Call) -> Outcome {
    let a = call.args();
    let nr = call.nr();
    match nr {
        libc::SYS_open => open(libc::AT_FDCWD as usize, a[0], a[1], a[2], call),
        libc::SYS_openat => open(a[0], a[1], a[2], a[3], call),
        libc::SYS_stat
        | libc::SYS_lstat
        | libc::SYS_access
        | libc::SYS_readlink
        | libc::SYS_chdir
        | libc::SYS_statfs
        | libc::SYS_getxattr
        | libc::SYS_lgetxattr
        | libc::SYS_listxattr
        | libc::SYS_llistxattr => with_path(nr, a, 0),
        libc::SYS_newfstatat
        | libc::SYS_statx
        | libc::SYS_faccessat
        | libc::SYS_faccessat2
        | libc::SYS_readlinkat
        | libc::SYS_openat2
        | libc::SYS_inotify_add_watch => with_path(nr, a, 1),
        libc::SYS_ioctl => match files::lookup(a[0] as i32) {
            Some(fd) => ioctl(fd, a[1], a[2]),
            None => Outcome::Return(issue(nr, a)),
        },
        libc::SYS_mmap => mmap(a),
        libc::SYS_munmap => munmap(a),
        libc::SYS_close => {
            let ret = issue(nr, a);
            if ret == 0 {
                files::remove(a[0] as i32);
            }
            Outcome::Return(ret)
        }
        libc::SYS_dup | libc::SYS_dup2 | libc::SYS_dup3 => {
            let ret = issue(nr, a);
            if ret >= 0 {
                files::duplicate(a[0] as i32, ret as i32);
            }
            Outcome::Return(ret)
        }
        libc::SYS_fcntl if a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC => {
            let ret = issue(nr, a);
            if ret >= 0 {
                files::duplicate(a[0] as i32, ret as i32);
            }
            Outcome::Return(ret)
        }
        libc::SYS_close_range => {
            let ret = issue(nr, a);
            if ret == 0 && a[2] & CLOSE_RANGE_CLOEXEC == 0 {
                files::remove_range(a[0] as u32, a[1] as u32);
            }
            Outcome::Return(ret)
        }
        libc::SYS_rt_sigaction => match program_slot(a[0] as i32) {
            Some(slot) => Outcome::Return(keep_program_handler(slot, a)),
            None => Outcome::Return(sigaction_keeping_sigsys(a)),
        },
        libc::SYS_rt_sigprocmask => Outcome::Return(sigprocmask(a, call.sigmask)),
        // Calls that run with a mask of the program's for their duration: a handler that runs
        // meanwhile runs with it.
        libc::SYS_rt_sigsuspend => Outcome::Return(with_mask_keeping_sigsys(nr, a, 0, 1)),
        libc::SYS_ppoll => Outcome::Return(with_mask_keeping_sigsys(nr, a, 3, 4)),
        libc::SYS_epoll_pwait | libc::SYS_epoll_pwait2 => {
            Outcome::Return(with_mask_keeping_sigsys(nr, a, 4, 5))
        }
        libc::SYS_pselect6 => Outcome::Return(pselect_keeping_sigsys(a)),
        libc::SYS_rt_sigreturn => Outcome::Sigreturn,
        libc::SYS_clone
        | libc::SYS_clone3
        | libc::SYS_fork
        | libc::SYS_vfork
        | libc::SYS_execve
        | libc::SYS_execveat => Outcome::InPlace,
        libc::SYS_prctl if a[0] == PR_SET_SYSCALL_USER_DISPATCH => {
            Outcome::Return(-(libc::EBUSY as isize))
        }
        _ => Outcome::Return(issue(nr, a)),
    }
}

/// Issues the call with the program's arguments.
fn issue(nr: libc::c_long, a: [usize; 6]) -> isize {
    // SAFETY: the program's own call with its own arguments, made on its behalf.
    unsafe { raw(nr, a) }
}

/// Copies the NUL-terminated string at `addr` into `out`, returning its length, or `None` if
/// it is not readable or does not fit.
fn read_path(addr: usize, out: &mut [u8; PATH_MAX]) -> Option<usize> {
    if addr == 0 {
        return None;
    }
    // A range running into an unmapped page is read up to it.
    let n = program_memory(
        libc::SYS_process_vm_readv,
        out.as_mut_ptr(),
        addr,
        out.len(),
    );
    if n <= 0 {
        return None;
    }
    out[..n as usize].iter().position(|&b| b == 0)
}

/// A call whose argument `index` is a path: served from the generated tree if it names a
/// path there.
fn with_path(nr: libc::c_long, mut a: [usize; 6], index: usize) -> Outcome {
    let mut path = [0u8; PATH_MAX];
    let mut redirected = [0u8; 2 * PATH_MAX];
    if let Some(len) = read_path(a[index], &mut path) {
        if files::redirect(&path[..len], &mut redirected) {
            a[index] = redirected.as_ptr() as usize;
        }
    }
    Outcome::Return(issue(nr, a))
}

fn open(dirfd: usize, path_addr: usize, flags: usize, mode: usize, call: &mut Call) -> Outcome {
    let mut path = [0u8; PATH_MAX];
    let Some(len) = read_path(path_addr, &mut path) else {
        return Outcome::Return(issue(call.nr(), call.args()));
    };
    let path = &path[..len];
    let mut normal = [0u8; PATH_MAX];
    if let Some(n) = files::normalize(path, &mut normal) {
        if files::device_node(&normal[..n]) {
            return Outcome::Return(open_device(&normal[..n], flags));
        }
    }
    let mut redirected = [0u8; 2 * PATH_MAX];
    let target = if files::redirect(path, &mut redirected) {
        redirected.as_ptr() as usize
    } else {
        path_addr
    };
    Outcome::Return(issue(libc::SYS_openat, [dirfd, target, flags, mode, 0, 0]))
}

fn open_device(path: &[u8], flags: usize) -> isize {
    let k = match files::emulator() {
        Ok(k) => k,
        Err(message) => {
            crate::report(message);
            return -(libc::ENODEV as isize);
        }
    };
    let Ok(name) = std::str::from_utf8(path) else {
        return -(libc::ENOENT as isize);
    };
    let emulated = match k.open(name) {
        Ok(fd) => fd,
        Err(e) => return errno_of(&e),
    };
    // The program's descriptor: an empty memfd named after the device.
    let mut memfd_name = [0u8; 64];
    let label = b"hcq-exec:";
    let n = (label.len() + path.len()).min(memfd_name.len() - 1);
    memfd_name[..label.len()].copy_from_slice(label);
    memfd_name[label.len()..n].copy_from_slice(&path[..n - label.len()]);
    let cloexec = if flags & libc::O_CLOEXEC as usize != 0 {
        libc::MFD_CLOEXEC as usize
    } else {
        0
    };
    // SAFETY: creates a descriptor from a NUL-terminated name on our stack.
    let fd = unsafe {
        raw(
            libc::SYS_memfd_create,
            [memfd_name.as_ptr() as usize, cloexec, 0, 0, 0, 0],
        )
    };
    if fd < 0 {
        k.close(emulated);
        return fd;
    }
    files::insert(fd as i32, emulated);
    fd
}

fn ioctl(fd: hcq_amd_sys::seam::Fd, request: usize, arg: usize) -> Outcome {
    let Some(k) = files::emulator_if_started() else {
        return Outcome::Return(-(libc::EBADF as isize));
    };
    // The kernel takes the request as an unsigned int: callers that pass it sign-extended
    // (Python's fcntl.ioctl) mean the low 32 bits.
    let request = request as u32 as u64;
    let size = hcq_amd_sys::kfd::request_size(request);
    if KfdIoctl::decode(request) == Some(KfdIoctl::AcquireVm) {
        return acquire_vm(k, fd, arg, size);
    }
    // The kernel copies the argument with copy_from_user, so a bad pointer is EFAULT, not a
    // crash of the program: the range is checked readable before the emulator reads it.
    if size > 0 && !(readable(arg, size) && inner_pointers_readable(request, arg, size)) {
        return Outcome::Return(-(libc::EFAULT as isize));
    }
    // SAFETY: the program passes `arg` for this request, as it would to the kernel, and its
    // `size` bytes are readable; the emulator reads or writes only those.
    match unsafe { k.ioctl(fd, request, arg as *mut c_void) } {
        Ok(()) => Outcome::Return(0),
        Err(e) => Outcome::Return(errno_of(&e)),
    }
}

/// The buffers some requests point to, checked as the kernel's copy_{from,to}_user would:
/// `WAIT_EVENTS`' events, `(UN)MAP_MEMORY_TO_GPU`'s device ids, a render node's `VERSION`
/// strings and `AMDGPU_INFO` answer (the numbers do not collide between KFD and DRM). The
/// lengths probed are what the emulator may touch at most.
fn inner_pointers_readable(request: u64, arg: usize, size: usize) -> bool {
    use hcq_amd_sys::{drm, kfd};
    let mut bytes = [0u8; 64];
    let n = size.min(bytes.len());
    if !copy_bytes_from_program(arg, &mut bytes[..n]) {
        return false;
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
    let u64_at = |o: usize| u64::from(u32_at(o)) | u64::from(u32_at(o + 4)) << 32;
    let span = |ptr: u64, len: usize| ptr == 0 || len == 0 || readable(ptr as usize, len);
    // Decoded as each kernel finds a request, by its number alone.
    match (KfdIoctl::decode(request), drm::DrmIoctl::decode(request)) {
        (Some(KfdIoctl::WaitEvents), _) => span(
            u64_at(0),
            (u32_at(8) as usize).min(8192) * std::mem::size_of::<kfd::EventData>(),
        ),
        (Some(KfdIoctl::MapMemoryToGpu | KfdIoctl::UnmapMemoryFromGpu), _) => {
            span(u64_at(8), (u32_at(16) as usize).min(1024) * 4)
        }
        (_, Some(drm::DrmIoctl::Version)) => [(16, 24), (32, 40), (48, 56)]
            .iter()
            .all(|&(len, ptr)| span(u64_at(ptr), (u64_at(len) as usize).min(16))),
        (_, Some(drm::DrmIoctl::AmdgpuInfo)) => span(u64_at(0), (u32_at(8) as usize).min(512)),
        _ => true,
    }
}

/// Whether `len` bytes at `addr` can be read (probed through the kernel, in chunks, so that
/// nothing large lands on the program's stack).
fn readable(addr: usize, len: usize) -> bool {
    let mut chunk = [0u8; 512];
    let mut at = 0;
    while at < len {
        let n = chunk.len().min(len - at);
        let got = program_memory(
            libc::SYS_process_vm_readv,
            chunk.as_mut_ptr(),
            addr.wrapping_add(at),
            n,
        );
        if got != n as isize {
            return false;
        }
        at += n;
    }
    true
}

/// `ACQUIRE_VM` names the render node by the program's descriptor, which the emulator knows
/// by its own.
fn acquire_vm(
    k: &hcq_emu::EmuKernel,
    fd: hcq_amd_sys::seam::Fd,
    arg: usize,
    size: usize,
) -> Outcome {
    // As KFD: the caller's bytes, zero-extended to the struct (ACQUIRE_VM returns nothing).
    let mut bytes = [0u8; std::mem::size_of::<hcq_amd_sys::kfd::AcquireVmArgs>()];
    let n = size.min(bytes.len());
    if n > 0 && !copy_bytes_from_program(arg, &mut bytes[..n]) {
        return Outcome::Return(-(libc::EFAULT as isize));
    }
    let mut args = hcq_amd_sys::kfd::AcquireVmArgs {
        drm_fd: u32::from_le_bytes(bytes[0..4].try_into().unwrap_or_default()),
        gpu_id: u32::from_le_bytes(bytes[4..8].try_into().unwrap_or_default()),
    };
    let Some(drm) = files::lookup(args.drm_fd as i32) else {
        // Not a render node of the emulated GPUs (a real one, a file, nothing).
        return Outcome::Return(-(libc::EINVAL as isize));
    };
    args.drm_fd = drm as u32;
    let request = IOC_ACQUIRE_VM.request();
    // SAFETY: `args` is a valid `AcquireVmArgs` of ours for this request.
    match unsafe { k.ioctl(fd, request, &mut args as *mut _ as *mut c_void) } {
        Ok(()) => Outcome::Return(0),
        Err(e) => Outcome::Return(errno_of(&e)),
    }
}

fn mmap(a: [usize; 6]) -> Outcome {
    let fd = a[4] as i32;
    let emulated = files::lookup(fd);
    let k = files::emulator_if_started();
    match (emulated, k) {
        (Some(efd), Some(k)) => {
            // SAFETY: the program's mapping request on an emulated device, as it would make it
            // to the kernel; the emulator checks what it replaces.
            match unsafe {
                k.mmap(
                    a[0] as *mut c_void,
                    a[1],
                    a[2] as i32,
                    a[3] as i32,
                    efd,
                    a[5] as u64,
                )
            } {
                Ok(p) => Outcome::Return(p as isize),
                Err(e) => Outcome::Return(errno_of(&e)),
            }
        }
        (None, Some(k))
            if a[3] & libc::MAP_FIXED as usize != 0 && k.holds_range(a[0] as u64, a[1] as u64) =>
        {
            // Replacing memory the emulated GPU holds (a buffer's pages) would pull it from
            // under the GPU: refused as the emulator refuses it.
            Outcome::Return(-(libc::EINVAL as isize))
        }
        _ => Outcome::Return(issue(libc::SYS_mmap, a)),
    }
}

fn munmap(a: [usize; 6]) -> Outcome {
    match files::emulator_if_started() {
        Some(k) if k.holds_range(a[0] as u64, a[1] as u64) => {
            // SAFETY: the program unmaps its own range, as it would with the kernel; the
            // emulator defers what the GPU still uses.
            match unsafe { k.munmap(a[0] as *mut c_void, a[1]) } {
                Ok(()) => Outcome::Return(0),
                Err(e) => Outcome::Return(errno_of(&e)),
            }
        }
        _ => Outcome::Return(issue(libc::SYS_munmap, a)),
    }
}

/// `rt_sigaction` for SIGSYS: remembered for `chain`, never installed.
fn keep_program_handler(slot: usize, a: [usize; 6]) -> isize {
    if a[3] != 8 {
        return -(libc::EINVAL as isize);
    }
    let mut handlers = PROGRAM_HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
    let old = handlers[slot];
    if a[1] != 0 {
        let mut new = KernelSigaction::default();
        if !copy_from_program(a[1], &mut new) {
            return -(libc::EFAULT as isize);
        }
        handlers[slot] = new;
    }
    if a[2] != 0 && !copy_to_program(a[2], &old) {
        return -(libc::EFAULT as isize);
    }
    0
}

/// `rt_sigaction` for any other signal, with `SIGSYS` taken out of the mask its handler runs
/// with: the program's calls in a handler that blocked it would kill the process.
fn sigaction_keeping_sigsys(mut a: [usize; 6]) -> isize {
    let mut act = KernelSigaction::default();
    if a[1] != 0 && a[3] == 8 {
        if !copy_from_program(a[1], &mut act) {
            return -(libc::EFAULT as isize);
        }
        act.mask &= !bit(libc::SIGSYS);
        a[1] = &act as *const KernelSigaction as usize;
    }
    issue(libc::SYS_rt_sigaction, a)
}

/// A call taking a signal mask at argument `mask` (of the size at argument `size`), issued
/// with `SIGSYS` taken out of it.
fn with_mask_keeping_sigsys(
    nr: libc::c_long,
    mut a: [usize; 6],
    mask: usize,
    size: usize,
) -> isize {
    let mut set = 0u64;
    if a[mask] != 0 && a[size] == 8 {
        if !copy_from_program(a[mask], &mut set) {
            return -(libc::EFAULT as isize);
        }
        set &= !bit(libc::SIGSYS);
        a[mask] = &set as *const u64 as usize;
    }
    issue(nr, a)
}

/// `pselect6`, whose last argument points at `{ mask pointer, mask size }`.
fn pselect_keeping_sigsys(mut a: [usize; 6]) -> isize {
    let mut pair = [0usize; 2];
    if a[5] == 0 || !copy_from_program(a[5], &mut pair) {
        return issue(libc::SYS_pselect6, a);
    }
    let mut set = 0u64;
    if pair[0] != 0 && pair[1] == 8 {
        if !copy_from_program(pair[0], &mut set) {
            return -(libc::EFAULT as isize);
        }
        set &= !bit(libc::SIGSYS);
        pair[0] = &set as *const u64 as usize;
    }
    a[5] = pair.as_ptr() as usize;
    issue(libc::SYS_pselect6, a)
}

/// `rt_sigprocmask`, done on the mask the kernel restores when the handler returns; SIGSYS
/// stays unblocked.
fn sigprocmask(a: [usize; 6], current: &mut libc::sigset_t) -> isize {
    if a[3] != 8 {
        return -(libc::EINVAL as isize);
    }
    // SAFETY: the first 8 bytes of a sigset_t are the kernel's signal mask on x86-64.
    let mask = unsafe { &mut *(current as *mut libc::sigset_t as *mut u64) };
    let old = *mask;
    if a[1] != 0 {
        let mut set = 0u64;
        if !copy_from_program(a[1], &mut set) {
            return -(libc::EFAULT as isize);
        }
        let new = match a[0] as i32 {
            libc::SIG_BLOCK => old | set,
            libc::SIG_UNBLOCK => old & !set,
            libc::SIG_SETMASK => set,
            _ => return -(libc::EINVAL as isize),
        };
        let never = bit(libc::SIGSYS) | bit(libc::SIGKILL) | bit(libc::SIGSTOP);
        *mask = new & !never;
    }
    if a[2] != 0 && !copy_to_program(a[2], &old) {
        return -(libc::EFAULT as isize);
    }
    0
}

/// Moves `len` bytes between our buffer at `local` and the program's memory at `remote`
/// (`nr`: `process_vm_readv` or `process_vm_writev` on this process), so that a bad program
/// address is an error, not a crash. Returns the bytes moved, or `-errno`.
fn program_memory(nr: libc::c_long, local: *mut u8, remote: usize, len: usize) -> isize {
    let local = libc::iovec {
        iov_base: local as *mut c_void,
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: remote as *mut c_void,
        iov_len: len,
    };
    // SAFETY: `local` is a buffer of ours of `len` bytes (callers' guarantee); the kernel
    // checks the program's range.
    unsafe {
        let pid = raw(libc::SYS_getpid, [0; 6]);
        raw(
            nr,
            [
                pid as usize,
                &local as *const _ as usize,
                1,
                &remote as *const _ as usize,
                1,
                0,
            ],
        )
    }
}

fn copy_bytes_from_program(addr: usize, out: &mut [u8]) -> bool {
    program_memory(
        libc::SYS_process_vm_readv,
        out.as_mut_ptr(),
        addr,
        out.len(),
    ) == out.len() as isize
}

/// Reads a plain-data value (integers only, so any bytes are one) from the program.
fn copy_from_program<T: Copy>(addr: usize, out: &mut T) -> bool {
    let len = std::mem::size_of::<T>();
    program_memory(
        libc::SYS_process_vm_readv,
        out as *mut T as *mut u8,
        addr,
        len,
    ) == len as isize
}

fn copy_to_program<T: Copy>(addr: usize, value: &T) -> bool {
    let len = std::mem::size_of::<T>();
    // process_vm_writev only reads our side.
    program_memory(
        libc::SYS_process_vm_writev,
        value as *const T as *mut u8,
        addr,
        len,
    ) == len as isize
}
