//! Runs real clang-19 code objects (tests/kernels/kernels.hsaco, built from kernels.hip) and
//! checks every element against a host computation.

mod common;

use common::{run, run_with_cache, Args, Buffer, KERNELS};
use rdna3::{CodeCache, FaultKind};

const N: usize = 1000; // not a multiple of the block size: exercises the bounds check
const BLOCK: u32 = 256;

fn grid() -> [u32; 3] {
    [(N as u32).div_ceil(BLOCK), 1, 1]
}

fn inputs_f32(seed: u32) -> Vec<f32> {
    (0..N)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 2000) as f32 / 16.0 - 60.0
        })
        .collect()
}

fn inputs_u32(seed: u32) -> Vec<u32> {
    (0..N)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed)
                .rotate_left(7)
        })
        .collect()
}

fn binary_f32(kernel: &str, host: impl Fn(f32, f32) -> f32) {
    let (a, b) = (inputs_f32(1), inputs_f32(2));
    let (ba, bb) = (Buffer::from_f32s(&a), Buffer::from_f32s(&b));
    let bc = Buffer::zeroed((N + 8) * 4);
    let args = Args::default()
        .ptr(&bc)
        .ptr(&ba)
        .ptr(&bb)
        .i32(N as i32)
        .i32(BLOCK as i32);
    let stats = run(kernel, &args, grid(), [BLOCK, 1, 1], &[&ba, &bb, &bc])
        .unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(stats.workgroups, u64::from(grid()[0]));
    let c = bc.f32s();
    for i in 0..N {
        assert_eq!(c[i].to_bits(), host(a[i], b[i]).to_bits(), "{kernel}[{i}]");
    }
    assert!(c[N..].iter().all(|&x| x == 0.0), "{kernel} wrote past n");
}

fn binary_i32(kernel: &str, host: impl Fn(u32, u32) -> u32) {
    let (a, b) = (inputs_u32(3), inputs_u32(4));
    let (ba, bb) = (Buffer::from_u32s(&a), Buffer::from_u32s(&b));
    let bc = Buffer::zeroed((N + 8) * 4);
    let args = Args::default()
        .ptr(&bc)
        .ptr(&ba)
        .ptr(&bb)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run(kernel, &args, grid(), [BLOCK, 1, 1], &[&ba, &bb, &bc]).unwrap_or_else(|f| panic!("{f}"));
    let c = bc.u32s();
    for i in 0..N {
        assert_eq!(c[i], host(a[i], b[i]), "{kernel}[{i}]");
    }
    assert!(c[N..].iter().all(|&x| x == 0), "{kernel} wrote past n");
}

#[test]
fn add_f32() {
    binary_f32("add_f32", |x, y| x + y);
}

#[test]
fn mul_f32() {
    binary_f32("mul_f32", |x, y| x * y);
}

#[test]
fn add_i32() {
    binary_i32("add_i32", |x, y| x.wrapping_add(y));
}

#[test]
fn mul_i32() {
    binary_i32("mul_i32", |x, y| x.wrapping_mul(y));
}

#[test]
fn xor_i32() {
    binary_i32("xor_i32", |x, y| x ^ y);
}

#[test]
fn shift_i32() {
    binary_i32("shift_i32", |a, b| {
        let a = a as i32;
        ((a << (b & 31)) ^ (a >> (b & 7)) ^ ((a as u32 >> 3) as i32)) as u32
    });
}

#[test]
fn fma_f32() {
    let (a, b, c) = (inputs_f32(5), inputs_f32(6), inputs_f32(7));
    let (ba, bb, bc) = (
        Buffer::from_f32s(&a),
        Buffer::from_f32s(&b),
        Buffer::from_f32s(&c),
    );
    let bd = Buffer::zeroed(N * 4);
    let args = Args::default()
        .ptr(&bd)
        .ptr(&ba)
        .ptr(&bb)
        .ptr(&bc)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run(
        "fma_f32",
        &args,
        grid(),
        [BLOCK, 1, 1],
        &[&ba, &bb, &bc, &bd],
    )
    .unwrap_or_else(|f| panic!("{f}"));
    let d = bd.f32s();
    for i in 0..N {
        assert_eq!(
            d[i].to_bits(),
            a[i].mul_add(b[i], c[i]).to_bits(),
            "fma_f32[{i}]"
        );
    }
}

