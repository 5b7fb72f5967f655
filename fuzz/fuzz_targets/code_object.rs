//! The code-object loader and its metadata parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hcq_amd::fuzzing::load_code_object(data));
