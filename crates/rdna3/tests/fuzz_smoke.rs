//! The fuzz smoke of the decoder and the interpreter: every kept failing input, then seeded
//! random and mutated ones, through the same functions the libFuzzer targets call
//! (`scripts/fuzz.sh decode|interpreter SECONDS` runs libFuzzer on them).

#[path = "../../../fuzz/smoke.rs"]
mod smoke;

use std::time::Duration;

const DEMO: &[u8] = include_bytes!("../../hcq-cli/kernels/prebuilt/demo.gfx1100.hsaco");

/// Dispatch header (RSRC1, RSRC2 with two user SGPRs, LDS and scratch, RSRC3, user data,
/// 64 work-items) and a program with loads, LDS, a barrier, a loop, scratch and an atomic.
fn program_seed() -> Vec<u8> {
    let mut seed = Vec::new();
    for word in [0u32, 0x8005, 0, 0x40, 0x1000, 63] {
        seed.extend_from_slice(&word.to_le_bytes());
    }
    seed.extend_from_slice(&[
        0x80, 0x00, 0x04, 0xf4, 0x10, 0x00, 0x00, 0xf8, 0x82, 0x00, 0x02, 0x30, 0x07, 0xfc, 0x89,
        0xbf, 0x00, 0x00, 0x52, 0xdc, 0x01, 0x00, 0x00, 0x02, 0xf7, 0x03, 0x89, 0xbf, 0x02, 0x04,
        0x04, 0x06, 0x00, 0x00, 0x34, 0xd8, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0xbd, 0xbf, 0x04,
        0x00, 0xd8, 0xd8, 0x01, 0x00, 0x00, 0x03, 0x07, 0xfc, 0x89, 0xbf, 0x90, 0x00, 0x98, 0x7c,
        0x6a, 0x20, 0x84, 0xbe, 0x00, 0x01, 0x6a, 0xdc, 0x01, 0x03, 0x00, 0x00, 0x10, 0x00, 0x69,
        0xdc, 0x00, 0x02, 0x7c, 0x00, 0x04, 0x00, 0xfe, 0xbe, 0x05, 0x81, 0x05, 0x80, 0x05, 0x84,
        0x0a, 0xbf, 0xfd, 0xff, 0xa2, 0xbf, 0x00, 0x02, 0xd6, 0xdc, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0xb0, 0xbf,
    ]);
    seed
}

#[test]
fn decode_smoke() {
    let seeds = vec![DEMO.to_vec(), program_seed()[24..].to_vec()];
    let n = smoke::smoke(
        "decode",
        rdna3::fuzzing::decode_stream,
        &seeds,
        20_000,
        20_000,
        256,
        Duration::from_secs(5),
    );
    assert!(n > 1000, "only {n} inputs ran");
}

#[test]
fn interpreter_smoke() {
    let seeds = vec![program_seed()];
    let n = smoke::smoke(
        "interpreter",
        rdna3::fuzzing::run_program,
        &seeds,
        2_000,
        8_000,
        512,
        Duration::from_secs(5),
    );
    assert!(n > 1000, "only {n} inputs ran");
}

/// Memory with nothing mapped.
struct Unmapped;

// SAFETY: `translate` never returns a pointer.
unsafe impl rdna3::Memory for Unmapped {
    fn translate(&self, _addr: u64, _len: u64) -> Option<*mut u8> {
        None
    }
}

/// Found by the `streams` target: the workgroup count of a grid of three u32 dimensions
/// overflowed u64 (a panic with overflow checks, a wrapped count without).
#[test]
fn grids_beyond_u64_workgroups_are_refused() {
    let d = rdna3::Dispatch {
        grid: [u32::MAX; 3],
        block: [1, 1, 1],
        wave32: true,
        max_steps: 10,
        ..Default::default()
    };
    let fault = rdna3::run_dispatch(&Unmapped, &rdna3::CodeCache::new(), &d).unwrap_err();
    assert!(
        matches!(fault.kind, rdna3::FaultKind::Unsupported(_)),
        "{fault}"
    );
    assert!(
        fault
            .to_string()
            .contains("4294967295x4294967295x4294967295"),
        "{fault}"
    );
    let d = rdna3::Dispatch {
        grid: [1, 1, 1],
        block: [u32::MAX; 3],
        ..d
    };
    let fault = rdna3::run_dispatch(&Unmapped, &rdna3::CodeCache::new(), &d).unwrap_err();
    assert!(
        matches!(fault.kind, rdna3::FaultKind::Unsupported(_)),
        "{fault}"
    );
}
