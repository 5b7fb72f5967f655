//! convert.hip: conversions between integer and floating-point types.

use crate::common::*;
use crate::CONVERT;
use hcq::Arg;

const LOCAL: u32 = 64;

/// Edge values for float -> 32-bit integer conversions: saturation bounds, NaN, infinities,
/// values just inside and outside the ranges, fractions rounding toward zero, denormals.
const F32_INT_EDGES: &[f32] = &[
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    0.49999997,
    -0.99999994,
    1.5,
    -1.5,
    2147483520.0,
    2147483648.0,
    -2147483648.0,
    -2147483904.0,
    4294967040.0,
    4294967296.0,
    1.0e-40,
    -1.0e20,
    1.0e20,
    -0.5,
    65535.9,
];

#[test]
fn cvt_f32_to_int() {
    let n = 1800;
    let mut rng = Rng::new(101);
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i < F32_INT_EDGES.len() {
                F32_INT_EDGES[i]
            } else if rng.chance(1, 2) {
                rng.f32_in(-5.0e9, 5.0e9)
            } else {
                rng.f32_mixed()
            }
        })
        .collect();
    let (oi, ou) = (filled(n, 0x5a5a5a5ai32), filled(n, 0x5a5a5a5au32));
    let bx = upload(&x);
    run(
        CONVERT,
        "cvt_f32_to_int",
        &[
            Arg::Buffer(&oi),
            Arg::Buffer(&ou),
            Arg::Buffer(&bx),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gi, gu): (Vec<i32>, Vec<u32>) = (read(&oi), read(&ou));
    let mut ck = Check::new("cvt_f32_to_int");
    for i in 0..n {
        // v_cvt_i32_f32 / v_cvt_u32_f32: truncate, saturate, NaN -> 0 (Rust's `as` does the same).
        ck.eq(gi[i], x[i] as i32, || {
            format!("f32->i32 of {:e} (i={i})", x[i])
        });
        ck.eq(gu[i], x[i] as u32, || {
            format!("f32->u32 of {:e} (i={i})", x[i])
        });
    }
    ck.finish();
}

