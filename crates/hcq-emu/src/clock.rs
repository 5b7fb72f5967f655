//! The emulated GPU clock: monotonic, 100 MHz (one tick every 10 ns), shared by every emulated
//! GPU in the process.

use std::sync::OnceLock;
use std::time::Instant;

/// Ticks per second of the GPU clock, the hardware's.
pub const GPU_CLOCK_HZ: u64 = hcq_amd_sys::regs::TIMESTAMP_CLOCK_HZ;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Current GPU clock value, as `RELEASE_MEM` (DATA_SEL 3) and `GET_CLOCK_COUNTERS` report it.
pub fn gpu_ticks() -> u64 {
    let ns = origin().elapsed().as_nanos();
    u64::try_from(ns / (1_000_000_000 / u128::from(GPU_CLOCK_HZ))).unwrap_or(u64::MAX)
}

/// A host clock in nanoseconds (`CLOCK_MONOTONIC_RAW`, `CLOCK_BOOTTIME`, ...).
pub fn host_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let ret = unsafe { libc::clock_gettime(clock, &mut ts) };
    if ret != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}
