//! control.hip: compares, selects, divergent and uniform control flow.

use crate::common::*;
use crate::CONTROL;
use hcq::Arg;

const LOCAL: u32 = 64;
const SENTINEL: i32 = 0x7ead_beef;

fn run_ia(name: &str, out: &hcq::Buffer, a: &hcq::Buffer, n: usize) {
    run(
        CONTROL,
        name,
        &[Arg::Buffer(out), Arg::Buffer(a), Arg::I32(n as i32)],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
}

#[test]
// `!(x < y)` and `!(x >= y)` are the point: they differ from `x >= y` / `x < y` on NaN.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn cmp_f32() {
    let n = 2400;
    let mut rng = Rng::new(401);
    let a: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    // b often equals a, or is its negation (signed zeros), to hit the equal cases.
    let b: Vec<f32> = (0..n)
        .map(|i| match rng.range(0, 5) {
            0 => a[i],
            1 => -a[i],
            _ => rng.f32_mixed(),
        })
        .collect();
    let (flags, sel) = (filled(n, 0x5a5a5a5au32), filled(n * 3, f32::NAN));
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        CONTROL,
        "cmp_f32",
        &[
            Arg::Buffer(&flags),
            Arg::Buffer(&sel),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gs): (Vec<u32>, Vec<f32>) = (read(&flags), read(&sel));
    let mut ck = Check::new("cmp_f32");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let bits = [
            x < y,
            x <= y,
            x > y,
            x >= y,
            x == y,
            x != y,
            x.is_nan(),
            x.is_infinite(),
            x.is_nan() || y.is_nan(),
            !(x < y),
            y.is_finite(),
            x.is_sign_negative(),
        ];
        let want = bits
            .iter()
            .enumerate()
            .fold(0u32, |acc, (k, &b)| acc | ((b as u32) << k));
        ck.eq(gf[i], want, || format!("flags a={x:e} b={y:e} (i={i})"));
        ck.f32(gs[3 * i], if x < y { x } else { y }, || {
            format!("select< a={x:e} b={y:e} (i={i})")
        });
        ck.f32(gs[3 * i + 1], if !(x >= y) { y * 2.0 } else { x }, || {
            format!("select!>= a={x:e} b={y:e} (i={i})")
        });
        let w2 = if x == y {
            1.0
        } else if x.is_nan() {
            -1.0
        } else {
            0.5
        };
        ck.f32(gs[3 * i + 2], w2, || {
            format!("select== a={x:e} b={y:e} (i={i})")
        });
    }
    ck.finish();
}

#[test]
fn cmp_int() {
    let n = 2000;
    let mut rng = Rng::new(402);
    let a: Vec<i64> = (0..n).map(|_| rng.i64_varied()).collect();
    let b: Vec<i64> = (0..n)
        .map(|i| match rng.range(0, 4) {
            0 => a[i],
            1 => a[i] ^ 1,
            2 => (a[i] as i32 as i64) ^ (rng.next_u64() << 32) as i64,
            _ => rng.i64_varied(),
        })
        .collect();
    let (flags, sel) = (
        filled(n, 0x5a5a5a5au32),
        filled(n * 2, 0x5a5a5a5a5a5a5a5ai64),
    );
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        CONTROL,
        "cmp_int",
        &[
            Arg::Buffer(&flags),
            Arg::Buffer(&sel),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gs): (Vec<u32>, Vec<i64>) = (read(&flags), read(&sel));
    let mut ck = Check::new("cmp_int");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (ux, uy) = (x as u64, y as u64);
        let (x32, y32, u32_, v32) = (x as i32, y as i32, x as u32, y as u32);
        let bits = [
            x < y,
            x <= y,
            x == y,
            ux < uy,
            ux >= uy,
            x32 < y32,
            x32 >= y32,
            u32_ < v32,
            u32_ > v32,
            x32 != y32,
            x > 0,
            ux > 0xffff_ffff,
        ];
        let want = bits
            .iter()
            .enumerate()
            .fold(0u32, |acc, (k, &b)| acc | ((b as u32) << k));
        ck.eq(gf[i], want, || format!("flags a={x:#x} b={y:#x} (i={i})"));
        let s0 = if x < y {
            ux.wrapping_sub(uy) as i64
        } else {
            uy.wrapping_mul(3) as i64
        };
        let s1 = if u32_ < v32 { x32 as i64 } else { v32 as i64 };
        ck.eq(gs[2 * i], s0, || {
            format!("select0 a={x:#x} b={y:#x} (i={i})")
        });
        ck.eq(gs[2 * i + 1], s1, || {
            format!("select1 a={x:#x} b={y:#x} (i={i})")
        });
    }
    ck.finish();
}

