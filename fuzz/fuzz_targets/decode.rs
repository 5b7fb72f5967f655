//! The RDNA3 decoder and its disassembly.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rdna3::fuzzing::decode_stream(data));
