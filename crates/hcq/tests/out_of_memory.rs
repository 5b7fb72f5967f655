//! Device memory exhaustion with a small emulated VRAM: the allocator's cache is evicted before
//! anyone sees `OutOfMemory`, and after `OutOfMemory` the device keeps working. Its own process,
//! because the VRAM size is read when the emulator starts.

use hcq::{Arg, Device, Error};

const MIB: usize = 1 << 20;

#[test]
fn eviction_then_out_of_memory_then_the_device_still_works() {
    // The device itself takes about 60 MiB of VRAM (context save area, kernel arguments).
    std::env::set_var("HCQ_EMU_VRAM", "128M");
    let dev = Device::open("amd-emu:0").unwrap();
    let first = dev.alloc(40 * MIB).unwrap();
    first.write(&vec![1u8; 40 * MIB]).unwrap();
    drop(first); // into the cache, still holding VRAM
    let second = dev
        .alloc(48 * MIB)
        .expect("the cached 40 MiB is evicted to make room");
    drop(second);
    let e = dev.alloc(1024 * MIB).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    // Still usable: a kernel runs and its result is right.
    let lib = dev.compile(r#"extern "C" __attribute__((global)) void sq(int* x) { int i = __builtin_amdgcn_workitem_id_x(); x[i] = i * i; }"#).unwrap();
    let prg = dev.program(&lib, "sq").unwrap();
    let buf = dev.alloc(64 * 4).unwrap();
    prg.launch(&[Arg::Buffer(&buf)], [1, 1, 1], [64, 1, 1])
        .unwrap();
    let got: Vec<i32> = buf.read().unwrap();
    assert_eq!(got, (0..64).map(|i| i * i).collect::<Vec<i32>>());
}
