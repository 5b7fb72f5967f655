//! transcendental.hip: the hardware's approximate instructions (checked within an ulp bound)
//! and its exact floating-point helpers (checked bit for bit).

use crate::common::*;
use crate::TRANSCENDENTAL;
use hcq::Arg;

const LOCAL: u32 = 64;

/// Results below the f32 normal range: the approximate instructions may flush them.
fn tiny32(v: f64) -> bool {
    v != 0.0 && v.abs() < f32::MIN_POSITIVE as f64
}

#[test]
fn trans_f32() {
    let n = 2500;
    let mut rng = Rng::new(201);
    let edges = [
        0.0f32,
        -0.0,
        1.0,
        4.0,
        0.25,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -1.0,
        2.0,
        1.0e-30,
        1.0e30,
    ];
    // Normal inputs whose results are normal: |x| in [2^-100, 2^100] for rcp/rsq/sqrt/log,
    // [-126, 128] for exp2. Negative inputs make rsq/sqrt/log NaN.
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i]
            } else {
                match i % 3 {
                    0 => rng.f32_exp(-100, 100),
                    1 => rng.f32_in(-126.0, 128.0),
                    _ => rng.f32_in(0.5, 2.0),
                }
            }
        })
        .collect();
    let out = filled(n * 5, f32::NAN);
    let bx = upload(&x);
    run(
        TRANSCENDENTAL,
        "trans_f32",
        &[Arg::Buffer(&out), Arg::Buffer(&bx), Arg::I32(n as i32)],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut ck = Check::new("trans_f32");
    let names = ["rcp", "rsq", "sqrt", "exp2", "log2"];
    // Bounds (RDNA3 ISA guide, per-instruction notes): v_rcp_f32, v_sqrt_f32: 1 ulp;
    // v_rsq_f32, v_exp_f32, v_log_f32: 1 ulp, +1 at binade edges. Against the correctly
    // rounded f64 reference: rcp/sqrt <= 1 ulp, rsq/exp/log <= 2 ulp. v_log_f32 near 1
    // (results near 0) is held to an absolute 2^-22 instead, and results below the normal
    // range may be flushed to zero.
    let bounds = [1u64, 2, 1, 2, 2];
    for i in 0..n {
        let v = x[i] as f64;
        let want = [1.0 / v, 1.0 / v.sqrt(), v.sqrt(), v.exp2(), v.log2()];
        for k in 0..5 {
            let g = got[5 * i + k];
            let w = want[k] as f32;
            let pass = ulp_diff_f32(g, w) <= bounds[k]
                || (k == 4 && (g as f64 - want[k]).abs() <= 2f64.powi(-22))
                || (tiny32(want[k]) && (g as f64).abs() < f32::MIN_POSITIVE as f64);
            ck.ok(pass, || {
                format!(
                    "{} of {:e}: got {g:e} ({:#010x}), want {w:e} ({:#010x}) (i={i})",
                    names[k],
                    x[i],
                    g.to_bits(),
                    w.to_bits()
                )
            });
        }
    }
    ck.finish();
}

#[test]
fn trans_sincos() {
    let n = 2000;
    let mut rng = Rng::new(202);
    let edges = [
        0.0f32,
        0.25,
        0.5,
        0.75,
        -0.25,
        0.125,
        1.0,
        -1.0,
        f32::NAN,
        f32::INFINITY,
    ];
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i]
            } else {
                rng.f32_in(-2.0, 2.0)
            }
        })
        .collect();
    let out = filled(n * 2, f32::NAN);
    let bx = upload(&x);
    run(
        TRANSCENDENTAL,
        "trans_sincos",
        &[Arg::Buffer(&out), Arg::Buffer(&bx), Arg::I32(n as i32)],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut ck = Check::new("trans_sincos");
    // v_sin_f32 / v_cos_f32 take revolutions (sin(2 pi x)). The ISA gives no ulp bound; near
    // zeros only an absolute bound is meaningful: |error| <= 2^-19 for |x| <= 2 (covers the
    // f32 rounding of x * 2 pi in the ISA pseudocode, ~1.5e-6 at |x| = 2).
    for i in 0..n {
        let t = 2.0 * std::f64::consts::PI * x[i] as f64;
        for (k, w) in [t.sin(), t.cos()].into_iter().enumerate() {
            let g = got[2 * i + k] as f64;
            let pass = if w.is_nan() {
                g.is_nan()
            } else {
                (g - w).abs() <= 2f64.powi(-19)
            };
            ck.ok(pass, || {
                format!(
                    "{} of {:e} revolutions: got {g:e}, want {w:e} (i={i})",
                    ["sin", "cos"][k],
                    x[i]
                )
            });
        }
    }
    ck.finish();
}

/// frexp: (mantissa in [0.5, 1) with the input's sign, exponent); inf/NaN give (input, 0),
/// zero gives (zero, 0). Denormals are normalized.
fn frexp(v: f64) -> (f64, i32) {
    if !v.is_finite() {
        return (v, 0);
    }
    if v == 0.0 {
        return (v, 0);
    }
    let mut e = 0;
    let mut m = v.abs();
    while m >= 1.0 {
        m /= 2.0;
        e += 1;
    }
    while m < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    (m.copysign(v), e)
}

