//! Host memory the GPU reaches directly (`Device::alloc_host`, as `hipHostMalloc`): kernels
//! read and write it in place, copies move between it and device buffers, and the host reads
//! and writes it at once; checked element by element against the host.

use hcq::{Arg, Device, Error};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
// out[i] = in[i] * 3 - 1, for i < n.
KERNEL void triple(int* out, const int* in, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = in[i] * 3 - 1;
}
"#;

const N: usize = 1000;

#[test]
fn kernels_copies_and_the_host_share_pinned_memory() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let triple = dev
        .program(&dev.compile(SRC).expect("compiles with clang-19"), "triple")
        .unwrap();
    let launch = |out: &hcq::Buffer, input: &hcq::Buffer| {
        triple
            .launch(
                &[Arg::Buffer(out), Arg::Buffer(input), Arg::I32(N as i32)],
                [(N as u32).div_ceil(64), 1, 1],
                [64, 1, 1],
            )
            .unwrap()
    };
    let host_in = dev.alloc_host(N * 4).unwrap();
    let host_out = dev.alloc_host(N * 4).unwrap();
    let device = dev.alloc(N * 4).unwrap();
    assert!(host_in.is_host() && !device.is_host());
    let xs: Vec<i32> = (0..N as i32).map(|i| i * 7 - 3000).collect();
    host_in.host_write_at(0, &xs).unwrap();

    // A kernel reads host memory and writes device memory; another reads that and writes host
    // memory, which the host then reads in place.
    launch(&device, &host_in);
    launch(&host_out, &device);
    dev.synchronize().unwrap();
    let got: Vec<i32> = host_out.host_read_range(0, N).unwrap();
    for (i, (&g, &x)) in got.iter().zip(&xs).enumerate() {
        let once = x.wrapping_mul(3).wrapping_sub(1);
        assert_eq!(g, once.wrapping_mul(3).wrapping_sub(1), "element {i}");
    }
    // Copies between host and device memory, both ways, and ordinary reads of host memory.
    let ys: Vec<i32> = (0..N as i32).map(|i| -i).collect();
    host_in.host_write_at(0, &ys).unwrap();
    host_in.copy_to(0, &device, 0, N * 4).unwrap();
    device.copy_to(8, &host_out, 0, N * 4 - 8).unwrap();
    assert_eq!(device.read::<i32>().unwrap(), ys);
    dev.synchronize().unwrap();
    let got: Vec<i32> = host_out.host_read_range(0, N - 2).unwrap();
    assert_eq!(got, ys[2..]);
    assert_eq!(host_out.read_range::<i32>(0, N - 2).unwrap(), ys[2..]);
    // At an offset, through a view.
    let view = host_in.view(40, 400).unwrap();
    view.host_write_at(4, &[11i32, 12]).unwrap();
    assert_eq!(host_in.host_read_range::<i32>(44, 2).unwrap(), [11, 12]);
    assert_eq!(view.host_read_range::<i32>(0, 3).unwrap(), [ys[10], 11, 12]);
    // Filled on the device, read by the host.
    host_out.fill(0x0102_0304u32).unwrap();
    dev.synchronize().unwrap();
    assert!(host_out
        .host_read_range::<u32>(0, N)
        .unwrap()
        .iter()
        .all(|&v| v == 0x0102_0304));
}

#[test]
fn device_memory_and_ranges_past_the_end_are_refused() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let device = dev.alloc(64).unwrap();
    match device.host_write_at(0, &[1u8]) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("alloc_host"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        device.host_read_range::<u8>(0, 1),
        Err(Error::InvalidArgument(_))
    ));
    let host = dev.alloc_host(64).unwrap();
    assert!(matches!(
        host.host_write_at(60, &[1u32, 2]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        host.host_read_range::<u64>(0, 9),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        host.host_read_range::<u64>(0, usize::MAX),
        Err(Error::InvalidArgument(_))
    ));
    // Pinned memory is GTT: the driver's figure of GTT in use grows by it.
    let free = || dev.info().compute.unwrap().gtt_free.unwrap();
    let before = free();
    let big = dev.alloc_host(64 << 20).unwrap();
    let taken = before.saturating_sub(free()) as i64;
    assert!(
        (taken - (64 << 20)).abs() < 1 << 20,
        "GTT in use grew by {taken} bytes"
    );
    drop(big);
    // Host buffers go back to the cache and come back as host buffers.
    drop(host);
    let again = dev.alloc_host(64).unwrap();
    assert!(again.is_host());
    again.host_write_at(0, &[9u8; 64]).unwrap();
    assert_eq!(again.read::<u8>().unwrap(), vec![9u8; 64]);
}
