//! PM4 and SDMA command streams through the packet parsers and the engines.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hcq_emu::fuzzing::run_stream(data));
