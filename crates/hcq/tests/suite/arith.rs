//! arith.hip: f32/f64/f16 and integer arithmetic, division and remainder.

use crate::common::*;
use crate::ARITH;
use hcq::Arg;

const LOCAL: u32 = 64;

#[test]
fn arith_f32() {
    let n = 2000;
    let mut rng = Rng::new(1);
    let a: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    let c: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    let out = filled(n * 8, f32::NAN);
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        ARITH,
        "arith_f32",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let names = ["add", "sub", "mul", "div", "fma", "min", "max", "-a*|b|"];
    let mut ck = Check::new("arith_f32");
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let want = [
            x + y,
            x - y,
            x * y,
            x / y,
            x.mul_add(y, z),
            isa_min32(x, y),
            isa_max32(x, y),
            (-x) * y.abs(),
        ];
        for k in 0..8 {
            ck.f32(got[8 * i + k], want[k], || {
                format!("{} a={x:e} b={y:e} c={z:e} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn arith_f64() {
    let n = 1500;
    let mut rng = Rng::new(2);
    let a: Vec<f64> = (0..n).map(|_| rng.f64_mixed()).collect();
    let b: Vec<f64> = (0..n).map(|_| rng.f64_mixed()).collect();
    let c: Vec<f64> = (0..n).map(|_| rng.f64_mixed()).collect();
    let out = filled(n * 8, f64::NAN);
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        ARITH,
        "arith_f64",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<f64> = read(&out);
    let names = ["add", "sub", "mul", "div", "fma", "min", "max", "sqrt|a|"];
    let mut ck = Check::new("arith_f64");
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let want = [
            x + y,
            x - y,
            x * y,
            x / y,
            x.mul_add(y, z),
            isa_min(x, y),
            isa_max(x, y),
            x.abs().sqrt(),
        ];
        for k in 0..8 {
            ck.f64(got[8 * i + k], want[k], || {
                format!("{} a={x:e} b={y:e} c={z:e} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn arith_f16() {
    let n = 2500;
    let mut rng = Rng::new(3);
    let a: Vec<u16> = (0..n).map(|_| rng.f16_mixed()).collect();
    let b: Vec<u16> = (0..n).map(|_| rng.f16_mixed()).collect();
    let c: Vec<u16> = (0..n).map(|_| rng.f16_mixed()).collect();
    let out = filled(n * 7, 0x7e00u16);
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        ARITH,
        "arith_f16",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<u16> = read(&out);
    let mut ck = Check::new("arith_f16");
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let (fx, fy) = (f16_to_f64(x), f16_to_f64(y));
        let ctx = |op: &str| {
            format!(
                "{op} a={fx:e} ({x:#06x}) b={fy:e} ({y:#06x}) c={:e} (i={i})",
                f16_to_f64(z)
            )
        };
        // Sums, differences and products of two f16 are exact in f64: one rounding to f16.
        ck.f16(got[7 * i], f16(fx + fy), || ctx("add"));
        ck.f16(got[7 * i + 1], f16(fx - fy), || ctx("sub"));
        ck.f16(got[7 * i + 2], f16(fx * fy), || ctx("mul"));
        ck.f16(got[7 * i + 3], f16_fma(x, y, z), || ctx("fma"));
        ck.f16(got[7 * i + 4], f16(isa_min(fx, fy)), || ctx("min"));
        ck.f16(got[7 * i + 5], f16(isa_max(fx, fy)), || ctx("max"));
        // f16 division goes through v_rcp_f32 (1 ulp in f32) and v_div_fixup_f16: within
        // 1 f16 ulp of the correctly rounded quotient.
        ck.f16_ulp(got[7 * i + 6], f16(fx / fy), 1, || ctx("div"));
    }
    ck.finish();
}

#[test]
fn arith_i32() {
    let n = 2100;
    let mut rng = Rng::new(4);
    let a: Vec<i32> = (0..n).map(|_| rng.i32_varied()).collect();
    let b: Vec<i32> = (0..n).map(|_| rng.i32_varied()).collect();
    let c: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let out = filled(n * 16, 0x5a5a5a5ai32);
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        ARITH,
        "arith_i32",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("arith_i32");
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let (ux, uy, uz) = (x as u32, y as u32, z as u32);
        let want = [
            ux.wrapping_add(uy) as i32,
            ux.wrapping_sub(uy) as i32,
            ux.wrapping_mul(uy) as i32,
            ((x as i64 * y as i64) >> 32) as i32,
            ((ux as u64 * uy as u64) >> 32) as i32,
            (ux << (uy & 31)) as i32,
            x >> (y & 31),
            (ux >> (uy & 31)) as i32,
            x.min(y),
            x.max(y),
            ux.min(uy) as i32,
            ux.max(uy) as i32,
            (ux & 0xff_ffff).wrapping_mul(uy & 0xff_ffff) as i32,
            (((ux & 0xff_ffff) as u64 * (uy & 0xff_ffff) as u64) >> 32) as i32,
            (ux.wrapping_add(uy) < ux) as i32,
            ux.wrapping_mul(0x9e37_79b9).wrapping_add(uz) as i32,
        ];
        for (k, w) in want.iter().enumerate() {
            ck.eq(got[16 * i + k], *w, || {
                format!("op {k} a={x:#x} b={y:#x} c={z:#x} (i={i})")
            });
        }
    }
    ck.finish();
}

#[test]
fn arith_i64() {
    let n = 1700;
    let mut rng = Rng::new(5);
    let a: Vec<i64> = (0..n).map(|_| rng.i64_varied()).collect();
    let b: Vec<i64> = (0..n).map(|_| rng.i64_varied()).collect();
    let out = filled(n * 12, 0x5a5a5a5a5a5a5a5ai64);
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        ARITH,
        "arith_i64",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("arith_i64");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (ux, uy) = (x as u64, y as u64);
        let want = [
            ux.wrapping_add(uy) as i64,
            ux.wrapping_sub(uy) as i64,
            ux.wrapping_mul(uy) as i64,
            (ux << (uy & 63)) as i64,
            x >> (y & 63),
            (ux >> (uy & 63)) as i64,
            x.min(y),
            x.max(y),
            ux.min(uy) as i64,
            ux.max(uy) as i64,
            ((ux as u128 * uy as u128) >> 64) as i64,
            ux.wrapping_neg() as i64,
        ];
        for (k, w) in want.iter().enumerate() {
            ck.eq(got[12 * i + k], *w, || {
                format!("op {k} a={x:#x} b={y:#x} (i={i})")
            });
        }
    }
    ck.finish();
}

#[test]
fn arith_i8_i16() {
    let n = 1900;
    let mut rng = Rng::new(6);
    let a8: Vec<i8> = (0..n).map(|_| rng.u32() as i8).collect();
    let b8: Vec<i8> = (0..n).map(|_| rng.u32() as i8).collect();
    let a16: Vec<i16> = (0..n).map(|_| rng.u32() as i16).collect();
    let b16: Vec<i16> = (0..n).map(|_| rng.u32() as i16).collect();
    let o8 = filled(n * 6, 0x5ai8);
    let o16 = filled(n * 6, 0x5a5ai16);
    let (ba8, bb8, ba16, bb16) = (upload(&a8), upload(&b8), upload(&a16), upload(&b16));
    run(
        ARITH,
        "arith_i8_i16",
        &[
            Arg::Buffer(&o8),
            Arg::Buffer(&o16),
            Arg::Buffer(&ba8),
            Arg::Buffer(&bb8),
            Arg::Buffer(&ba16),
            Arg::Buffer(&bb16),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let g8: Vec<i8> = read(&o8);
    let g16: Vec<i16> = read(&o16);
    let mut ck = Check::new("arith_i8_i16");
    for i in 0..n {
        let (x, y) = (a8[i], b8[i]);
        let (ux, uy) = (x as u8, y as u8);
        let w8 = [
            x.wrapping_add(y),
            x.wrapping_mul(y),
            x >> 2,
            (ux >> 2) as i8,
            x.min(y),
            ux.max(uy) as i8,
        ];
        for (k, w) in w8.iter().enumerate() {
            ck.eq(g8[6 * i + k], *w, || {
                format!("i8 op {k} a={x} b={y} (i={i})")
            });
        }
        let (p, q) = (a16[i], b16[i]);
        let (up, uq) = (p as u16, q as u16);
        let w16 = [
            p.wrapping_add(q),
            p.wrapping_mul(q),
            p >> 3,
            (up >> 3) as i16,
            up.min(uq) as i16,
            (p as i32 + x as i32 * 3) as i16,
        ];
        for (k, w) in w16.iter().enumerate() {
            ck.eq(g16[6 * i + k], *w, || {
                format!("i16 op {k} a={p} b={q} a8={x} (i={i})")
            });
        }
    }
    ck.finish();
}

#[test]
fn divrem_i32() {
    let n = 2300;
    let mut rng = Rng::new(7);
    let mut a: Vec<i32> = (0..n).map(|_| rng.i32_varied()).collect();
    let mut b: Vec<i32> = (0..n)
        .map(|_| {
            if rng.chance(1, 8) {
                rng.pick(&[1, -1, 2, -2, 3, 7, 1 << 16, i32::MAX, i32::MIN, -65537])
            } else {
                rng.i32_varied()
            }
        })
        .collect();
    for i in 0..n {
        if b[i] == 0 {
            b[i] = 13;
        }
        if a[i] == i32::MIN && b[i] == -1 {
            a[i] = i32::MIN + 1;
        }
    }
    a[0] = i32::MIN;
    b[0] = 1;
    a[1] = i32::MIN;
    b[1] = i32::MIN;
    a[2] = -1;
    b[2] = i32::MIN;
    let out = filled(n * 4, 0x5a5a5a5ai32);
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        ARITH,
        "divrem_i32",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("divrem_i32");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (ux, uy) = (x as u32, y as u32);
        let want = [x / y, x % y, (ux / uy) as i32, (ux % uy) as i32];
        let names = ["sdiv", "srem", "udiv", "urem"];
        for k in 0..4 {
            ck.eq(got[4 * i + k], want[k], || {
                format!("{} a={x} b={y} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn divrem_i64() {
    let n = 1300;
    let mut rng = Rng::new(8);
    let mut a: Vec<i64> = (0..n).map(|_| rng.i64_varied()).collect();
    let mut b: Vec<i64> = (0..n)
        .map(|_| {
            if rng.chance(1, 8) {
                rng.pick(&[
                    1,
                    -1,
                    3,
                    1 << 32,
                    (1 << 32) + 1,
                    i64::MAX,
                    i64::MIN,
                    0xffff_ffff,
                    -10,
                ])
            } else {
                rng.i64_varied()
            }
        })
        .collect();
    for i in 0..n {
        if b[i] == 0 {
            b[i] = 1_000_003;
        }
        if a[i] == i64::MIN && b[i] == -1 {
            a[i] = i64::MIN + 1;
        }
    }
    let out = filled(n * 4, 0x5a5a5a5a5a5a5a5ai64);
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        ARITH,
        "divrem_i64",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("divrem_i64");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (ux, uy) = (x as u64, y as u64);
        let want = [x / y, x % y, (ux / uy) as i64, (ux % uy) as i64];
        let names = ["sdiv", "srem", "udiv", "urem"];
        for k in 0..4 {
            ck.eq(got[4 * i + k], want[k], || {
                format!("{} a={x} b={y} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn divrem_const() {
    let n = 2000;
    let mut rng = Rng::new(9);
    let mut a: Vec<i64> = (0..n).map(|_| rng.i64_varied()).collect();
    a[0] = i64::MIN;
    a[1] = i64::MAX;
    a[2] = i32::MIN as i64;
    a[3] = -1;
    let out = filled(n * 8, 0x5a5a5a5a5a5a5a5ai64);
    let ba = upload(&a);
    run(
        ARITH,
        "divrem_const",
        &[Arg::Buffer(&out), Arg::Buffer(&ba), Arg::I32(n as i32)],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("divrem_const");
    for i in 0..n {
        let x = a[i];
        let (x32, u32_, u64_) = (x as i32, x as u32, x as u64);
        let want = [
            (x32 / 7) as i64,
            (x32 % 7) as i64,
            (x32 / -3) as i64,
            (u32_ / 10) as i64,
            (u32_ % 1000) as i64,
            x / 1_000_000_007,
            (u64_ % 10) as i64,
            (x32 / 16) as i64,
        ];
        for (k, w) in want.iter().enumerate() {
            ck.eq(got[8 * i + k], *w, || format!("op {k} a={x} (i={i})"));
        }
    }
    ck.finish();
}
