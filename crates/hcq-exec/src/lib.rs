//! The preload library of `hcq exec`: runs an unmodified program that drives AMD GPUs through
//! the Linux kernel driver (`/dev/kfd`, `/dev/dri/renderD*`) on the emulated GPUs of `hcq-emu`,
//! inside the program's own process.
//!
//! `hcq exec` starts the program with this library in `LD_PRELOAD` and `HCQ_EXEC_ROOT` naming a
//! directory holding the emulated `/sys` and `/dev` entries (generated from the same emulator's
//! topology). At load, the library turns on the kernel's Syscall User Dispatch (Linux 5.11+,
//! x86-64) in the main thread, and in every thread a program thread creates: from then on the
//! kernel runs none of the program's system calls itself but hands each one to this library's
//! `SIGSYS` handler (`handler.rs`). That sees every call whatever issues it — libc, a `ctypes`
//! handle to libc, a raw `syscall` instruction — which a library that only replaces libc's
//! symbols would not.
//!
//! The emulator then sits where the kernel driver would: `open` of the device nodes, `ioctl`,
//! `mmap`, `munmap` and `close` on them go to [`hcq_emu::EmuKernel`], paths under the emulated
//! `/sys` and `/dev` entries are looked up in the generated tree, and everything else runs
//! unchanged. The emulated GPU learns what the program asks from what it writes: ring
//! contents, write pointers and doorbells are plain stores into memory it mapped.
//!
//! Calls that create threads or processes, and `execve`, run from trampolines of the gate
//! (`gate.rs`), so the new thread or child resumes in the program's code with its registers as
//! the kernel left them.
//!
//! Limits: x86-64 only; threads must be created with `pthread_create` (a raw `clone` thread is
//! not intercepted); a child made by `fork` runs without interception (as KFD, which does not
//! give a forked child the parent's GPU context), and a child that runs `exec` is intercepted
//! with emulated GPUs of its own; a program that installs its own Syscall User Dispatch is
//! refused (`EBUSY`).

mod files;
mod gate;
mod handler;
mod priority;
mod sys;

use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// The process the library set up in: a child made by `fork` has the parent's memory, so its
/// threads' state says "intercepted", but the kernel turned dispatch off in it.
static INTERCEPTED_PROCESS: AtomicI32 = AtomicI32::new(0);

/// Prints a message of this library on the program's standard error.
pub(crate) fn report(message: &str) {
    let mut line = Vec::with_capacity(message.len() + 1);
    line.extend_from_slice(message.as_bytes());
    line.push(b'\n');
    // SAFETY: writes our own buffer to descriptor 2.
    unsafe {
        sys::raw(
            libc::SYS_write,
            [2, line.as_ptr() as usize, line.len(), 0, 0, 0],
        )
    };
}

/// Set up when the library is loaded, before the program's `main`.
extern "C" fn init() {
    let Some(root) = std::env::var_os("HCQ_EXEC_ROOT") else {
        return;
    };
    let root = std::os::unix::ffi::OsStrExt::as_bytes(root.as_os_str()).to_vec();
    if let Err(e) = files::load_served(&root) {
        // The tree is gone (hcq exec has ended): nothing to emulate for this process.
        report(&format!(
            "hcq exec: the emulated devices' tree is unreadable ({e}); running without them"
        ));
        return;
    }
    if files::ROOT.set(root).is_err() {
        return;
    }
    if let Err(e) = priority::setup() {
        report(&format!("hcq exec: {e}"));
        std::process::exit(127);
    }
    let installed = gate::setup()
        .and_then(|()| gate::install(libc::SIGSYS, handler::on_sigsys))
        .and_then(|()| gate::enable_for_this_thread());
    // SAFETY: getpid has no preconditions.
    INTERCEPTED_PROCESS.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    if let Err(e) = installed {
        report(&format!(
            "hcq exec: cannot intercept the program's system calls (Syscall User Dispatch needs \
             Linux 5.11 or later on x86-64): {e}"
        ));
        std::process::exit(127);
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    extern "C" fn(*mut c_void) -> *mut c_void,
    *mut c_void,
) -> libc::c_int;

/// libc's `pthread_create`, found once.
fn real_pthread_create() -> Option<PthreadCreate> {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let mut f = REAL.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: looks up the next definition of a libc symbol by its NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        REAL.store(f, Ordering::Release);
    }
    // SAFETY: the address of libc's pthread_create, whose signature this is.
    (f != 0).then(|| unsafe { std::mem::transmute::<usize, PthreadCreate>(f) })
}

struct ThreadStart {
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
}

extern "C" fn intercepted_start(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the box `pthread_create` below made for this thread.
    let ThreadStart { start, arg } = *unsafe { Box::from_raw(p as *mut ThreadStart) };
    if let Err(e) = gate::enable_for_this_thread() {
        report(&format!(
            "hcq exec: a new thread of the program runs without interception: {e}"
        ));
    }
    start(arg)
}

/// `pthread_create`, as the program sees it: a thread created by an intercepted thread is
/// intercepted too (the kernel does not carry Syscall User Dispatch over to new threads); the
/// emulator's own threads are not.
///
/// # Safety
/// As libc's `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> libc::c_int {
    let Some(real) = real_pthread_create() else {
        return libc::ENOSYS;
    };
    // SAFETY: getpid has no preconditions.
    let forked = unsafe { libc::getpid() } != INTERCEPTED_PROCESS.load(Ordering::Relaxed);
    if !gate::intercepting() || forked {
        // SAFETY: forwarded with the caller's guarantees.
        return unsafe { real(thread, attr, start, arg) };
    }
    gate::set_selector(gate::ALLOW);
    let boxed = Box::into_raw(Box::new(ThreadStart { start, arg }));
    // SAFETY: the caller's guarantees; the box is handed to the new thread, or taken back
    // here if there is none.
    let r = unsafe { real(thread, attr, intercepted_start, boxed as *mut c_void) };
    if r != 0 {
        // SAFETY: no thread took the box.
        drop(unsafe { Box::from_raw(boxed) });
    }
    gate::set_selector(gate::BLOCK);
    r
}
