//! Scratch that grows: a kernel with 16 KiB of private memory per work-item loads and runs, the
//! device moving to a larger scratch ring on demand; work queued on the old ring and graphs
//! built against it keep running on it (freeing it early is the use-after-free tinygrad
//! discussed in PR #18024, and the emulated GPU faults on it); a ring too large for VRAM at
//! full occupancy gets fewer slots; a scratch access past what the ring gives a work-item
//! faults.

use hcq::{Arg, Buffer, Device, Error, GraphArg, GraphBuilder, Program};
use hcq_amd::{AmdDevice, AmdDriver};
use hcq_amd_sys::seam::Syscalls;
use hcq_emu::{EmuConfig, EmuKernel};
use std::sync::Arc;

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
static __attribute__((device)) inline int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}
#define BIG 4100
// 4100 ints (16400 bytes) of private memory per work-item, filled and read back out of order.
KERNEL void big_private(const int* in, int* out, int n) {
  int g = gid();
  volatile int buf[BIG];
  for (int i = 0; i < BIG; i++) buf[i] = in[(g + i) % n] ^ (i * 40503);
  int acc = 0;
  for (int i = 0; i < BIG; i++) acc = acc * 31 + buf[(i * 13 + g) % BIG];
  out[g] = acc;
}
#define SMALL 96
KERNEL void small_private(const int* in, int* out, int n) {
  int g = gid();
  volatile int buf[SMALL];
  for (int i = 0; i < SMALL; i++) buf[i] = in[(g + i) % n] * (i + 1);
  int acc = 0;
  for (int i = 0; i < SMALL; i++) acc += buf[(i * 7 + g) % SMALL];
  out[g] = acc;
}
// Keeps the queue busy for a while, without scratch.
KERNEL void spin(int* out, int iterations) {
  int x = gid();
  for (int i = 0; i < iterations; i++) {
    x = x * 1103515245 + 12345;
    __asm__ volatile("" : "+v"(x));
  }
  out[gid()] = x;
}
// Stores to element `index` of a 64-int private array (out of bounds when index >= 64).
KERNEL void poke_private(int* out, int index) {
  volatile int buf[64];
  for (int i = 0; i < 64; i++) buf[i] = i;
  buf[index] = 7;
  out[gid()] = buf[gid() % 64];
}
"#;

const BIG: usize = 4100;
const SMALL: usize = 96;

fn big_model(input: &[i32], g: usize) -> i32 {
    let n = input.len();
    let buf: Vec<i32> = (0..BIG)
        .map(|i| input[(g + i) % n] ^ (i as i32).wrapping_mul(40503))
        .collect();
    (0..BIG).fold(0i32, |acc, i| {
        acc.wrapping_mul(31).wrapping_add(buf[(i * 13 + g) % BIG])
    })
}

fn small_model(input: &[i32], g: usize) -> i32 {
    let n = input.len();
    let buf: Vec<i32> = (0..SMALL)
        .map(|i| input[(g + i) % n].wrapping_mul(i as i32 + 1))
        .collect();
    (0..SMALL).fold(0i32, |acc, i| acc.wrapping_add(buf[(i * 7 + g) % SMALL]))
}

/// A private emulated GPU with `vram` bytes of VRAM, so that each test starts from a device
/// without a scratch ring.
fn device_with_vram(vram: u64) -> Device {
    let kernel: Arc<dyn Syscalls> = Arc::new(EmuKernel::new(EmuConfig {
        gpus: 1,
        vram_bytes: vram,
        ..EmuConfig::default()
    }));
    let driver = AmdDriver::new(kernel, "amd-emu", true).unwrap();
    Device::from_amd(AmdDevice::open(&driver, 0).unwrap())
}

fn device() -> Device {
    device_with_vram(4 << 30)
}

/// Queues `prg(input, out, n)` over `groups` workgroups of `block` work-items.
fn run(prg: &Program, input: &Buffer, out: &Buffer, n: usize, groups: u32, block: u32) {
    prg.launch(
        &[Arg::Buffer(input), Arg::Buffer(out), Arg::I32(n as i32)],
        [groups, 1, 1],
        [block, 1, 1],
    )
    .unwrap();
}

fn filled(dev: &Device, values: &[i32]) -> Buffer {
    let b = dev.alloc(values.len() * 4).unwrap();
    b.write(values).unwrap();
    b
}

fn check(what: &str, got: &[i32], want: impl Fn(usize) -> i32) {
    for (g, &v) in got.iter().enumerate() {
        assert_eq!(v, want(g), "{what}: element {g}");
    }
}

#[test]
fn sixteen_kilobytes_of_private_memory_per_work_item() {
    let dev = device();
    let lib = dev.compile(SRC).unwrap();
    let big = dev.program(&lib, "big_private").unwrap();
    let n = 4 * 64;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 7919 - 100_000).collect();
    let (a, out) = (filled(&dev, &input), filled(&dev, &vec![-1; n]));
    run(&big, &a, &out, n, 4, 64);
    check("big_private", &out.read::<i32>().unwrap(), |g| {
        big_model(&input, g)
    });
}

