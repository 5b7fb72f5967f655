//! Copies through the SDMA engine, checked byte for byte, and their ordering with kernels.

use hcq::{Arg, Device};

fn device() -> Device {
    Device::open("amd-emu:0").unwrap()
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const MIB: usize = 1 << 20;

#[test]
fn round_trips_of_every_interesting_size() {
    let dev = device();
    // Around the staging chunk size, around the size from which copies go straight to and
    // from the caller's pages, and one large copy.
    let sizes = [
        0,
        1,
        3,
        4 * MIB - 1,
        4 * MIB,
        4 * MIB + 1,
        16 * MIB - 1,
        16 * MIB,
        16 * MIB + 1,
        100 * MIB,
    ];
    for (i, n) in sizes.into_iter().enumerate() {
        let data = pattern(n, i as u64 + 1);
        let buf = dev.alloc(n.max(1)).unwrap();
        buf.copy_in(0, &data).unwrap();
        let mut back = vec![0xAAu8; n];
        buf.copy_out(0, &mut back).unwrap();
        assert!(
            back == data,
            "size {n}: first difference at {:?}",
            back.iter().zip(&data).position(|(a, b)| a != b)
        );
    }
}

#[test]
fn unaligned_host_slices_and_device_offsets() {
    let dev = device();
    unaligned_round_trips(&dev, 4 * MIB + 77);
    // Large enough for the direct path, which registers the caller's pages with the GPU.
    unaligned_round_trips(&dev, 17 * MIB + 5);
}

fn unaligned_round_trips(dev: &Device, n: usize) {
    let backing = pattern(n + 16, 99);
    let buf = dev.alloc(n + 64).unwrap();
    for (host_off, dev_off) in [(1usize, 3usize), (7, 0), (0, 5), (3, 33)] {
        let src = &backing[host_off..host_off + n];
        buf.copy_in(dev_off, src).unwrap();
        let mut out = vec![0u8; n + 9];
        buf.copy_out(dev_off, &mut out[3..3 + n]).unwrap();
        assert!(
            &out[3..3 + n] == src,
            "host offset {host_off}, device offset {dev_off}"
        );
        assert!(
            out[..3].iter().chain(&out[3 + n..]).all(|&b| b == 0),
            "bytes outside the copy were written"
        );
    }
}

const PAGE: usize = 4096;

/// Copies out into slices starting and ending at every interesting position within a page,
/// inside a larger vector of canary bytes: the bytes around the slice, including those sharing
/// its first and last page, must keep their canaries.
#[test]
fn copy_out_leaves_every_byte_outside_the_slice_alone() {
    let dev = device();
    for n in [16 * MIB - 1, 16 * MIB + 5, 20 * MIB + PAGE] {
        let data = pattern(n, n as u64);
        let buf = dev.alloc(n).unwrap();
        buf.copy_in(0, &data).unwrap();
        let canary = pattern(n + 3 * PAGE, 5);
        let mut host = canary.clone();
        // Where in a page the slice starts: page-aligned, just after, just before the next.
        for start_in_page in [0, 1, 7, PAGE - 1] {
            let base = host.as_ptr() as usize;
            let start = (start_in_page + PAGE - base % PAGE) % PAGE + PAGE;
            buf.copy_out(0, &mut host[start..start + n]).unwrap();
            assert!(
                host[start..start + n] == data,
                "size {n}, start {start_in_page} into a page: first difference at {:?}",
                host[start..start + n]
                    .iter()
                    .zip(&data)
                    .position(|(a, b)| a != b)
            );
            for (i, (&got, &want)) in host.iter().zip(&canary).enumerate() {
                if i < start || i >= start + n {
                    assert_eq!(
                        got, want,
                        "size {n}, start {start_in_page} into a page: byte {i} outside the copy changed"
                    );
                }
            }
            host.copy_from_slice(&canary);
        }
    }
}

#[test]
fn a_copy_inside_one_device() {
    let dev = device();
    let data = pattern(5 * MIB + 3, 7);
    let (a, b) = (
        dev.alloc(data.len()).unwrap(),
        dev.alloc(data.len() + 10).unwrap(),
    );
    a.copy_in(0, &data).unwrap();
    a.copy_to(0, &b, 10, data.len()).unwrap();
    let mut out = vec![0u8; data.len()];
    b.copy_out(10, &mut out).unwrap();
    assert!(out == data);
    assert!(matches!(
        a.copy_to(1, &b, 0, data.len()),
        Err(hcq::Error::InvalidArgument(_))
    ));
}

const INC: &str = r#"
extern "C" __attribute__((global)) void add_into(int* dst, const int* src, int k, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) dst[i] = src[i] + k;
}
"#;

