//! Syscall User Dispatch for one thread: the selector byte, and the gate, the one range of
//! code whose system calls the kernel runs whatever the selector says.
//!
//! With dispatch on and the selector at `BLOCK`, every system call the thread makes outside
//! the gate is not executed: the kernel sends the thread `SIGSYS` instead, with the registers
//! of the call. While this library's own code runs (in a handler, or setting a thread up), the
//! selector is `ALLOW`, so the library's and libc's calls go straight to the kernel.
//!
//! The gate is a small region of code written at start-up, executable in one view and
//! writable in another (a memfd mapped twice, so no page is ever writable and executable). It
//! holds
//! - the restorer of our signal handlers: their `rt_sigreturn` must reach the kernel while the
//!   selector already says `BLOCK` again;
//! - a `syscall` where a program's own `rt_sigreturn` is re-issued;
//! - one *trampoline* per call site of the calls that must run in the program's own context
//!   (thread and process creation, `execve`): `syscall; jmp <the instruction after the
//!   program's syscall>`. The handler points the program at the trampoline with its registers
//!   unchanged, so the kernel runs the call as the program made it, and the new thread or
//!   child, which starts at the instruction after the `syscall`, jumps back into the program
//!   like its parent. The selector is never lowered, so nothing has to put it back afterwards
//!   in a thread, or a `vfork` child sharing this memory, that is not the handler's.
//!
//! The kernel tests the address *after* the `syscall` instruction against the allowed range;
//! every `syscall` in the gate is followed by an instruction that is inside it too.
//!
//! Dispatch is per thread and not inherited by new threads (the kernel clears it on clone):
//! `pthread_create` (lib.rs) turns it on in every thread a program thread creates.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Selector values (`SYSCALL_DISPATCH_FILTER_*`).
pub const ALLOW: u8 = 0;
pub const BLOCK: u8 = 1;

const PR_SET_SYSCALL_USER_DISPATCH: usize = 59;
const PR_SYS_DISPATCH_ON: usize = 1;
const SA_RESTORER: u64 = 0x0400_0000;

/// Layout of the gate region: the two fixed stubs and a byte per slot saying it is written,
/// then a table of call-site keys (data, reached through the writable view only), then the
/// trampolines, slot `i` for key `i`.
const GATE_BYTES: usize = 4 * 4096;
const RESTORER: usize = 0;
const SIGRETURN: usize = 16;
const READY: usize = 1024;
const KEYS: usize = 4096;
const TRAMPOLINES: usize = 8192;
const TRAMPOLINE_BYTES: usize = 16;
const SLOTS: usize = (GATE_BYTES - TRAMPOLINES) / TRAMPOLINE_BYTES;
const _: () = assert!(READY + SLOTS <= KEYS && KEYS + SLOTS * 8 <= TRAMPOLINES);

const SYSCALL: [u8; 2] = [0x0f, 0x05];
const UD2: [u8; 2] = [0x0f, 0x0b];
/// `mov eax, 15` (`rt_sigreturn`).
const MOV_EAX_SIGRETURN: [u8; 5] = [0xb8, 15, 0, 0, 0];
/// `jmp qword ptr [rip + 0]`: jumps to the 8-byte address that follows it.
const JMP_RIP_INDIRECT: [u8; 6] = [0xff, 0x25, 0, 0, 0, 0];

/// The gate's executable view (0 until `setup`), and its writable view.
static GATE_CODE: AtomicUsize = AtomicUsize::new(0);
static GATE_DATA: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The selector the kernel reads at every system call of this thread.
    static SELECTOR: Cell<u8> = const { Cell::new(ALLOW) };
    /// Whether dispatch is on in this thread (a program thread, not one of the emulator's).
    static INTERCEPTED: Cell<bool> = const { Cell::new(false) };
}

