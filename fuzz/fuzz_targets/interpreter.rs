//! The RDNA3 interpreter on random wave programs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rdna3::fuzzing::run_program(data));
