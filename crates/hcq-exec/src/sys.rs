//! Raw system calls: the kernel's return value as is (`-errno` on failure), with no `errno`
//! written, since a handler must leave the program's `errno` alone.

use std::arch::asm;

/// Issues system call `nr` with six arguments and returns the kernel's raw result.
///
/// # Safety
/// The call's own requirements (valid pointers for what it reads or writes, mappings it
/// changes not in use) are the caller's.
pub unsafe fn raw(nr: libc::c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the x86-64 Linux system call convention: number in rax, arguments in rdi, rsi,
    // rdx, r10, r8, r9; rcx and r11 are clobbered; the result comes back in rax. What the call
    // does is the caller's contract.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A raw result as `io::Result`.
pub fn result(ret: isize) -> std::io::Result<usize> {
    if (-4095..0).contains(&ret) {
        Err(std::io::Error::from_raw_os_error(-ret as i32))
    } else {
        Ok(ret as usize)
    }
}

/// An `io::Error` as the raw `-errno` a system call returns.
pub fn errno_of(e: &std::io::Error) -> isize {
    -(e.raw_os_error().unwrap_or(libc::EIO) as isize)
}