#[test]
fn saxpy() {
    let (x, y) = (inputs_f32(8), inputs_f32(9));
    let (bx, by) = (Buffer::from_f32s(&x), Buffer::from_f32s(&y));
    let alpha = 1.75f32;
    let args = Args::default()
        .ptr(&by)
        .ptr(&bx)
        .f32(alpha)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("saxpy", &args, grid(), [BLOCK, 1, 1], &[&bx, &by]).unwrap_or_else(|f| panic!("{f}"));
    let out = by.f32s();
    for i in 0..N {
        assert_eq!(
            out[i].to_bits(),
            alpha.mul_add(x[i], y[i]).to_bits(),
            "saxpy[{i}]"
        );
    }
}

#[test]
fn empty_kernel() {
    let stats = run("empty_kernel", &Args::default(), [3, 2, 1], [64, 1, 1], &[]).unwrap();
    assert_eq!(stats.workgroups, 6);
    assert_eq!(stats.waves, 12);
}

/// A kernel whose workgroups took so little host time last dispatch that the whole dispatch
/// would be shorter than waking a helper thread runs on the calling thread alone; a long one
/// is offered to every core.
#[test]
fn short_dispatches_run_on_one_host_thread() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let cache = CodeCache::new();
    let dispatch = |grid: u32| {
        run_with_cache(
            &cache,
            KERNELS,
            "empty_kernel",
            &Args::default(),
            [grid, 1, 1],
            [32, 1, 1],
            &[],
        )
        .unwrap()
    };
    // Nothing known yet: shared. The first dispatch may include compiling the kernel's
    // blocks (`HCQ_EMU_JIT=eager`), which makes it look long; the second one measures.
    assert_eq!(dispatch(4).threads, cores.min(4));
    dispatch(4);
    assert_eq!(dispatch(4).threads, 1);
    // 20000 workgroups take milliseconds.
    assert_eq!(dispatch(20_000).threads, cores);
    assert_eq!(dispatch(20_000).threads, cores);
}

#[test]
fn unmapped_store_is_a_vm_fault_naming_the_address() {
    let bad: u64 = 0x0000_1234_5678_0000;
    let args = Args::default().raw_ptr(bad).i32(7);
    let fault = run("store_to", &args, [1, 1, 1], [32, 1, 1], &[]).unwrap_err();
    assert_eq!(
        fault.kind,
        FaultKind::VmFault {
            addr: bad,
            write: true
        }
    );
    let text = fault.to_string();
    assert!(text.contains("0x123456780000"), "{text}");
    assert!(text.contains("global_store_b32"), "{text}");
}

#[test]
fn endless_loop_exceeds_the_step_budget() {
    let flag = Buffer::from_u32s(&[1]);
    let args = Args::default().ptr(&flag);
    let fault = run("spin", &args, [1, 1, 1], [32, 1, 1], &[&flag]).unwrap_err();
    assert_eq!(fault.kind, FaultKind::StepBudgetExceeded { steps: 100_000 });
    // With the flag clear the same kernel terminates.
    let flag = Buffer::from_u32s(&[0]);
    let args = Args::default().ptr(&flag);
    run("spin", &args, [1, 1, 1], [32, 1, 1], &[&flag]).unwrap();
}

#[test]
fn reduce_sum_with_lds_barriers_calls_and_atomics() {
    let input = inputs_u32(10);
    let bin = Buffer::from_u32s(&input);
    let total = Buffer::zeroed(4);
    let args = Args::default()
        .ptr(&total)
        .ptr(&bin)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("reduce_sum", &args, grid(), [BLOCK, 1, 1], &[&bin, &total])
        .unwrap_or_else(|f| panic!("{f}"));
    let expected = input.iter().fold(0u32, |acc, &x| acc.wrapping_add(x));
    assert_eq!(total.u32s()[0], expected);
}

