//! A kernel that never finishes ends the wait with `Timeout` within `HCQ_WAIT_TIMEOUT_MS`, and
//! only once: later waits on the stuck device, and dropping what used it, do not wait a full
//! timeout again. Its own process: the timeout is read when the device opens, and the GPU stays
//! busy after.

use hcq::{Arg, Device, Error};
use std::time::{Duration, Instant};

const SRC: &str = r#"
extern "C" __attribute__((global)) void spin(volatile int* flag) {
  while (*flag == 0) {}
}
"#;

const TIMEOUT_MS: u64 = 1000;

#[test]
fn a_wait_that_never_completes_times_out_once() {
    // SAFETY (of the environment change): this test process has a single test, set before any
    // other thread reads the environment.
    std::env::set_var("HCQ_WAIT_TIMEOUT_MS", TIMEOUT_MS.to_string());
    std::env::set_var("HCQ_EMU_MAX_STEPS", "1000000000000");
    let timeout = Duration::from_millis(TIMEOUT_MS);
    let dev = Device::open("amd-emu:0").unwrap();
    let lib = dev.compile(SRC).unwrap();
    let prg = dev.program(&lib, "spin").unwrap();
    let flag = dev.alloc(4).unwrap();
    flag.write(&[0i32]).unwrap();
    let start = Instant::now();
    prg.launch(&[Arg::Buffer(&flag)], [1, 1, 1], [1, 1, 1])
        .unwrap();
    let e = dev.synchronize().unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, Error::Timeout { ms: TIMEOUT_MS, .. }), "{e}");
    assert!(took >= timeout && took < timeout * 3 / 2, "took {took:?}");

    // The GPU is still short of the value: asking again fails at once, with the same error.
    let again = Instant::now();
    let e = dev.synchronize().unwrap_err();
    assert!(matches!(e, Error::Timeout { ms: TIMEOUT_MS, .. }), "{e}");
    let e = flag.read::<i32>().unwrap_err();
    assert!(matches!(e, Error::Timeout { ms: TIMEOUT_MS, .. }), "{e}");
    assert!(again.elapsed() < timeout / 4, "took {:?}", again.elapsed());

    // Dropping the program (which waits for the launches that may still run its code), the
    // buffer and the device does not wait again either.
    drop(prg);
    drop(flag);
    drop(dev);
    let total = start.elapsed();
    assert!(
        total < timeout * 8 / 5 + Duration::from_millis(250),
        "launch to drop took {total:?} with a {TIMEOUT_MS} ms timeout"
    );
}