#[test]
fn copies_and_kernels_interleaved_stay_in_order() {
    let dev = device();
    let lib = dev.compile(INC).unwrap();
    let prg = dev.program(&lib, "add_into").unwrap();
    let n = 3000usize;
    let (a, b) = (dev.alloc(n * 4).unwrap(), dev.alloc(n * 4).unwrap());
    let grid = [(n as u32).div_ceil(128), 1, 1];
    let mut results = Vec::new();
    for round in 0..20i32 {
        let host: Vec<i32> = (0..n as i32).map(|i| i * round - 5).collect();
        a.write(&host).unwrap();
        prg.launch(
            &[
                Arg::Buffer(&b),
                Arg::Buffer(&a),
                Arg::I32(round),
                Arg::I32(n as i32),
            ],
            grid,
            [128, 1, 1],
        )
        .unwrap();
        // b = a + round; then a = b + 1 on the GPU, before the next host write lands.
        prg.launch(
            &[
                Arg::Buffer(&a),
                Arg::Buffer(&b),
                Arg::I32(1),
                Arg::I32(n as i32),
            ],
            grid,
            [128, 1, 1],
        )
        .unwrap();
        results.push(a.read::<i32>().unwrap());
    }
    for (round, got) in results.iter().enumerate() {
        let r = round as i32;
        assert_eq!(got.len(), n);
        for (i, &v) in got.iter().enumerate() {
            assert_eq!(v, (i as i32) * r - 5 + r + 1, "round {round} element {i}");
        }
    }
}

const BUILTINS: &str = r#"
extern "C" __attribute__((global)) void dims(unsigned* out) {
  unsigned lx = __builtin_amdgcn_workitem_id_x(), ly = __builtin_amdgcn_workitem_id_y(), lz = __builtin_amdgcn_workitem_id_z();
  unsigned gx = __builtin_amdgcn_workgroup_id_x(), gy = __builtin_amdgcn_workgroup_id_y(), gz = __builtin_amdgcn_workgroup_id_z();
  unsigned bx = __builtin_amdgcn_workgroup_size_x(), by = __builtin_amdgcn_workgroup_size_y(), bz = __builtin_amdgcn_workgroup_size_z();
  unsigned nx = __builtin_amdgcn_grid_size_x(), ny = __builtin_amdgcn_grid_size_y(), nz = __builtin_amdgcn_grid_size_z();
  unsigned x = gx * bx + lx, y = gy * by + ly, z = gz * bz + lz;
  unsigned* o = out + 6 * ((z * ny + y) * nx + x);
  o[0] = bx; o[1] = by; o[2] = bz; o[3] = nx; o[4] = ny; o[5] = nz;
}
"#;

#[test]
fn kernels_read_workgroup_and_grid_sizes() {
    let dev = device();
    let lib = dev.compile(BUILTINS).unwrap();
    let prg = dev.program(&lib, "dims").unwrap();
    let (grid, block) = ([3u32, 2, 2], [8u32, 4, 2]);
    let total: u32 = (0..3).map(|i| grid[i] * block[i]).product();
    let out = dev.alloc(total as usize * 24).unwrap();
    prg.launch(&[Arg::Buffer(&out)], grid, block).unwrap();
    let got: Vec<u32> = out.read().unwrap();
    let want = [
        block[0],
        block[1],
        block[2],
        grid[0] * block[0],
        grid[1] * block[1],
        grid[2] * block[2],
    ];
    for item in got.chunks(6) {
        assert_eq!(item, want);
    }
}