/// v_class bits: 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal,
/// 8 +normal, 9 +inf.
fn class_bit(v: f32) -> u32 {
    let neg = v.is_sign_negative();
    if v.is_nan() {
        if v.to_bits() & 0x40_0000 != 0 {
            1
        } else {
            0
        }
    } else if v.is_infinite() {
        if neg {
            2
        } else {
            9
        }
    } else if v == 0.0 {
        if neg {
            5
        } else {
            6
        }
    } else if v.is_subnormal() {
        if neg {
            4
        } else {
            7
        }
    } else if neg {
        3
    } else {
        8
    }
}

#[test]
fn trans_exact() {
    let n = 2400;
    let mut rng = Rng::new(203);
    let edges = [
        -1.0e-10f32,
        -2f32.powi(-30),
        -0.5,
        0.0,
        3.75,
        -3.75,
        f32::INFINITY,
        f32::NAN,
        1.0e-40,
        -1.0e-45,
        2.25,
        -1.5,
        100.0,
    ];
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i]
            } else if i % 2 == 0 {
                rng.f32_in(-10.0, 10.0)
            } else {
                rng.f32_mixed()
            }
        })
        .collect();
    let e: Vec<i32> = (0..n).map(|_| rng.range(-300, 300) as i32).collect();
    let (of, oi, od) = (
        filled(n * 6, f32::NAN),
        filled(n * 2, 0x5a5a5a5ai32),
        filled(n, f64::NAN),
    );
    let (bx, be) = (upload(&x), upload(&e));
    run(
        TRANSCENDENTAL,
        "trans_exact",
        &[
            Arg::Buffer(&of),
            Arg::Buffer(&oi),
            Arg::Buffer(&od),
            Arg::Buffer(&bx),
            Arg::Buffer(&be),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gi, gd): (Vec<f32>, Vec<i32>, Vec<f64>) = (read(&of), read(&oi), read(&od));
    let mut ck = Check::new("trans_exact");
    for i in 0..n {
        let v = x[i];
        let vd = v as f64;
        // v_fract_f32: x - floor(x), clamped below 1.0; NaN for infinities. A -0 vs +0
        // difference is accepted for zero results.
        let fract = if v.is_finite() {
            ((vd - vd.floor()) as f32).min(f32::from_bits(0x3f7f_ffff))
        } else {
            f32::NAN
        };
        let g = gf[6 * i];
        ck.ok(
            g.to_bits() == fract.to_bits()
                || (g == 0.0 && fract == 0.0)
                || (g.is_nan() && fract.is_nan()),
            || format!("fract of {v:e}: got {g:e}, want {fract:e} (i={i})"),
        );
        // v_ldexp_f32: x * 2^e rounded once (exact in f64, then one rounding to f32).
        let ld = (vd * 2f64.powi(e[i])) as f32;
        ck.f32(gf[6 * i + 1], ld, || {
            format!("ldexp({v:e}, {}) (i={i})", e[i])
        });
        let (m, ex) = frexp(vd);
        ck.f32(gf[6 * i + 2], m as f32, || {
            format!("frexp_mant of {v:e} (i={i})")
        });
        ck.f32(gf[6 * i + 3], v.sqrt(), || {
            format!("sqrtf (correctly rounded) of {v:e} (i={i})")
        });
        let med = if v.is_nan() {
            -1.5
        } else if v >= 2.25 {
            2.25
        } else {
            isa_max32(v, -1.5)
        };
        ck.f32(gf[6 * i + 4], med, || {
            format!("fmed3({v:e}, -1.5, 2.25) (i={i})")
        });
        ck.f32(gf[6 * i + 5], 2.5f32.copysign(v), || {
            format!("copysign(2.5, {v:e}) (i={i})")
        });
        ck.eq(gi[2 * i], ex, || format!("frexp_exp of {v:e} (i={i})"));
        let mask = (e[i] & 0x3ff) as u32;
        ck.eq(gi[2 * i + 1], ((mask >> class_bit(v)) & 1) as i32, || {
            format!("class({v:e}, {mask:#x}) (i={i})")
        });
        ck.f64(gd[i], (vd * 3.0).sqrt(), || {
            format!("sqrt (f64) of {v:e} * 3 (i={i})")
        });
    }
    ck.finish();
}

