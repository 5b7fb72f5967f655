//! Whether an engine reports its read pointer as a running count or as an offset within the
//! ring is not documented for user queues (a PM4 queue's `CP_HQD_PQ_RPTR` is an offset), so
//! the driver works with either: here the emulated engines report offsets, and both rings wrap
//! several times under launches and copies that are checked element by element. A driver that
//! took the report for a running count would wait for room forever after the first wrap.
//! Its own process: it sets the wait timeout before the device opens.

use hcq_amd::queue::{COMPUTE_RING_BYTES, SDMA_RING_BYTES};
use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::Arg;
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;

const SRC: &str = r#"
extern "C" __attribute__((global)) void bump(int* x, int k) {
  x[__builtin_amdgcn_workitem_id_x()] += k;
}
"#;

#[test]
fn rings_wrap_many_times_with_read_pointers_reported_as_ring_offsets() {
    std::env::set_var("HCQ_WAIT_TIMEOUT_MS", "5000");
    let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
        gpus: 1,
        vram_bytes: 256 << 20,
        wrapped_read_pointers: true,
        ..EmuConfig::default()
    }));
    let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
    let dev = AmdDevice::open(&driver, 0).unwrap();
    let prg = dev
        .load_program(&dev.compile(SRC).unwrap(), "bump")
        .unwrap();
    let buf = dev.alloc(64 * 4).unwrap();
    dev.copy_in(&buf, 0, &[0u8; 256]).unwrap();
    let mut expected = 0i64;
    let mut k = 0;
    // Enough launches to go round the compute ring three times.
    while dev.ring_bytes_written().0 < 3 * COMPUTE_RING_BYTES {
        k += 1;
        dev.launch(
            &prg,
            &[Arg::Buffer(&buf), Arg::I32(k)],
            |b| Ok(b.gpu_address()),
            [1, 1, 1],
            [64, 1, 1],
            false,
        )
        .unwrap();
        expected += i64::from(k);
    }
    let mut back = vec![0u8; 256];
    dev.copy_out(&mut back, &buf, 0).unwrap();
    for (i, c) in back.chunks(4).enumerate() {
        let got = i32::from_le_bytes(c.try_into().unwrap());
        assert_eq!(
            i64::from(got),
            expected as i32 as i64,
            "element {i} after {k} launches"
        );
    }
    // Copies in and out until the copy ring has gone round three times too.
    let mut round = 0u32;
    while dev.ring_bytes_written().1 < 3 * SDMA_RING_BYTES {
        round += 1;
        let data: Vec<u8> = (0..256u32).map(|i| (i * 7 + round) as u8).collect();
        dev.copy_in(&buf, 0, &data).unwrap();
        dev.copy_out(&mut back, &buf, 0).unwrap();
        assert_eq!(back, data, "copy round {round}");
    }
}
