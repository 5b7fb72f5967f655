//! Sequences of system calls on the emulated KFD: ioctls, mmap, munmap, doorbells.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hcq_emu::fuzzing::run_syscalls(data));