#[test]
fn trans_f64() {
    let n = 1500;
    let mut rng = Rng::new(204);
    let edges = [
        0.0f64,
        -0.0,
        1.0,
        4.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -1.0e-20,
        1.0e-300,
        -2.5,
    ];
    let x: Vec<f64> = (0..n)
        .map(|i| {
            if i < edges.len() {
                edges[i]
            } else if i % 2 == 0 {
                rng.f64_exp(-500, 500)
            } else {
                rng.f64_in(-10.0, 10.0)
            }
        })
        .collect();
    let e: Vec<i32> = (0..n).map(|_| rng.range(-1022, 1023) as i32).collect();
    let (od, oi) = (filled(n * 5, f64::NAN), filled(n, 0x5a5a5a5ai32));
    let (bx, be) = (upload(&x), upload(&e));
    run(
        TRANSCENDENTAL,
        "trans_f64",
        &[
            Arg::Buffer(&od),
            Arg::Buffer(&oi),
            Arg::Buffer(&bx),
            Arg::Buffer(&be),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gd, gi): (Vec<f64>, Vec<i32>) = (read(&od), read(&oi));
    let mut ck = Check::new("trans_f64");
    for i in 0..n {
        let v = x[i];
        // v_rcp_f64 / v_rsq_f64: the ISA states no bound and LLVM calls them "pretty
        // inaccurate" (it refines them with Newton steps); require 2^-20 relative error and
        // exact special values (0, inf, NaN).
        for (k, w) in [1.0 / v, 1.0 / v.sqrt()].into_iter().enumerate() {
            let g = gd[5 * i + k];
            let pass = if w.is_finite() && w != 0.0 {
                ((g - w) / w).abs() <= 2f64.powi(-20)
            } else {
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
            };
            ck.ok(pass, || {
                format!(
                    "{} of {v:e}: got {g:e}, want {w:e} (i={i})",
                    ["rcp_f64", "rsq_f64"][k]
                )
            });
        }
        // v_ldexp_f64: one multiplication by an exact power of two, rounded once.
        ck.f64(
            gd[5 * i + 2],
            v * f64::from_bits(((e[i] + 1023) as u64) << 52),
            || format!("ldexp({v:e}, {}) (i={i})", e[i]),
        );
        let (m, ex) = frexp(v);
        ck.f64(gd[5 * i + 3], m, || format!("frexp_mant of {v:e} (i={i})"));
        let fract = if v.is_finite() {
            (v - v.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff))
        } else {
            f64::NAN
        };
        let g = gd[5 * i + 4];
        ck.ok(
            g.to_bits() == fract.to_bits()
                || (g == 0.0 && fract == 0.0)
                || (g.is_nan() && fract.is_nan()),
            || format!("fract of {v:e}: got {g:e}, want {fract:e} (i={i})"),
        );
        ck.eq(gi[i], ex, || format!("frexp_exp of {v:e} (i={i})"));
    }
    ck.finish();
}

#[test]
fn trans_f16() {
    let n = 2000;
    let mut rng = Rng::new(205);
    let x: Vec<u16> = (0..n)
        .map(|i| {
            if i < F16_SPECIAL.len() {
                F16_SPECIAL[i]
            } else if i % 2 == 0 {
                // Normal, both signs, binary exponent -10..10.
                (rng.u32() as u16 & 0x83ff) | ((rng.range(5, 25) as u16) << 10)
            } else {
                rng.f16_mixed()
            }
        })
        .collect();
    let e: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let out = filled(n * 6, 0x5a5au16);
    let (bx, be) = (upload(&x), upload(&e));
    run(
        TRANSCENDENTAL,
        "trans_f16",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&bx),
            Arg::Buffer(&be),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<u16> = read(&out);
    let mut ck = Check::new("trans_f16");
    for i in 0..n {
        let h = x[i];
        let v = f16_to_f64(h);
        let ctx = |op: &str| format!("{op} of {v:e} ({h:#06x}) (i={i})");
        let denormal_in = h & 0x7c00 == 0 && h & 0x3ff != 0;
        // v_rcp/sqrt/rsq_f16: "0.51 ulp" per the ISA guide (quoted by LLVM): <= 1 ulp here.
        // Denormal inputs are skipped for these (their flushing is not specified).
        if !denormal_in {
            ck.f16_ulp(got[6 * i], f16(1.0 / v), 1, || ctx("rcp_f16"));
            ck.f16_ulp(got[6 * i + 1], f16(v.sqrt()), 1, || ctx("sqrt_f16"));
            ck.f16_ulp(got[6 * i + 2], f16(1.0 / v.sqrt()), 1, || ctx("rsq_f16"));
        }
        let sh = e[i] & 15;
        ck.f16(got[6 * i + 3], f16(v * 2f64.powi(sh)), || {
            ctx(&format!("ldexp_f16(.., {sh})"))
        });
        ck.f16(got[6 * i + 4], f16(frexp(v).0), || ctx("frexp_mant_f16"));
        let fract = if v.is_finite() {
            f16(v - v.floor()).min(0x3bff)
        } else {
            0x7e00
        };
        let g = got[6 * i + 5];
        ck.ok(
            g == fract
                || (g & 0x7fff == 0 && fract & 0x7fff == 0)
                || (f16_is_nan(g) && f16_is_nan(fract)),
            || format!("{}: got {g:#06x}, want {fract:#06x}", ctx("fract_f16")),
        );
    }
    ck.finish();
}
