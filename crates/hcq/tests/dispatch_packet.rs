//! The AQL dispatch packet a kernel reads through `__builtin_amdgcn_dispatch_ptr()`: the
//! launch as work-items, the dimensions, the segment sizes and the kernel-argument address,
//! each field read back by the kernel and checked against the launch.

use hcq::{Arg, Device, LaunchOptions};

const SRC: &str = r#"
extern "C" __attribute__((global)) void where_launched(unsigned* out, int pad) {
  const unsigned char* p = (const unsigned char*)__builtin_amdgcn_dispatch_ptr();
  __attribute__((shared)) int staged[100];
  staged[__builtin_amdgcn_workitem_id_x() % 100] = pad;
  __syncthreads();
  if (__builtin_amdgcn_workgroup_id_x() == 0 && __builtin_amdgcn_workgroup_id_y() == 0 &&
      __builtin_amdgcn_workgroup_id_z() == 0 && __builtin_amdgcn_workitem_id_x() == 0 &&
      __builtin_amdgcn_workitem_id_y() == 0 && __builtin_amdgcn_workitem_id_z() == 0) {
    const unsigned short* h = (const unsigned short*)p;
    const unsigned* w = (const unsigned*)p;
    out[0] = h[1] & 3;
    out[1] = h[2]; out[2] = h[3]; out[3] = h[4];
    out[4] = w[3]; out[5] = w[4]; out[6] = w[5];
    out[7] = w[6];
    out[8] = w[7];
    unsigned long long packet_args = *(const unsigned long long*)(p + 40);
    unsigned long long own_args = (unsigned long long)__builtin_amdgcn_kernarg_segment_ptr();
    out[9] = packet_args == own_args;
    out[10] = packet_args != 0;
    out[11] = staged[0];
  }
}
"#;

#[test]
fn the_dispatch_packet_describes_the_launch() {
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev
        .program(&dev.compile(SRC).unwrap(), "where_launched")
        .unwrap();
    let static_lds = prg.info().unwrap().static_lds;
    assert!(static_lds >= 400, "{static_lds}");
    let out = dev.alloc(12 * 4).unwrap();
    for (global, local, dynamic, dims) in [
        ([3, 1, 1], [64, 1, 1], 0u32, 1u32),
        ([2, 3, 1], [8, 4, 1], 256, 2),
        ([1, 2, 5], [4, 2, 3], 1000, 3),
        ([4, 1, 2], [16, 1, 1], 64, 3),
    ] {
        out.write(&[0xdead_beefu32; 12]).unwrap();
        let options = LaunchOptions {
            dynamic_lds_bytes: dynamic,
            timed: false,
        };
        prg.launch_with(&[Arg::Buffer(&out), Arg::I32(7)], global, local, &options)
            .unwrap();
        let got: Vec<u32> = out.read().unwrap();
        let work_items: Vec<u32> = (0..3).map(|i| global[i] * local[i]).collect();
        let want = [
            dims,
            local[0],
            local[1],
            local[2],
            work_items[0],
            work_items[1],
            work_items[2],
            0,
            static_lds + dynamic,
            1,
            1,
            7,
        ];
        assert_eq!(
            got, want,
            "launch {global:?} x {local:?} with {dynamic} dynamic LDS bytes"
        );
    }
}