/// Writes the gate's stubs into a fresh region. Called once, before any thread is intercepted.
pub fn setup() -> std::io::Result<()> {
    use crate::sys::{raw, result};
    // SAFETY: creates an anonymous memory file from a NUL-terminated name.
    let fd = result(unsafe {
        raw(
            libc::SYS_memfd_create,
            [
                c"hcq-exec-gate".as_ptr() as usize,
                libc::MFD_CLOEXEC as usize,
                0,
                0,
                0,
                0,
            ],
        )
    })?;
    let mapped = (|| {
        // SAFETY: sizes the file we just made.
        result(unsafe { raw(libc::SYS_ftruncate, [fd, GATE_BYTES, 0, 0, 0, 0]) })?;
        let map = |prot: i32| {
            // SAFETY: a new shared mapping of the whole file, placed by the kernel.
            result(unsafe {
                raw(
                    libc::SYS_mmap,
                    [
                        0,
                        GATE_BYTES,
                        prot as usize,
                        libc::MAP_SHARED as usize,
                        fd,
                        0,
                    ],
                )
            })
        };
        let data = map(libc::PROT_READ | libc::PROT_WRITE)?;
        let code = map(libc::PROT_READ | libc::PROT_EXEC)?;
        Ok::<_, std::io::Error>((code, data))
    })();
    // SAFETY: our own descriptor; the mappings keep the file alive.
    unsafe { raw(libc::SYS_close, [fd, 0, 0, 0, 0, 0]) };
    let (code, data) = mapped?;
    let mut restorer = [0u8; 9];
    restorer[..5].copy_from_slice(&MOV_EAX_SIGRETURN);
    restorer[5..7].copy_from_slice(&SYSCALL);
    restorer[7..].copy_from_slice(&UD2);
    let mut sigreturn = [0u8; 4];
    sigreturn[..2].copy_from_slice(&SYSCALL);
    sigreturn[2..].copy_from_slice(&UD2);
    // SAFETY: both stubs lie within the writable view of GATE_BYTES bytes just mapped.
    unsafe {
        std::ptr::copy_nonoverlapping(restorer.as_ptr(), (data + RESTORER) as *mut u8, 9);
        std::ptr::copy_nonoverlapping(sigreturn.as_ptr(), (data + SIGRETURN) as *mut u8, 4);
    }
    GATE_DATA.store(data, Ordering::Release);
    GATE_CODE.store(code, Ordering::Release);
    Ok(())
}

fn code_base() -> usize {
    GATE_CODE.load(Ordering::Acquire)
}

/// Where a program's intercepted `rt_sigreturn` is re-issued.
pub fn sigreturn_address() -> usize {
    code_base() + SIGRETURN
}

/// The trampoline that makes a system call from the gate, then jumps to `resume` (the
/// instruction after the program's own `syscall`), or `None` if the table is full.
///
/// Trampolines are never freed or changed: the bytes of one depend on `resume` alone, so one
/// found in the table is right whatever code is mapped at `resume` now. The key table lives in
/// the shared region, so a forked child and its parent agree on it.
pub fn trampoline(resume: usize) -> Option<usize> {
    let data = GATE_DATA.load(Ordering::Acquire);
    // SAFETY: the key table is inside the writable view, 8-byte aligned, and only ever
    // accessed atomically.
    let keys = unsafe { std::slice::from_raw_parts((data + KEYS) as *const AtomicU64, SLOTS) };
    // SAFETY: one byte per slot, likewise.
    let ready = unsafe { std::slice::from_raw_parts((data + READY) as *const AtomicU8, SLOTS) };
    let key = resume as u64;
    let start = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % SLOTS;
    for probe in 0..SLOTS {
        let i = (start + probe) % SLOTS;
        let claimed = match keys[i].compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let mut code = [0u8; TRAMPOLINE_BYTES];
                code[..2].copy_from_slice(&SYSCALL);
                code[2..8].copy_from_slice(&JMP_RIP_INDIRECT);
                code[8..].copy_from_slice(&key.to_le_bytes());
                // SAFETY: slot `i`'s 16 bytes in the writable view; no thread executes them
                // before `ready[i]` is set below.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        code.as_ptr(),
                        (data + TRAMPOLINES + i * TRAMPOLINE_BYTES) as *mut u8,
                        TRAMPOLINE_BYTES,
                    )
                };
                ready[i].store(1, Ordering::Release);
                true
            }
            Err(existing) => existing == key,
        };
        if claimed {
            // Another thread may be writing this slot: it is a few stores from done.
            while ready[i].load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
            return Some(code_base() + TRAMPOLINES + i * TRAMPOLINE_BYTES);
        }
    }
    None
}

/// Sets this thread's selector.
pub fn set_selector(value: u8) {
    SELECTOR.with(|s| {
        // SAFETY: the cell is this thread's own; a volatile store so that it is in memory
        // before the next system call, which the kernel checks against it.
        unsafe { std::ptr::write_volatile(s.as_ptr(), value) }
    });
}

pub fn selector() -> u8 {
    // SAFETY: as in `set_selector`, reading the thread's own cell.
    SELECTOR.with(|s| unsafe { std::ptr::read_volatile(s.as_ptr()) })
}

/// Whether this thread's system calls are being intercepted (dispatch on, selector `BLOCK`):
/// true in program code, false in the emulator's threads and inside this library's handlers.
pub fn intercepting() -> bool {
    INTERCEPTED.with(Cell::get) && selector() == BLOCK
}

/// Whether dispatch is on in this thread (whatever the selector says now).
pub fn intercepted_thread() -> bool {
    INTERCEPTED.with(Cell::get)
}

