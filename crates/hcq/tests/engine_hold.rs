//! Holding an emulated GPU's engines (what `hcq bench` does to time the host alone): work
//! queued while held does not run, and runs once released. Its own process: the hold stalls
//! every user of the device.

use hcq::{Arg, Device};

const SRC: &str = r#"
extern "C" __attribute__((global)) void fill(int* out, int v, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = v + i;
}
"#;

#[test]
fn held_engines_run_nothing_until_released() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let prg = dev
        .program(&dev.compile(SRC).expect("compiles"), "fill")
        .unwrap();
    let n = 256usize;
    let out = dev.alloc(n * 4).unwrap();
    out.write(&vec![-1i32; n]).unwrap();
    let dispatches = || hcq::emulator_counters(&dev).unwrap().dispatches;
    let before = dispatches();
    hcq::hold_emulated_engines(&dev, true).unwrap();
    for v in 0..3 {
        prg.launch(
            &[Arg::Buffer(&out), Arg::I32(v * 1000), Arg::I32(n as i32)],
            [n as u32 / 64, 1, 1],
            [64, 1, 1],
        )
        .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(dispatches(), before, "a held GPU ran a dispatch");
    hcq::hold_emulated_engines(&dev, false).unwrap();
    dev.synchronize().unwrap();
    assert_eq!(dispatches(), before + 3);
    let got: Vec<i32> = out.read().unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, 2000 + i as i32, "element {i}");
    }
}
