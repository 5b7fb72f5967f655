//! A wait fails only when the GPU stops making progress: a queue of kernels that takes three
//! timeouts in all, each kernel a small part of one, synchronizes. (tinygrad measured its
//! timeout from the start of the wait until 0.10.3 and failed such queues.) Its own process:
//! the timeout is read from the environment when a device opens.

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::Arg;
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SRC: &str = r#"
extern "C" __attribute__((global)) void step(int* counter, int n) {
  unsigned acc = 1;
  for (int i = 0; i < n; i++) acc = acc * 1664525u + 1013904223u;
  if (acc == 42u) counter[1] = 1;
  counter[0] += 1;
}
"#;

// Each kernel is a twentieth of it: a kernel slowed twentyfold by a loaded machine (tests run
// in parallel on two cores) would be a false failure, and 600 ms with kernels of a tenth
// failed that way under a load of 8.
const TIMEOUT: Duration = Duration::from_millis(2000);

#[test]
fn a_queue_longer_than_the_timeout_that_keeps_advancing_completes() {
    // SAFETY (of the environment change): the only test of this process, before any thread.
    std::env::set_var("HCQ_WAIT_TIMEOUT_MS", TIMEOUT.as_millis().to_string());
    let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
        gpus: 1,
        max_steps: u64::MAX,
        vram_bytes: 1 << 30,
        ..EmuConfig::default()
    }));
    let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
    let dev = AmdDevice::open(&driver, 0).unwrap();
    let code = dev.compile(SRC).unwrap();
    let step = dev.load_program(&code, "step").unwrap();
    let counter = dev.alloc(8).unwrap();
    dev.copy_in(&counter, 0, &[0; 8]).unwrap();
    let launch = |n: i32| {
        dev.launch(
            &step,
            &[Arg::Buffer(&counter), Arg::I32(n)],
            |b| Ok(b.gpu_address()),
            [1, 1, 1],
            [1, 1, 1],
            false,
        )
        .unwrap();
    };
    // One kernel: about a twentieth of the timeout on this machine, now.
    let mut n = 1 << 12;
    let mut launched = 0;
    let one = loop {
        let start = Instant::now();
        launch(n);
        launched += 1;
        dev.synchronize().unwrap();
        let took = start.elapsed();
        if took >= TIMEOUT / 20 || n >= 1 << 28 {
            break took;
        }
        n *= 2;
    };
    assert!(one < TIMEOUT / 2, "one kernel already takes {one:?}");
    let count = (3 * TIMEOUT.as_micros() / one.as_micros().max(1)) as i32 + 1;
    let start = Instant::now();
    for _ in 0..count {
        launch(n);
    }
    dev.synchronize().unwrap();
    let took = start.elapsed();
    assert!(
        took > TIMEOUT,
        "the queue took only {took:?}: nothing was tested"
    );
    let mut out = [0u8; 8];
    dev.copy_out(&mut out, &counter, 0).unwrap();
    let done = i32::from_le_bytes(out[..4].try_into().unwrap());
    assert_eq!(done, launched + count);
}