#[test]
fn histogram_with_global_atomics() {
    let input = inputs_u32(11);
    let bin = Buffer::from_u32s(&input);
    let bins = Buffer::zeroed(16 * 4);
    let args = Args::default()
        .ptr(&bins)
        .ptr(&bin)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("histogram", &args, grid(), [BLOCK, 1, 1], &[&bin, &bins])
        .unwrap_or_else(|f| panic!("{f}"));
    let mut expected = [0u32; 16];
    for x in &input {
        expected[(x % 16) as usize] += 1;
    }
    assert_eq!(bins.u32s(), expected);
}

#[test]
fn div_sqrt_f32() {
    let a = inputs_f32(12);
    let b: Vec<f32> = inputs_f32(13)
        .iter()
        .map(|x| if *x == 0.0 { 3.0 } else { *x })
        .collect();
    let (ba, bb) = (Buffer::from_f32s(&a), Buffer::from_f32s(&b));
    let out = Buffer::zeroed(N * 4);
    let args = Args::default()
        .ptr(&out)
        .ptr(&ba)
        .ptr(&bb)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run(
        "div_sqrt_f32",
        &args,
        grid(),
        [BLOCK, 1, 1],
        &[&ba, &bb, &out],
    )
    .unwrap_or_else(|f| panic!("{f}"));
    let got = out.f32s();
    for i in 0..N {
        let expected = a[i] / b[i] + a[i].abs().sqrt();
        assert_eq!(
            got[i].to_bits(),
            expected.to_bits(),
            "div_sqrt_f32[{i}]: {} / {}",
            a[i],
            b[i]
        );
    }
}

#[test]
fn divmod_i32() {
    let a: Vec<u32> = inputs_u32(14);
    let b: Vec<u32> = inputs_u32(15)
        .iter()
        .map(|x| (x >> (x & 31)).max(1))
        .collect();
    let (ba, bb) = (Buffer::from_u32s(&a), Buffer::from_u32s(&b));
    let (q, r) = (Buffer::zeroed(N * 4), Buffer::zeroed(N * 4));
    let args = Args::default()
        .ptr(&q)
        .ptr(&r)
        .ptr(&ba)
        .ptr(&bb)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run(
        "divmod_i32",
        &args,
        grid(),
        [BLOCK, 1, 1],
        &[&ba, &bb, &q, &r],
    )
    .unwrap_or_else(|f| panic!("{f}"));
    let (q, r) = (q.u32s(), r.u32s());
    for i in 0..N {
        let (x, y) = (a[i] as i32, b[i] as i32);
        assert_eq!(q[i] as i32, x.wrapping_div(y), "q[{i}] = {x} / {y}");
        assert_eq!(r[i] as i32, x.wrapping_rem(y), "r[{i}] = {x} % {y}");
    }
}

#[test]
fn f64_math() {
    let a = inputs_f32(16);
    let b = inputs_u32(17);
    let (ba, bb) = (Buffer::from_f32s(&a), Buffer::from_u32s(&b));
    let out = Buffer::zeroed(N * 8);
    let args = Args::default()
        .ptr(&out)
        .ptr(&ba)
        .ptr(&bb)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("f64_math", &args, grid(), [BLOCK, 1, 1], &[&ba, &bb, &out])
        .unwrap_or_else(|f| panic!("{f}"));
    let bytes = out.read();
    for i in 0..N {
        let got = f64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        let x = f64::from(a[i]) * 1.5 + f64::from(b[i] as i32);
        let expected = x.mul_add(x, -2.0) + f64::from(b[i]);
        assert_eq!(got.to_bits(), expected.to_bits(), "f64_math[{i}]");
    }
}

#[test]
fn convert() {
    let a = inputs_f32(18);
    let b = inputs_u32(19);
    let (ba, bb) = (Buffer::from_f32s(&a), Buffer::from_u32s(&b));
    let (ti, tu, tf) = (
        Buffer::zeroed(N * 4),
        Buffer::zeroed(N * 4),
        Buffer::zeroed(N * 4),
    );
    let args = Args::default()
        .ptr(&ti)
        .ptr(&tu)
        .ptr(&tf)
        .ptr(&ba)
        .ptr(&bb)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run(
        "convert",
        &args,
        grid(),
        [BLOCK, 1, 1],
        &[&ba, &bb, &ti, &tu, &tf],
    )
    .unwrap_or_else(|f| panic!("{f}"));
    let (ti, tu, tf) = (ti.u32s(), tu.u32s(), tf.f32s());
    for i in 0..N {
        assert_eq!(ti[i] as i32, a[i] as i32, "to_int[{i}]");
        assert_eq!(tu[i], a[i].abs() as u32, "to_uint[{i}]");
        let expected = (b[i] as i32) as f32 + b[i] as f32;
        assert_eq!(tf[i].to_bits(), expected.to_bits(), "to_float[{i}]");
    }
}