#[test]
fn cvt_int_to_float() {
    let n = 2000;
    let mut rng = Rng::new(102);
    let edges32 = [
        0,
        1,
        -1,
        i32::MAX,
        i32::MIN,
        16777217,
        -16777217,
        16777219,
        0x7fff_ffc0,
        0x7fff_ff80,
    ];
    let edges64 = [
        0,
        -1,
        i64::MAX,
        i64::MIN,
        (1 << 53) + 1,
        (1 << 53) + 3,
        (1 << 24) + 1,
        0x7fff_ffff_ffff_fe00,
        -(1 << 60) - 1,
    ];
    let a: Vec<i32> = (0..n)
        .map(|i| {
            if i < edges32.len() {
                edges32[i]
            } else {
                rng.i32_varied()
            }
        })
        .collect();
    let b: Vec<i64> = (0..n)
        .map(|i| {
            if i < edges64.len() {
                edges64[i]
            } else {
                rng.i64_varied()
            }
        })
        .collect();
    let (of, od) = (filled(n * 4, f32::NAN), filled(n * 4, f64::NAN));
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        CONVERT,
        "cvt_int_to_float",
        &[
            Arg::Buffer(&of),
            Arg::Buffer(&od),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gd): (Vec<f32>, Vec<f64>) = (read(&of), read(&od));
    let mut ck = Check::new("cvt_int_to_float");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        // Round to nearest even, as Rust's `as`.
        let wf = [x as f32, x as u32 as f32, y as f32, y as u64 as f32];
        let wd = [x as f64, x as u32 as f64, y as f64, y as u64 as f64];
        let names = ["i32", "u32", "i64", "u64"];
        for k in 0..4 {
            ck.f32(gf[4 * i + k], wf[k], || {
                format!("{}->f32 of a={x} b={y} (i={i})", names[k])
            });
            ck.f64(gd[4 * i + k], wd[k], || {
                format!("{}->f64 of a={x} b={y} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

#[test]
fn cvt_float_to_i64() {
    let n = 1600;
    let mut rng = Rng::new(103);
    let ef = [
        0.0f32,
        -0.0,
        0.999_999_94,
        -0.5,
        4.611_686e18,
        -4.611_686e18,
        2147483648.0,
        4294967296.5,
        1.0e-30,
    ];
    let ed = [
        0.0f64,
        -0.0,
        0.999_999_999_999_999_9,
        -2.5,
        4.6e18,
        -4.6e18,
        4294967296.5,
        9007199254740993.0,
        1.0e-300,
    ];
    // Only values inside the i64 range: C leaves the others undefined and these are
    // compiler expansions, not a single saturating instruction.
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i < ef.len() {
                ef[i]
            } else {
                rng.f32_exp(-10, 61)
            }
        })
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| {
            if i < ed.len() {
                ed[i]
            } else {
                rng.f64_exp(-10, 61)
            }
        })
        .collect();
    let out = filled(n * 4, 0x5a5a5a5a5a5a5a5ai64);
    let (bx, by) = (upload(&x), upload(&y));
    run(
        CONVERT,
        "cvt_float_to_i64",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&bx),
            Arg::Buffer(&by),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("cvt_float_to_i64");
    for i in 0..n {
        let (f, d) = (x[i], y[i]);
        let want = [
            f as i64,
            f.abs() as u64 as i64,
            d as i64,
            d.abs() as u64 as i64,
        ];
        let names = ["f32->i64", "|f32|->u64", "f64->i64", "|f64|->u64"];
        for k in 0..4 {
            ck.eq(got[4 * i + k], want[k], || {
                format!("{} of f={f:e} d={d:e} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}

/// Values on and around f16 rounding boundaries: an f16 value plus -1/2..+1/2 of its ulp in
/// quarter steps (the halves are ties), plus overflow, underflow and denormal edges.
fn f16_boundary(rng: &mut Rng) -> f64 {
    let h = loop {
        let h = rng.u32() as u16;
        if h & 0x7c00 != 0x7c00 {
            break h;
        }
    };
    let v = f16_to_f64(h);
    let e = ((h >> 10) & 0x1f) as i32;
    let ulp = 2f64.powi(e.max(1) - 25);
    v + ulp * rng.range(-2, 2) as f64 / 4.0
}

#[test]
fn cvt_f16() {
    let n = 2200;
    let mut rng = Rng::new(104);
    let edges = [
        65504.0,
        65519.99,
        65520.0,
        65536.0,
        1.0e6,
        f64::INFINITY,
        f64::NAN,
        2f64.powi(-25),
        3.0 * 2f64.powi(-26),
        1.5 * 2f64.powi(-24),
        2f64.powi(-14) - 2f64.powi(-26),
        -0.0,
        1.0 + 2f64.powi(-11),
        1.0 + 3.0 * 2f64.powi(-11),
    ];
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i] as f32
            } else if rng.chance(1, 2) {
                f16_boundary(&mut rng) as f32
            } else {
                rng.f32_mixed()
            }
        })
        .collect();
    // f64 inputs also probe double rounding: a tie in f32 that is not a tie in f64.
    let y: Vec<f64> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i]
            } else {
                match rng.range(0, 3) {
                    0 => {
                        f16_boundary(&mut rng)
                            * (1.0 + rng.pick(&[2f64.powi(-40), -(2f64.powi(-40)), 2f64.powi(-30)]))
                    }
                    1 => f16_boundary(&mut rng),
                    _ => rng.f64_mixed(),
                }
            }
        })
        .collect();
    let h: Vec<u16> = (0..n).map(|_| rng.f16_mixed()).collect();
    let (oh, of, od) = (
        filled(n * 2, 0x5a5au16),
        filled(n, f32::NAN),
        filled(n, f64::NAN),
    );
    let (bx, by, bh) = (upload(&x), upload(&y), upload(&h));
    run(
        CONVERT,
        "cvt_f16",
        &[
            Arg::Buffer(&oh),
            Arg::Buffer(&of),
            Arg::Buffer(&od),
            Arg::Buffer(&bx),
            Arg::Buffer(&by),
            Arg::Buffer(&bh),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gh, gf, gd): (Vec<u16>, Vec<f32>, Vec<f64>) = (read(&oh), read(&of), read(&od));
    let mut ck = Check::new("cvt_f16");
    for i in 0..n {
        ck.f16(gh[2 * i], f16(x[i] as f64), || {
            format!("f32->f16 of {:e} ({:#010x}) (i={i})", x[i], x[i].to_bits())
        });
        ck.f16(gh[2 * i + 1], f16(y[i]), || {
            format!("f64->f16 of {:e} ({:#018x}) (i={i})", y[i], y[i].to_bits())
        });
        ck.f32(gf[i], f16_to_f64(h[i]) as f32, || {
            format!("f16->f32 of {:#06x} (i={i})", h[i])
        });
        ck.f64(gd[i], f16_to_f64(h[i]), || {
            format!("f16->f64 of {:#06x} (i={i})", h[i])
        });
    }
    ck.finish();
}

/// v_cvt_i16_f16 / v_cvt_u16_f16: truncate toward zero, saturate, NaN -> 0.
fn f16_to_int(h: u16, lo: f64, hi: f64) -> i64 {
    let v = f16_to_f64(h);
    if v.is_nan() {
        0
    } else {
        v.trunc().clamp(lo, hi) as i64
    }
}

#[test]
fn cvt_f16_i16() {
    let n = 2000;
    let mut rng = Rng::new(105);
    let h: Vec<u16> = (0..n)
        .map(|i| {
            if i < F16_SPECIAL.len() {
                F16_SPECIAL[i]
            } else if rng.chance(1, 2) {
                rng.f16_mixed()
            } else {
                // Magnitudes up to 2^16 (f16 max 65504): in and beyond the i16/u16 ranges.
                f16(rng.f64_in(-70000.0, 70000.0))
            }
        })
        .collect();
    let s: Vec<i16> = (0..n)
        .map(|i| {
            if i < 4 {
                [i16::MIN, i16::MAX, -1, 2049][i]
            } else {
                rng.u32() as i16
            }
        })
        .collect();
    let (os, oh) = (filled(n * 2, 0x5a5ai16), filled(n * 2, 0x5a5au16));
    let (bh, bs) = (upload(&h), upload(&s));
    run(
        CONVERT,
        "cvt_f16_i16",
        &[
            Arg::Buffer(&os),
            Arg::Buffer(&oh),
            Arg::Buffer(&bh),
            Arg::Buffer(&bs),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gs, gh): (Vec<i16>, Vec<u16>) = (read(&os), read(&oh));
    let mut ck = Check::new("cvt_f16_i16");
    for i in 0..n {
        let fh = f16_to_f64(h[i]);
        ck.eq(
            gs[2 * i],
            f16_to_int(h[i], -32768.0, 32767.0) as i16,
            || format!("f16->i16 of {fh:e} ({:#06x}) (i={i})", h[i]),
        );
        ck.eq(
            gs[2 * i + 1],
            f16_to_int(h[i], 0.0, 65535.0) as u16 as i16,
            || format!("f16->u16 of {fh:e} ({:#06x}) (i={i})", h[i]),
        );
        ck.f16(gh[2 * i], f16(s[i] as f64), || {
            format!("i16->f16 of {} (i={i})", s[i])
        });
        ck.f16(gh[2 * i + 1], f16(s[i] as u16 as f64), || {
            format!("u16->f16 of {} (i={i})", s[i] as u16)
        });
    }
    ck.finish();
}

#[test]
fn cvt_f64() {
    let n = 2000;
    let mut rng = Rng::new(106);
    let edges = [
        f32::MAX as f64,
        f32::MAX as f64 * (1.0 + 2f64.powi(-25)),
        f32::MAX as f64 * (1.0 + 2f64.powi(-24)),
        1.0e-45,
        7.0e-46,
        2f64.powi(-150),
        2f64.powi(-150) * 1.000001,
        2147483647.5,
        2147483648.0,
        -2147483648.9,
        -2147483649.0,
        4294967295.9,
        4294967296.0,
        -0.9,
        1.0 + 2f64.powi(-24),
        1.0 + 3.0 * 2f64.powi(-24),
    ];
    let y: Vec<f64> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i]
            } else {
                match rng.range(0, 3) {
                    0 => rng.f64_in(-5.0e9, 5.0e9),
                    1 => rng.f64_exp(-160, 130),
                    _ => rng.f64_mixed(),
                }
            }
        })
        .collect();
    let x: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    let (of, od, oi, ou) = (
        filled(n, f32::NAN),
        filled(n, f64::NAN),
        filled(n, 0x5a5a5a5ai32),
        filled(n, 0x5a5a5a5au32),
    );
    let (by, bx) = (upload(&y), upload(&x));
    run(
        CONVERT,
        "cvt_f64",
        &[
            Arg::Buffer(&of),
            Arg::Buffer(&od),
            Arg::Buffer(&oi),
            Arg::Buffer(&ou),
            Arg::Buffer(&by),
            Arg::Buffer(&bx),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gd, gi, gu): (Vec<f32>, Vec<f64>, Vec<i32>, Vec<u32>) =
        (read(&of), read(&od), read(&oi), read(&ou));
    let mut ck = Check::new("cvt_f64");
    for i in 0..n {
        let (d, f) = (y[i], x[i]);
        ck.f32(gf[i], d as f32, || {
            format!("f64->f32 of {d:e} ({:#018x}) (i={i})", d.to_bits())
        });
        ck.f64(gd[i], f as f64, || format!("f32->f64 of {f:e} (i={i})"));
        ck.eq(gi[i], d as i32, || format!("f64->i32 of {d:e} (i={i})"));
        ck.eq(gu[i], d as u32, || format!("f64->u32 of {d:e} (i={i})"));
    }
    ck.finish();
}

