//! The fuzz smoke of the emulated kernel: every kept failing input, then seeded random and
//! mutated ones, through the same functions the libFuzzer targets call
//! (`scripts/fuzz.sh ioctl|streams SECONDS` runs libFuzzer on them).

#[path = "../../../fuzz/smoke.rs"]
mod smoke;

use std::time::Duration;

use hcq_amd_sys::pm4::{DispatchSetup, Pm4Builder};

/// A PM4 stream as the driver writes one: waits, an indirect buffer, a timestamp, a signal
/// and a dispatch of two workgroups whose code (`s_endpgm`) follows in the same memory;
/// addresses in the harness's mapped memory.
fn pm4_seed() -> Vec<u8> {
    let base = hcq_emu::fuzzing::STREAM_GPU_BASE;
    const CODE_OFFSET: usize = 0x300;
    let mut b = Pm4Builder::new();
    b.hdp_flush();
    b.invalidate_cache();
    b.wait(base + 0x2000, 0);
    b.indirect_buffer(base + 0x1000, 16);
    b.timestamp(base + 0x3000);
    let setup = DispatchSetup {
        code_entry: base + CODE_OFFSET as u64,
        rsrc1: 0,
        rsrc2: 0,
        group_segment_size: 0,
        scratch_base: 0,
        user_data: [0; 16],
        user_data_count: 0,
    };
    b.exec(&setup, [2, 1, 1], [64, 1, 1]);
    b.signal(base + 0x3100, 7, 0, 0);
    // Type-2 fillers up to the code, which is one more filler to the command processor.
    let mut words = b.words.clone();
    words.resize(CODE_OFFSET / 4, 0x8000_0000);
    words.push(0xbfb0_0000);
    let mut seed = vec![0u8];
    for w in words {
        seed.extend_from_slice(&w.to_le_bytes());
    }
    seed
}

#[test]
fn streams_smoke() {
    let n = smoke::smoke(
        "streams",
        hcq_emu::fuzzing::run_stream,
        &[pm4_seed()],
        2_000,
        4_000,
        1024,
        Duration::from_secs(5),
    );
    assert!(n > 500, "only {n} inputs ran");
}

#[test]
fn ioctl_smoke() {
    let n = smoke::smoke(
        "ioctl",
        hcq_emu::fuzzing::run_syscalls,
        &[],
        1_000,
        1_000,
        512,
        Duration::from_secs(5),
    );
    assert!(n > 200, "only {n} inputs ran");
}