#[test]
fn divergent_branches() {
    let n = 2500;
    let mut rng = Rng::new(403);
    let a: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let (out, ba) = (filled(n, SENTINEL), upload(&a));
    run_ia("divergent_branches", &out, &ba, n);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("divergent_branches");
    for i in 0..n {
        let x = a[i];
        let ux = x as u32;
        let r = if x & 1 != 0 {
            if x & 2 != 0 {
                ux.wrapping_mul(3).wrapping_add(1) as i32
            } else {
                x ^ 0x5555
            }
        } else if x & 4 != 0 {
            let r = (ux >> 3) as i32;
            if r & 8 != 0 {
                -r
            } else {
                r
            }
        } else if x & 8 != 0 {
            ux.wrapping_mul(ux) as i32
        } else if x < 0 {
            1
        } else {
            2
        };
        ck.eq(got[i], r, || format!("a={x:#x} (i={i})"));
    }
    ck.finish();
}

#[test]
fn early_return() {
    let n = 2200;
    let mut rng = Rng::new(404);
    let a: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let (out, ba) = (filled(n * 2, SENTINEL), upload(&a));
    run_ia("early_return", &out, &ba, n);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("early_return");
    for i in 0..n {
        let x = a[i];
        let (mut w0, mut w1) = (SENTINEL, SENTINEL);
        if x & 3 != 0 {
            w0 = x;
            if !(0..8).any(|k| (x >> k) & 15 == 15) {
                w1 = x & 0xffff;
            }
        }
        ck.eq(got[2 * i], w0, || format!("first store, a={x:#x} (i={i})"));
        ck.eq(got[2 * i + 1], w1, || {
            format!("second store, a={x:#x} (i={i})")
        });
    }
    ck.finish();
}

#[test]
fn data_loops() {
    let n = 1200;
    let mut rng = Rng::new(405);
    let a: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let (out, ba) = (filled(n * 2, SENTINEL), upload(&a));
    run_ia("data_loops", &out, &ba, n);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("data_loops");
    for i in 0..n {
        let mut x = a[i] % 100_000 + 1;
        let mut steps = 0;
        while x != 1 && steps < 500 {
            x = if x & 1 != 0 { 3 * x + 1 } else { x >> 1 };
            steps += 1;
        }
        let mut acc = 0;
        for k in 0..32 {
            if (a[i] >> k) & 1 == 0 {
                continue;
            }
            acc += k;
            if acc > 100 {
                break;
            }
        }
        ck.eq(got[2 * i], steps, || {
            format!("collatz steps of {} (i={i})", a[i] % 100_000 + 1)
        });
        ck.eq(got[2 * i + 1], acc, || {
            format!("bit loop of {:#x} (i={i})", a[i])
        });
    }
    ck.finish();
}

#[test]
fn loop_float() {
    let n = 1000;
    let mut rng = Rng::new(406);
    let a: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let (out, ba) = (filled(n, f32::NAN), upload(&a));
    run_ia("loop_float", &out, &ba, n);
    let got: Vec<f32> = read(&out);
    let mut ck = Check::new("loop_float");
    for i in 0..n {
        let (count, c) = (a[i] & 63, (a[i] >> 6) & 7);
        let mut s = 0.0f32;
        for k in 0..count {
            s += 1.0 / (k + 1 + c) as f32;
        }
        ck.f32(got[i], s, || format!("count={count} c={c} (i={i})"));
    }
    ck.finish();
}

#[test]
fn switch_cases() {
    let n = 2000;
    let mut rng = Rng::new(407);
    let a: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let (out, ba) = (filled(n, SENTINEL), upload(&a));
    run_ia("switch_cases", &out, &ba, n);
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("switch_cases");
    for i in 0..n {
        let x = a[i];
        let r = match (x as u32) % 7 {
            0 => x.wrapping_mul(5),
            1 => x.wrapping_add(1000) ^ 0x3c3c,
            2 => 0x3c3c,
            3 => x >> 4,
            5 => x.wrapping_neg(),
            _ => 42,
        };
        ck.eq(got[i], r, || {
            format!("a={x} case {} (i={i})", (x as u32) % 7)
        });
    }
    ck.finish();
}

#[test]
fn uniform_branch() {
    let n = 1500;
    let mut rng = Rng::new(408);
    let a: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let ba = upload(&a);
    let mut ck = Check::new("uniform_branch");
    for (mode, reps) in [(0, 3), (1, 17), (2, 9), (1, 0)] {
        let out = filled(n, SENTINEL);
        run(
            CONTROL,
            "uniform_branch",
            &[
                Arg::Buffer(&out),
                Arg::Buffer(&ba),
                Arg::I32(mode),
                Arg::I32(reps),
                Arg::I32(n as i32),
            ],
            groups(n, LOCAL),
            [LOCAL, 1, 1],
        );
        let got: Vec<i32> = read(&out);
        for i in 0..n {
            let mut x = a[i];
            match mode {
                1 => {
                    for k in 0..reps {
                        x = x.wrapping_mul(3).wrapping_add(k);
                    }
                }
                2 => {
                    for _ in 0..reps {
                        x ^= x << 1;
                    }
                }
                _ => x = x.wrapping_neg(),
            }
            ck.eq(got[i], x, || {
                format!("mode={mode} reps={reps} a={} (i={i})", a[i])
            });
        }
    }
    ck.finish();
}
