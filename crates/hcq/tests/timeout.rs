//! A kernel that never finishes ends the wait with `Timeout` within `HCQ_WAIT_TIMEOUT_MS`.
//! Its own process: the timeout is read when the device opens, and the GPU stays busy after.

use hcq::{Arg, Device, Error};
use std::time::{Duration, Instant};

const SRC: &str = r#"
extern "C" __attribute__((global)) void spin(volatile int* flag) {
  while (*flag == 0) {}
}
"#;

#[test]
fn a_wait_that_never_completes_times_out() {
    // SAFETY (of the environment change): this test process has a single test, set before any
    // other thread reads the environment.
    std::env::set_var("HCQ_WAIT_TIMEOUT_MS", "400");
    std::env::set_var("HCQ_EMU_MAX_STEPS", "1000000000000");
    let dev = Device::open("amd-emu:0").unwrap();
    let lib = dev.compile(SRC).unwrap();
    let prg = dev.program(&lib, "spin").unwrap();
    let flag = dev.alloc(4).unwrap();
    flag.write(&[0i32]).unwrap();
    prg.launch(&[Arg::Buffer(&flag)], [1, 1, 1], [1, 1, 1])
        .unwrap();
    let start = Instant::now();
    let e = dev.synchronize().unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, Error::Timeout { ms: 400, .. }), "{e}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "took {took:?}"
    );
}