/// The kernel's `struct sigaction` on x86-64 (what `rt_sigaction` takes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelSigaction {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

pub type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for `signal`, returning through the gate.
///
/// `SA_NODEFER`: a program's signal handler that runs while ours has not yet lowered the
/// selector (or has raised it again) makes intercepted calls, so `SIGSYS` must stay
/// deliverable inside our handler; were it blocked there, the kernel would kill the process.
pub fn install(signal: libc::c_int, handler: Handler) -> std::io::Result<()> {
    let act = KernelSigaction {
        handler: handler as usize,
        flags: libc::SA_SIGINFO as u64 | libc::SA_NODEFER as u64 | SA_RESTORER,
        restorer: code_base() + RESTORER,
        mask: 0,
    };
    // SAFETY: `act` is a valid kernel sigaction whose handler is a function of this library,
    // which stays loaded for the life of the process, and whose restorer is the gate's.
    let r = unsafe {
        crate::sys::raw(
            libc::SYS_rt_sigaction,
            [signal as usize, &act as *const _ as usize, 0, 8, 0, 0],
        )
    };
    crate::sys::result(r).map(|_| ())
}

/// Turns dispatch on for the calling thread with the selector at `BLOCK`.
pub fn enable_for_this_thread() -> std::io::Result<()> {
    set_selector(ALLOW);
    let selector = SELECTOR.with(Cell::as_ptr) as usize;
    // SAFETY: the selector is this thread's own byte, alive as long as the thread (the kernel
    // reads it only for this thread's system calls); the range is the gate's code.
    let r = unsafe {
        crate::sys::raw(
            libc::SYS_prctl,
            [
                PR_SET_SYSCALL_USER_DISPATCH,
                PR_SYS_DISPATCH_ON,
                code_base(),
                GATE_BYTES,
                selector,
                0,
            ],
        )
    };
    crate::sys::result(r)?;
    INTERCEPTED.with(|i| i.set(true));
    set_selector(BLOCK);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup_once() {
        static DONE: std::sync::Once = std::sync::Once::new();
        DONE.call_once(|| setup().expect("the gate region"));
    }

    fn code(at: usize, len: usize) -> Vec<u8> {
        // SAFETY: `at..at+len` lies inside the gate's executable view, readable.
        unsafe { std::slice::from_raw_parts(at as *const u8, len) }.to_vec()
    }

    #[test]
    fn the_fixed_stubs_make_rt_sigreturn_from_inside_the_gate() {
        setup_once();
        let base = code_base();
        // mov eax, 15; syscall; ud2 — and a bare syscall; ud2.
        assert_eq!(
            code(base + RESTORER, 9),
            [0xb8, 15, 0, 0, 0, 0x0f, 0x05, 0x0f, 0x0b]
        );
        assert_eq!(code(sigreturn_address(), 4), [0x0f, 0x05, 0x0f, 0x0b]);
    }

    #[test]
    fn a_trampoline_makes_the_call_then_jumps_back_and_is_shared_per_call_site_until_full() {
        setup_once();
        let sites: Vec<usize> = (0..300).map(|i| 0x5555_0000_1000 + 7 * i).collect();
        let first: Vec<usize> = sites.iter().map(|&s| trampoline(s).unwrap()).collect();
        for (&site, &t) in sites.iter().zip(&first) {
            let base = code_base();
            assert!(t >= base + TRAMPOLINES && t + TRAMPOLINE_BYTES <= base + GATE_BYTES);
            let mut want = vec![0x0f, 0x05, 0xff, 0x25, 0, 0, 0, 0];
            want.extend_from_slice(&(site as u64).to_le_bytes());
            assert_eq!(code(t, 16), want, "trampoline for {site:#x}");
            // The same site finds the same trampoline; distinct sites never share one.
            assert_eq!(trampoline(site), Some(t));
        }
        let mut distinct = first.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), first.len());

        // The table is process-wide: filling it is part of this one test. Every slot taken,
        // from four threads at once, a new site gets None, never someone else's trampoline.
        let made: Vec<Option<usize>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|k| {
                    s.spawn(move || {
                        (0..SLOTS)
                            .map(|i| trampoline(0x7777_0000_0000 + 4096 * (4 * i + k)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let some = made.iter().filter(|t| t.is_some()).count();
        assert!(some < SLOTS && made.iter().any(Option::is_none));
        // Every trampoline handed out jumps where its site is.
        for (n, t) in made.iter().enumerate() {
            if let Some(t) = t {
                let (k, i) = (n / SLOTS, n % SLOTS);
                let site = 0x7777_0000_0000u64 + 4096 * (4 * i + k) as u64;
                assert_eq!(code(t + 8, 8), site.to_le_bytes());
            }
        }
    }
}