#[test]
fn cvt_int_widths() {
    let n = 1500;
    let mut rng = Rng::new(107);
    let a: Vec<i64> = (0..n).map(|_| rng.i64_varied()).collect();
    let b8: Vec<i8> = (0..n).map(|_| rng.u32() as i8).collect();
    let b16: Vec<i16> = (0..n).map(|_| rng.u32() as i16).collect();
    let out = filled(n * 10, 0x5a5a5a5a5a5a5a5ai64);
    let (ba, bb8, bb16) = (upload(&a), upload(&b8), upload(&b16));
    run(
        CONVERT,
        "cvt_int_widths",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb8),
            Arg::Buffer(&bb16),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("cvt_int_widths");
    for i in 0..n {
        let x32 = a[i] as i32;
        let want = [
            x32 as i8 as i64,
            x32 as u8 as i64,
            x32 as i16 as i64,
            x32 as u16 as i64,
            x32 as i64,
            x32 as u32 as i64,
            b8[i] as i64,
            b8[i] as u8 as i64,
            b16[i] as i64,
            b16[i] as u16 as i64,
        ];
        for (k, w) in want.iter().enumerate() {
            ck.eq(got[10 * i + k], *w, || {
                format!("op {k} a={:#x} b8={} b16={} (i={i})", a[i], b8[i], b16[i])
            });
        }
    }
    ck.finish();
}

