//! After a wait times out the device is stuck short of a timeline value: waits that need it
//! fail at once with `Timeout` (instead of a full timeout each), earlier work stays readable,
//! and once the GPU gets past the value (here: the host releases the spinning kernel) the
//! device works as before. Dropping a stuck device does not wait either. Its own process: the
//! timeout is read from the environment when a device opens.

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::{Arg, Error};
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SRC: &str = r#"
extern "C" __attribute__((global)) void spin(volatile int* flag, int* out) {
  while (*flag == 0) {}
  out[0] = *flag + 1;
}
extern "C" __attribute__((global)) void twice(int* x) {
  x[__builtin_amdgcn_workitem_id_x()] *= 2;
}
"#;

const TIMEOUT: Duration = Duration::from_millis(500);

fn launch(dev: &AmdDevice, prg: &hcq_amd::AmdProgram, args: &[Arg<&hcq_amd::AmdBuffer>], n: u32) {
    dev.launch(
        prg,
        args,
        |b| Ok(b.gpu_address()),
        [1, 1, 1],
        [n, 1, 1],
        false,
    )
    .unwrap();
}

fn is_timeout(r: hcq_core::Result<()>) -> bool {
    matches!(r, Err(Error::Timeout { ms, .. }) if ms == TIMEOUT.as_millis() as u64)
}

#[test]
fn a_stuck_device_fails_fast_and_recovers_when_the_gpu_moves_on() {
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
    let spin = dev.load_program(&code, "spin").unwrap();
    let twice = dev.load_program(&code, "twice").unwrap();
    let (flag, out, data) = (
        dev.alloc(4).unwrap(),
        dev.alloc(4).unwrap(),
        dev.alloc(64 * 4).unwrap(),
    );
    let values: Vec<i32> = (0..64).map(|i| i * 3 - 50).collect();
    let bytes = |v: &[i32]| v.iter().flat_map(|e| e.to_le_bytes()).collect::<Vec<u8>>();
    dev.copy_in(&flag, 0, &[0; 4]).unwrap();
    dev.copy_in(&data, 0, &bytes(&values)).unwrap();
    launch(&dev, &twice, &[Arg::Buffer(&data)], 64);
    launch(&dev, &spin, &[Arg::Buffer(&flag), Arg::Buffer(&out)], 1);
    // Queued behind the spinning kernel.
    launch(&dev, &twice, &[Arg::Buffer(&data)], 64);

    let start = Instant::now();
    assert!(is_timeout(dev.synchronize()));
    assert!(start.elapsed() >= TIMEOUT);
    let again = Instant::now();
    for _ in 0..3 {
        assert!(is_timeout(dev.synchronize()));
        let mut read = [0u8; 4];
        let r = dev.copy_out(&mut read, &out, 0);
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    }
    assert!(
        again.elapsed() < TIMEOUT / 2,
        "waits on a stuck device took {:?}",
        again.elapsed()
    );

    // Launches queue behind the stuck kernel until the ring is full; then the next one fails
    // at once instead of waiting a full timeout for room.
    let filler = dev.alloc(64 * 4).unwrap();
    let filling = Instant::now();
    let mut queued = 0u32;
    let full = loop {
        let r = dev.launch(
            &twice,
            &[Arg::Buffer(&filler)],
            |b| Ok(b.gpu_address()),
            [1, 1, 1],
            [64, 1, 1],
            false,
        );
        match r {
            Ok(_) if queued < 1_000_000 => queued += 1,
            other => break other,
        }
    };
    assert!(matches!(full, Err(Error::Timeout { .. })), "{full:?}");
    assert!(queued > 100, "the ring took only {queued} launches");
    assert!(
        filling.elapsed() < TIMEOUT / 2,
        "{queued} launches and a full ring took {:?}",
        filling.elapsed()
    );

    // The GPU moves on: the host lets the kernel finish, as another agent could. Waits fail
    // at once until the GPU has got past the stuck value, then work again.
    flag.memory().write(0, &7i32.to_le_bytes()).unwrap();
    let released = Instant::now();
    loop {
        match dev.synchronize() {
            Ok(()) => break,
            Err(Error::Timeout { .. }) if released.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("after the release: {e}"),
        }
    }
    let mut read = vec![0u8; 64 * 4];
    dev.copy_out(&mut read, &data, 0).unwrap();
    let expected: Vec<i32> = values.iter().map(|v| v * 4).collect();
    assert_eq!(read, bytes(&expected));
    let mut read = [0u8; 4];
    dev.copy_out(&mut read, &out, 0).unwrap();
    assert_eq!(i32::from_le_bytes(read), 8);

    // Stuck again, then dropped: no second full timeout, and the GPU is usable after.
    dev.copy_in(&flag, 0, &[0; 4]).unwrap();
    launch(&dev, &spin, &[Arg::Buffer(&flag), Arg::Buffer(&out)], 1);
    assert!(is_timeout(dev.synchronize()));
    let dropping = Instant::now();
    drop((spin, twice, flag, out, data));
    drop(dev);
    assert!(
        dropping.elapsed() < TIMEOUT / 2,
        "dropping a stuck device took {:?}",
        dropping.elapsed()
    );
    let dev = AmdDevice::open(&driver, 0).unwrap();
    let twice = dev.load_program(&code, "twice").unwrap();
    let data = dev.alloc(64 * 4).unwrap();
    dev.copy_in(&data, 0, &bytes(&values)).unwrap();
    launch(&dev, &twice, &[Arg::Buffer(&data)], 64);
    let mut read = vec![0u8; 64 * 4];
    dev.copy_out(&mut read, &data, 0).unwrap();
    let expected: Vec<i32> = values.iter().map(|v| v * 2).collect();
    assert_eq!(read, bytes(&expected));
}
