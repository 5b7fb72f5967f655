//! Bad input and faulting kernels give typed errors; the device keeps working after them, except
//! after a GPU memory fault, which (as on Linux) ends it for the process. One test function, so
//! the faults happen in a known order on the shared device.

use hcq::{Arg, Device, Error};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
KERNEL void add_one(int* x, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) x[i] += 1;
}
KERNEL void store_to(unsigned long address, int value) {
  *(volatile int*)address = value;
}
KERNEL void ray_stack(int* x) {
  int v;
  asm volatile("ds_bvh_stack_rtn_b32 %0, %1, %1, v[4:7]" : "=v"(v) : "v"(x[0]));
  x[1] = v;
}
"#;

fn add_one_works(dev: &Device, lib: &[u8]) {
    let prg = dev.program(lib, "add_one").unwrap();
    let buf = dev.alloc(100 * 4).unwrap();
    let v: Vec<i32> = (0..100).collect();
    buf.write(&v).unwrap();
    prg.launch(&[Arg::Buffer(&buf), Arg::I32(100)], [2, 1, 1], [64, 1, 1])
        .unwrap();
    let got: Vec<i32> = buf.read().unwrap();
    assert_eq!(got, (1..101).collect::<Vec<i32>>());
}

#[test]
fn faults_are_errors_and_only_a_memory_fault_ends_the_device() {
    let dev = Device::open("amd-emu:0").unwrap();
    let lib = dev.compile(SRC).unwrap();

    // Malformed code objects.
    for bad in [&b""[..], b"\x7fELF garbage", &lib[..lib.len() / 3]] {
        let e = dev.program(bad, "add_one").unwrap_err();
        assert!(matches!(e, Error::InvalidCodeObject(_)), "{e}");
    }
    let e = dev.program(&lib, "no_such_kernel").unwrap_err();
    assert!(
        e.to_string().contains("add_one"),
        "lists the kernels there are: {e}"
    );

    // Wrong arguments, checked against the kernel's metadata.
    let prg = dev.program(&lib, "add_one").unwrap();
    let buf = dev.alloc(64).unwrap();
    let e = prg
        .launch(&[Arg::Buffer(&buf)], [1, 1, 1], [1, 1, 1])
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("takes 2 arguments"),
        "{e}"
    );
    let e = prg
        .launch(&[Arg::Buffer(&buf), Arg::I64(5)], [1, 1, 1], [1, 1, 1])
        .unwrap_err();
    assert!(
        e.to_string().contains("argument 1 ") && e.to_string().contains("4 bytes"),
        "{e}"
    );
    let e = prg
        .launch(&[Arg::I32(1), Arg::I32(5)], [1, 1, 1], [1, 1, 1])
        .unwrap_err();
    assert!(
        e.to_string().contains("argument 0 ") && e.to_string().contains("buffer"),
        "{e}"
    );
    let e = prg
        .launch(
            &[Arg::Buffer(&buf), Arg::I32(1), Arg::I32(2)],
            [1, 1, 1],
            [1, 1, 1],
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    add_one_works(&dev, &lib);

    // An instruction the emulator does not implement is named, with its PC.
    let ray = dev.program(&lib, "ray_stack").unwrap();
    let e = ray
        .launch_timed(&[Arg::Buffer(&buf)], [1, 1, 1], [32, 1, 1])
        .unwrap_err();
    match &e {
        Error::DeviceFault { message, .. } => {
            assert!(message.contains("ds_bvh_stack_rtn_b32"), "{message}");
            assert!(message.contains("pc"), "{message}");
        }
        other => panic!("expected a device fault, got {other}"),
    }
    add_one_works(&dev, &lib);

    // Last: a store to an unmapped address is a VM fault, and the device is lost with it.
    let store = dev.program(&lib, "store_to").unwrap();
    store
        .launch(&[Arg::U64(0x10_0000), Arg::I32(7)], [1, 1, 1], [1, 1, 1])
        .unwrap();
    let e = dev.synchronize().unwrap_err();
    match &e {
        Error::DeviceFault { message, .. } => assert!(message.contains("0x100000"), "{message}"),
        other => panic!("expected a device fault, got {other}"),
    }
    let prg = dev.program(&lib, "add_one").unwrap();
    let buf = dev.alloc(100 * 4).unwrap();
    let e = prg
        .launch(&[Arg::Buffer(&buf), Arg::I32(100)], [2, 1, 1], [64, 1, 1])
        .unwrap_err();
    assert!(
        matches!(&e, Error::DeviceLost { message, .. } if message.contains("0x100000")),
        "{e}"
    );
}

/// A memory fault on one GPU of two: that GPU is lost for every kind of work (launches, graph
/// replays, copies to it and from it), the other goes on, and a new process (here a new
/// emulated kernel) has both again.
#[test]
fn a_memory_fault_loses_only_its_own_gpu() {
    use hcq::{GraphArg, GraphBuilder};
    use hcq_amd::{AmdDevice, AmdDriver};
    use hcq_amd_sys::seam::Syscalls;
    use hcq_emu::{EmuConfig, EmuKernel};
    use std::sync::Arc;

    let open_pair = || {
        let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
            gpus: 2,
            vram_bytes: 256 << 20,
            ..EmuConfig::default()
        }));
        let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
        (
            Device::from_amd(AmdDevice::open(&driver, 0).unwrap()),
            Device::from_amd(AmdDevice::open(&driver, 1).unwrap()),
        )
    };
    let (d0, d1) = open_pair();
    let lib = d0.compile(SRC).unwrap();
    let add1 = d1.program(&lib, "add_one").unwrap();
    let on1 = d1.alloc(100 * 4).unwrap();
    on1.write(&[5i32; 100]).unwrap();
    let mut g = GraphBuilder::new();
    g.launch(
        &add1,
        &[GraphArg::Buffer(&on1), GraphArg::Value(hcq::Arg::I32(100))],
        [2.into(), 1.into(), 1.into()],
        [64.into(), 1.into(), 1.into()],
    )
    .unwrap();
    let graph = g.build().unwrap();
    graph.replay(&[], &[]).unwrap();
    assert_eq!(on1.read::<i32>().unwrap(), vec![6; 100]);

    let store = d1.program(&lib, "store_to").unwrap();
    store
        .launch(&[Arg::U64(0x20_0000), Arg::I32(7)], [1, 1, 1], [1, 1, 1])
        .unwrap();
    let e = d1.synchronize().unwrap_err();
    assert!(
        matches!(&e, Error::DeviceFault { message, .. } if message.contains("0x200000")),
        "{e}"
    );
    let lost = |what: &str, r: hcq::Result<()>| match r {
        Err(Error::DeviceLost { device, message }) => {
            assert!(
                device.ends_with(":1") && message.contains("0x200000"),
                "{what}: {message}"
            );
        }
        other => panic!("{what}: expected DeviceLost, got {other:?}"),
    };
    lost(
        "launch",
        add1.launch(&[Arg::Buffer(&on1), Arg::I32(100)], [2, 1, 1], [64, 1, 1]),
    );
    lost("replay", graph.replay(&[], &[]));
    lost("synchronize", d1.synchronize());
    let on0 = d0.alloc(100 * 4).unwrap();
    on0.write(&[1i32; 100]).unwrap();
    lost("copy to the lost GPU", on0.copy_to(0, &on1, 0, 400));
    lost("copy from the lost GPU", on1.copy_to(0, &on0, 0, 400));
    // GPU 0 goes on.
    add_one_works(&d0, &lib);

    let (_, d1) = open_pair();
    add_one_works(&d1, &lib);
}