#[test]
fn work_queued_on_the_old_ring_still_runs_on_it_after_growth() {
    let dev = device();
    let lib = dev.compile(SRC).unwrap();
    let small = dev.program(&lib, "small_private").unwrap();
    let spin = dev.program(&lib, "spin").unwrap();
    let n = 2 * 64;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 31 - 700).collect();
    let a = filled(&dev, &input);
    let sentinel = vec![-1; n];
    let (small_out, spun, big_out) = (
        filled(&dev, &sentinel),
        filled(&dev, &sentinel),
        filled(&dev, &sentinel),
    );
    // small_private waits behind a busy kernel while the ring is replaced.
    spin.launch(
        &[Arg::Buffer(&spun), Arg::I32(300_000)],
        [2, 1, 1],
        [64, 1, 1],
    )
    .unwrap();
    run(&small, &a, &small_out, n, 2, 64);
    // 16400 bytes per work-item: the ring grows.
    let big = dev.program(&lib, "big_private").unwrap();
    run(&big, &a, &big_out, n, 2, 64);
    dev.synchronize().unwrap();
    check(
        "queued small_private",
        &small_out.read::<i32>().unwrap(),
        |g| small_model(&input, g),
    );
    check("big_private", &big_out.read::<i32>().unwrap(), |g| {
        big_model(&input, g)
    });
    // The small kernel runs on the grown ring too.
    let again = filled(&dev, &sentinel);
    run(&small, &a, &again, n, 2, 64);
    check(
        "small_private on the grown ring",
        &again.read::<i32>().unwrap(),
        |g| small_model(&input, g),
    );
}

#[test]
fn a_graph_built_before_growth_replays_on_its_own_ring() {
    let dev = device();
    let lib = dev.compile(SRC).unwrap();
    let small = dev.program(&lib, "small_private").unwrap();
    let n = 2 * 64;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 131 + 9).collect();
    let a = filled(&dev, &input);
    let sentinel = vec![-1; n];
    let first_out = filled(&dev, &sentinel);
    let mut g = GraphBuilder::new();
    let out_slot = g.input(&first_out);
    g.launch(
        &small,
        &[
            GraphArg::Buffer(&a),
            GraphArg::Input(out_slot),
            GraphArg::Value(hcq::Arg::I32(n as i32)),
        ],
        [2.into(), 1.into(), 1.into()],
        [64.into(), 1.into(), 1.into()],
    )
    .unwrap();
    let graph = g.build().unwrap();
    let big = dev.program(&lib, "big_private").unwrap();
    let big_out = filled(&dev, &sentinel);
    run(&big, &a, &big_out, n, 2, 64);
    // Once queued work has drained, only the graph holds the old ring.
    dev.synchronize().unwrap();
    for round in 0..2 {
        let out = filled(&dev, &sentinel);
        graph.replay(&[&out], &[]).unwrap();
        check(
            &format!("graph replay {round}"),
            &out.read::<i32>().unwrap(),
            |g| small_model(&input, g),
        );
    }
    check("big_private", &big_out.read::<i32>().unwrap(), |g| {
        big_model(&input, g)
    });
}

#[test]
fn a_ring_too_large_for_vram_at_full_occupancy_gets_fewer_slots() {
    // 3072 slots of 16400 x 32 bytes would be 1.6 GB; with 512 MiB of VRAM the ring keeps the
    // floor of 32 slots in each of the 6 shader engines (100 MB).
    let dev = device_with_vram(512 << 20);
    let lib = dev.compile(SRC).unwrap();
    let big = dev.program(&lib, "big_private").unwrap();
    let n = 8 * 64;
    let input: Vec<i32> = (0..n as i32).map(|i| (i * 2654435) ^ 0x5a5a).collect();
    let (a, out) = (filled(&dev, &input), filled(&dev, &vec![-1; n]));
    run(&big, &a, &out, n, 8, 64);
    check(
        "big_private with a capped ring",
        &out.read::<i32>().unwrap(),
        |g| big_model(&input, g),
    );
    // A workgroup of 1024 work-items (32 waves) still finds its slots in one shader engine.
    let n = 1024;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 3 - 77).collect();
    let (a, out) = (filled(&dev, &input), filled(&dev, &vec![-1; n]));
    run(&big, &a, &out, n, 1, 1024);
    check(
        "big_private, 1024-item workgroup",
        &out.read::<i32>().unwrap(),
        |g| big_model(&input, g),
    );
}

#[test]
fn a_scratch_access_past_the_work_items_slice_faults() {
    let dev = device();
    let lib = dev.compile(SRC).unwrap();
    let poke = dev.program(&lib, "poke_private").unwrap();
    let out = filled(&dev, &[0; 64]);
    poke.launch(&[Arg::Buffer(&out), Arg::I32(5)], [1, 1, 1], [64, 1, 1])
        .unwrap();
    check("poke_private in bounds", &out.read::<i32>().unwrap(), |g| {
        if g == 5 {
            7
        } else {
            g as i32
        }
    });
    let err = poke
        .launch(
            &[Arg::Buffer(&out), Arg::I32(1 << 20)],
            [1, 1, 1],
            [64, 1, 1],
        )
        .and_then(|()| dev.synchronize())
        .unwrap_err();
    assert!(
        matches!(err, Error::DeviceFault { .. }),
        "a store 4 MiB past a 256-byte private array: {err}"
    );
}
