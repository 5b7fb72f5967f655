//! A kernel compiled from source, run through the KFD driver on the emulated GPU, every element
//! checked against the host.

use hcq::{Arg, Device};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
KERNEL void scale_add(float* out, const float* x, const float* y, float s, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = s * x[i] + y[i];
}
KERNEL void iota_2d(unsigned* out, int width) {
  unsigned x = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  unsigned y = __builtin_amdgcn_workgroup_id_y() * __builtin_amdgcn_workgroup_size_y() + __builtin_amdgcn_workitem_id_y();
  out[y * width + x] = y * 1000 + x;
}
"#;

fn device() -> Device {
    Device::open("amd-emu:0").expect("the emulated GPU opens")
}

#[test]
fn compiled_kernel_runs_and_every_element_matches_the_host() {
    let dev = device();
    let lib = dev.compile(SRC).expect("compiles with clang-19");
    let prg = dev.program(&lib, "scale_add").unwrap();
    for n in [1usize, 31, 32, 33, 1000, 4099] {
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
        let y: Vec<f32> = (0..n).map(|i| (i as f32).sqrt()).collect();
        let (bx, by, bo) = (
            dev.alloc(n * 4).unwrap(),
            dev.alloc(n * 4).unwrap(),
            dev.alloc(n * 4).unwrap(),
        );
        bx.write(&x).unwrap();
        by.write(&y).unwrap();
        bo.write(&vec![f32::NAN; n]).unwrap();
        let s = 3.5f32;
        let grid = [(n as u32).div_ceil(64), 1, 1];
        prg.launch(
            &[
                Arg::Buffer(&bo),
                Arg::Buffer(&bx),
                Arg::Buffer(&by),
                Arg::F32(s),
                Arg::I32(n as i32),
            ],
            grid,
            [64, 1, 1],
        )
        .unwrap();
        let out: Vec<f32> = bo.read().unwrap();
        for i in 0..n {
            assert_eq!(
                out[i].to_bits(),
                s.mul_add(x[i], y[i]).to_bits(),
                "n={n} element {i}"
            );
        }
    }
}

#[test]
fn two_dimensional_grid_and_workgroup() {
    let dev = device();
    let lib = dev.compile(SRC).unwrap();
    let prg = dev.program(&lib, "iota_2d").unwrap();
    let (w, h) = (48u32, 20u32);
    let out = dev.alloc((w * h * 4) as usize).unwrap();
    let t = prg
        .launch_timed(
            &[Arg::Buffer(&out), Arg::I32(w as i32)],
            [w / 16, h / 4, 1],
            [16, 4, 1],
        )
        .unwrap();
    assert!(t.as_nanos() > 0, "GPU time is measured");
    let got: Vec<u32> = out.read().unwrap();
    for y in 0..h {
        for x in 0..w {
            assert_eq!(got[(y * w + x) as usize], y * 1000 + x, "({x},{y})");
        }
    }
}

#[test]
fn many_launches_queue_in_order_without_waiting() {
    let dev = device();
    let lib = dev.compile(SRC).unwrap();
    let prg = dev.program(&lib, "scale_add").unwrap();
    let n = 256;
    let acc = dev.alloc(n * 4).unwrap();
    let ones = dev.alloc(n * 4).unwrap();
    acc.write(&vec![0f32; n]).unwrap();
    ones.write(&vec![1f32; n]).unwrap();
    // acc = 1 * ones + acc, 300 times, all queued before any wait.
    for _ in 0..300 {
        prg.launch(
            &[
                Arg::Buffer(&acc),
                Arg::Buffer(&ones),
                Arg::Buffer(&acc),
                Arg::F32(1.0),
                Arg::I32(n as i32),
            ],
            [4, 1, 1],
            [64, 1, 1],
        )
        .unwrap();
    }
    let got: Vec<f32> = acc.read().unwrap();
    assert!(got.iter().all(|&v| v == 300.0), "{:?}", &got[..4]);
}

#[test]
fn opening_a_device_twice_gives_the_same_device_and_bad_names_are_errors() {
    let a = device();
    let b = Device::open("amd-emu:0").unwrap();
    assert_eq!(a.name(), b.name());
    assert!(matches!(
        Device::open("amd-emu:99"),
        Err(hcq::Error::NoDevice(_))
    ));
    assert!(matches!(
        Device::open("cuda:0"),
        Err(hcq::Error::NoDevice(_))
    ));
    assert!(matches!(
        Device::open("amd-emu:x"),
        Err(hcq::Error::NoDevice(_))
    ));
    let info = a.info();
    assert_eq!(info.arch, "gfx1100");
    assert!(info.emulated);
}

#[test]
fn copies_check_their_bounds() {
    let dev = device();
    let b = dev.alloc(10).unwrap();
    assert!(matches!(
        b.copy_in(8, &[0u8; 4]),
        Err(hcq::Error::InvalidArgument(_))
    ));
    let mut out = [0u8; 11];
    assert!(matches!(
        b.copy_out(0, &mut out),
        Err(hcq::Error::InvalidArgument(_))
    ));
    b.copy_in(3, &[1, 2, 3]).unwrap();
    let mut back = [0u8; 3];
    b.copy_out(3, &mut back).unwrap();
    assert_eq!(back, [1, 2, 3]);
}