#[test]
fn loop_minmax() {
    let a = inputs_u32(20);
    let ba = Buffer::from_u32s(&a);
    let out = Buffer::zeroed(N * 4);
    let args = Args::default()
        .ptr(&out)
        .ptr(&ba)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("loop_minmax", &args, grid(), [BLOCK, 1, 1], &[&ba, &out])
        .unwrap_or_else(|f| panic!("{f}"));
    let got = out.u32s();
    for i in 0..N {
        let mut acc = 0i32;
        let count = (a[i] & 15) as usize;
        for k in 0..count {
            let v = a[(i + k) % N] as i32;
            acc = if k & 1 == 1 {
                acc.max(v)
            } else {
                (acc ^ v).min(v)
            };
        }
        let expected = if acc > 0 { acc } else { acc.wrapping_neg() };
        assert_eq!(got[i] as i32, expected, "loop_minmax[{i}]");
    }
}

#[test]
fn transpose_2d() {
    let (width, height) = (40usize, 24usize);
    let input: Vec<f32> = (0..width * height).map(|i| i as f32).collect();
    let bin = Buffer::from_f32s(&input);
    let out = Buffer::zeroed(width * height * 4);
    let args = Args::default()
        .ptr(&out)
        .ptr(&bin)
        .i32(width as i32)
        .i32(height as i32);
    let grid = [(width as u32).div_ceil(16), (height as u32).div_ceil(16), 1];
    run("transpose", &args, grid, [16, 16, 1], &[&bin, &out]).unwrap_or_else(|f| panic!("{f}"));
    let got = out.f32s();
    for y in 0..height {
        for x in 0..width {
            assert_eq!(got[x * height + y], input[y * width + x], "({x},{y})");
        }
    }
}

#[test]
fn mix_u64() {
    let a: Vec<u64> = (0..N as u64)
        .map(|i| i.wrapping_mul(0x0123_4567_89ab_cdef).rotate_left(i as u32))
        .collect();
    let bytes: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
    let ba = Buffer::from_bytes(&bytes);
    let out = Buffer::zeroed(N * 8);
    let args = Args::default()
        .ptr(&out)
        .ptr(&ba)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("mix_u64", &args, grid(), [BLOCK, 1, 1], &[&ba, &out]).unwrap_or_else(|f| panic!("{f}"));
    let got = out.read();
    for (i, x) in a.iter().enumerate() {
        let value = u64::from_le_bytes(got[i * 8..i * 8 + 8].try_into().unwrap());
        let expected =
            x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (x >> 17) ^ (x << 5) ^ x.wrapping_add(12345);
        assert_eq!(value, expected, "mix_u64[{i}]");
    }
}

#[test]
fn call_with_scratch() {
    let a = inputs_u32(21);
    let ba = Buffer::from_u32s(&a);
    let out = Buffer::zeroed(N * 4);
    let args = Args::default()
        .ptr(&out)
        .ptr(&ba)
        .i32(N as i32)
        .i32(BLOCK as i32);
    run("call_scratch", &args, grid(), [BLOCK, 1, 1], &[&ba, &out])
        .unwrap_or_else(|f| panic!("{f}"));
    let got = out.u32s();
    for i in 0..N {
        let (x, y) = (a[i] as i32, i as i32);
        let local = [x, y, x ^ y, x.wrapping_add(y)];
        let expected = local[(x & 3) as usize]
            .wrapping_mul(3)
            .wrapping_add(local[(y & 3) as usize]);
        assert_eq!(got[i] as i32, expected, "call_scratch[{i}]");
    }
}
