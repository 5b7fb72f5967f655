//! Two emulated GPUs: a transfer between them, then a kernel on the destination that reads the
//! data. Its own process, because the GPU count is read when the emulator starts.

use hcq::{Arg, Device};

const SRC: &str = r#"
extern "C" __attribute__((global)) void twice(int* out, const int* in, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = 2 * in[i];
}
"#;

#[test]
fn transfer_between_gpus_then_compute_on_the_destination() {
    // Set before the emulator first starts; this process has only this test.
    std::env::set_var("HCQ_EMU_GPUS", "2");
    let (d0, d1) = (
        Device::open("amd-emu:0").unwrap(),
        Device::open("amd-emu:1").unwrap(),
    );
    assert_eq!((d0.index(), d1.index()), (0, 1));
    let n = (1 << 20) + 123;
    let host: Vec<i32> = (0..n as i32)
        .map(|i| i.wrapping_mul(7919) ^ 0x5a5a)
        .collect();
    let a = d0.alloc(n * 4).unwrap();
    a.write(&host).unwrap();
    let b = d1.alloc(n * 4).unwrap();
    let c = d1.alloc(n * 4).unwrap();
    let lib = d1.compile(SRC).unwrap();
    let prg = d1.program(&lib, "twice").unwrap();
    for round in 0..3 {
        a.copy_to(0, &b, 0, n * 4).unwrap();
        // No host synchronisation: d1's queue waits for the copy by itself.
        prg.launch(
            &[Arg::Buffer(&c), Arg::Buffer(&b), Arg::I32(n as i32)],
            [(n as u32).div_ceil(256), 1, 1],
            [256, 1, 1],
        )
        .unwrap();
        let got: Vec<i32> = c.read().unwrap();
        for (i, (g, h)) in got.iter().zip(&host).enumerate() {
            assert_eq!(*g, h.wrapping_mul(2), "round {round} element {i}");
        }
        // And back the other way.
        c.copy_to(0, &a, 0, n * 4).unwrap();
        let back: Vec<i32> = a.read().unwrap();
        assert!(back.iter().zip(&host).all(|(x, h)| *x == h.wrapping_mul(2)));
        a.write(&host).unwrap();
    }
    // A kernel argument on the wrong device is an error, not a fault.
    let e = prg
        .launch(
            &[Arg::Buffer(&c), Arg::Buffer(&a), Arg::I32(1)],
            [1, 1, 1],
            [1, 1, 1],
        )
        .unwrap_err();
    assert!(matches!(e, hcq::Error::InvalidArgument(_)), "{e}");
}
