//! Scratch on GPUs of other sizes than the RX 7900 XTX: the scratch ring's `WAVES` counts the
//! slots of each shader engine, so a driver that programs the 96-CU value on an 84-CU RX 7900
//! XT lets waves run past its scratch memory (tinygrad fixed the same in #13589). The emulated
//! GPU hands out the ring's highest slots first, so an oversized ring faults at once.

use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_core::Arg;
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;

const SRC: &str = r#"
extern "C" __attribute__((global)) void private_sums(const int* in, int* out, int n) {
  int gid = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  volatile int buf[96];
  for (int i = 0; i < 96; i++) buf[i] = in[(gid + i) % n] * (i + 1);
  int acc = 0;
  for (int i = 0; i < 96; i++) acc += buf[(i * 7 + gid) % 96];
  out[gid] = acc;
}
"#;

fn host(input: &[i32], gid: usize) -> i32 {
    let n = input.len();
    let buf: Vec<i32> = (0..96)
        .map(|i| input[(gid + i) % n].wrapping_mul(i as i32 + 1))
        .collect();
    (0..96).fold(0i32, |acc, i| acc.wrapping_add(buf[(i * 7 + gid) % 96]))
}

#[test]
fn private_arrays_are_right_on_every_navi31_size() {
    for cus in [96, 84, 60] {
        let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 1,
            vram_bytes: 2 << 30,
            cus,
            ..EmuConfig::default()
        }));
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        let dev = AmdDevice::open(&driver, 0).unwrap();
        let code = dev.compile(SRC).unwrap();
        let prg = dev.load_program(&code, "private_sums").unwrap();
        let groups = 16u32;
        let n = (groups * 64) as usize;
        let input: Vec<i32> = (0..n as i32).map(|i| i * 31 - 700).collect();
        let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
        let (a, out) = (
            dev.alloc(bytes.len() as u64).unwrap(),
            dev.alloc(bytes.len() as u64).unwrap(),
        );
        dev.copy_in(&a, 0, &bytes).unwrap();
        dev.launch(
            &prg,
            &[Arg::Buffer(&a), Arg::Buffer(&out), Arg::I32(n as i32)],
            |b| Ok(b.gpu_address()),
            [groups, 1, 1],
            [64, 1, 1],
            false,
        )
        .unwrap();
        dev.synchronize()
            .unwrap_or_else(|e| panic!("{cus} CUs: {e}"));
        let mut back = vec![0u8; bytes.len()];
        dev.copy_out(&mut back, &out, 0).unwrap();
        for (gid, chunk) in back.chunks(4).enumerate() {
            let got = i32::from_le_bytes(chunk.try_into().unwrap());
            assert_eq!(got, host(&input, gid), "{cus} CUs: element {gid}");
        }
    }
}