#[test]
fn cvt_round() {
    let n = 2000;
    let mut rng = Rng::new(108);
    let x: Vec<f32> = (0..n)
        .map(|i| match i % 4 {
            0 => rng.range(-40, 40) as f32 * 0.25,
            1 => rng.f32_in(-100.0, 100.0),
            2 => rng.f32_exp(-3, 30),
            _ => rng.f32_mixed(),
        })
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| match i % 4 {
            0 => rng.range(-40, 40) as f64 * 0.25,
            1 => rng.f64_in(-100.0, 100.0),
            2 => rng.f64_exp(-3, 60),
            _ => rng.f64_mixed(),
        })
        .collect();
    let (of, od) = (filled(n * 5, f32::NAN), filled(n * 5, f64::NAN));
    let (bx, by) = (upload(&x), upload(&y));
    run(
        CONVERT,
        "cvt_round",
        &[
            Arg::Buffer(&of),
            Arg::Buffer(&od),
            Arg::Buffer(&bx),
            Arg::Buffer(&by),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gd): (Vec<f32>, Vec<f64>) = (read(&of), read(&od));
    let names = ["floor", "ceil", "trunc", "rint", "round"];
    let mut ck = Check::new("cvt_round");
    for i in 0..n {
        let (f, d) = (x[i], y[i]);
        // IEEE roundToIntegral: the sign of zero is kept (rint(-0.2) = -0).
        let wf = [
            f.floor(),
            f.ceil(),
            f.trunc(),
            f.round_ties_even(),
            f.round(),
        ];
        let wd = [
            d.floor(),
            d.ceil(),
            d.trunc(),
            d.round_ties_even(),
            d.round(),
        ];
        for k in 0..5 {
            ck.f32(gf[5 * i + k], wf[k], || {
                format!("{}f of {f:e} (i={i})", names[k])
            });
            ck.f64(gd[5 * i + k], wd[k], || {
                format!("{} of {d:e} (i={i})", names[k])
            });
        }
    }
    ck.finish();
}
