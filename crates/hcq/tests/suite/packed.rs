//! packed.hip: packed 16-bit math, dot products, VOPD, OPSEL, constants, WMMA.

use crate::common::*;
use crate::PACKED;
use hcq::Arg;

const LOCAL: u32 = 64;

#[test]
fn pk_f16() {
    let n = 1500;
    let mut rng = Rng::new(901);
    let gen = |rng: &mut Rng| -> Vec<u16> { (0..2 * n).map(|_| rng.f16_mixed()).collect() };
    let (a, b, c) = (gen(&mut rng), gen(&mut rng), gen(&mut rng));
    let out = filled(7 * 2 * n, 0x5a5au16);
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        PACKED,
        "pk_f16",
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
    let mut ck = Check::new("pk_f16");
    let names = [
        "pk_add",
        "pk_mul",
        "pk_fma",
        "pk_min",
        "pk_max",
        "x.yx - y",
        "fma(x, 2, {1, -0.5})",
    ];
    for i in 0..n {
        for h in 0..2 {
            let (x, y, z) = (a[2 * i + h], b[2 * i + h], c[2 * i + h]);
            let (fx, fy) = (f16_to_f64(x), f16_to_f64(y));
            let fxs = f16_to_f64(a[2 * i + (1 - h)]);
            let want = [
                f16(fx + fy),
                f16(fx * fy),
                f16_fma(x, y, z),
                f16(isa_min(fx, fy)),
                f16(isa_max(fx, fy)),
                f16(fxs - fy),
                f16(fx * 2.0 + [1.0, -0.5][h]),
            ];
            for k in 0..7 {
                ck.f16(got[14 * i + 2 * k + h], want[k], || {
                    format!(
                        "{} half {h} x={fx:e} y={fy:e} z={:e} (i={i})",
                        names[k],
                        f16_to_f64(z)
                    )
                });
            }
        }
    }
    ck.finish();
}

#[test]
fn pk_i16() {
    let n = 1500;
    let mut rng = Rng::new(902);
    let a: Vec<i16> = (0..2 * n).map(|_| rng.u32() as i16).collect();
    let b: Vec<i16> = (0..2 * n).map(|_| rng.u32() as i16).collect();
    let out = filled(9 * 2 * n, 0x5a5ai16);
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        PACKED,
        "pk_i16",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i16> = read(&out);
    let mut ck = Check::new("pk_i16");
    for i in 0..n {
        for h in 0..2 {
            let (x, y) = (a[2 * i + h], b[2 * i + h]);
            let (ux, uy) = (x as u16, y as u16);
            let uxs = a[2 * i + (1 - h)] as u16;
            let want = [
                ux.wrapping_add(uy) as i16,
                ux.wrapping_sub(uy) as i16,
                ux.wrapping_mul(uy) as i16,
                (ux << (uy & 15)) as i16,
                x >> (y & 15),
                (ux >> (uy & 15)) as i16,
                x.min(y),
                ux.max(uy) as i16,
                ux.wrapping_mul(uy).wrapping_add(uxs) as i16,
            ];
            for (k, w) in want.iter().enumerate() {
                ck.eq(got[18 * i + 2 * k + h], *w, || {
                    format!("op {k} half {h} x={x} y={y} (i={i})")
                });
            }
        }
    }
    ck.finish();
}

#[test]
fn dot() {
    let n = 1600;
    let mut rng = Rng::new(903);
    let a: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let b: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let c: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
    let (oi, of, oh) = (
        filled(6 * n, 0x5a5a5a5ai32),
        filled(n, f32::NAN),
        filled(n, 0x5a5au16),
    );
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        PACKED,
        "dot",
        &[
            Arg::Buffer(&oi),
            Arg::Buffer(&of),
            Arg::Buffer(&oh),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gi, gf, gh): (Vec<i32>, Vec<f32>, Vec<u16>) = (read(&oi), read(&of), read(&oh));
    let mut ck = Check::new("dot");
    let u8s = |v: u32, k: u32| ((v >> (8 * k)) & 0xff) as i64;
    let i8s = |v: u32, k: u32| (v >> (8 * k)) as u8 as i8 as i64;
    let u4s = |v: u32, k: u32| ((v >> (4 * k)) & 15) as i64;
    let i4s = |v: u32, k: u32| (((v >> (4 * k)) << 28) as i32 >> 28) as i64;
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        let d4u: i64 = (0..4).map(|k| u8s(x, k) * u8s(y, k)).sum();
        let d4su: i64 = (0..4).map(|k| i8s(x, k) * u8s(y, k)).sum();
        let d4ss: i64 = (0..4).map(|k| i8s(x, k) * i8s(y, k)).sum();
        let d8u: i64 = (0..8).map(|k| u4s(x, k) * u4s(y, k)).sum();
        let d8s: i64 = (0..8).map(|k| i4s(x, k) * i4s(y, k)).sum();
        // Clamped forms saturate the full-precision sum to the 32-bit range.
        let acc4 = (0xffff_f000u32 | (z as u32 & 0xfff)) as i64;
        let acc5 = if z < 0 {
            0x8000_0100u32 as i32
        } else {
            0x7fff_fe00
        } as i64;
        let want = [
            (z as u32).wrapping_add(d4u as u32) as i32,
            z.wrapping_add(d4su as i32),
            (z as u32).wrapping_add(d8u as u32) as i32,
            z.wrapping_add(d8s as i32),
            (acc4 + d4u).min(u32::MAX as i64) as u32 as i32,
            (acc5 + d4ss).clamp(i32::MIN as i64, i32::MAX as i64) as i32,
        ];
        let names = [
            "udot4",
            "sudot4 (signed a)",
            "udot8",
            "sudot8 (signed)",
            "udot4 clamp",
            "sudot4 clamp",
        ];
        for k in 0..6 {
            ck.eq(gi[6 * i + k], want[k], || {
                format!("{} a={x:#010x} b={y:#010x} c={z:#x} (i={i})", names[k])
            });
        }
        let fd = ((x & 63) as f64 * 0.125) * ((y & 63) as f64 * 0.125)
            - (((x >> 6) & 63) as f64 * 0.125) * (((y >> 6) & 63) as f64 * 0.125)
            + (z & 255) as f64 * 0.5;
        ck.f32(gf[i], fd as f32, || {
            format!("fdot2 (v_dot2_f32_f16) a={x:#x} b={y:#x} (i={i})")
        });
        let hd = ((x & 7) as f64 * 0.25) * ((y & 7) as f64 * 0.25)
            - (((x >> 3) & 7) as f64 * 0.25) * (((y >> 3) & 7) as f64 * 0.25)
            + (z & 15) as f64;
        ck.f16(gh[i], f16(hd), || {
            format!("v_dot2_f16_f16 a={x:#x} b={y:#x} (i={i})")
        });
    }
    ck.finish();
}

#[test]
fn vopd_f32() {
    let n = 1400;
    let mut rng = Rng::new(904);
    let a: Vec<f32> = (0..n)
        .map(|i| {
            if i % 7 == 0 {
                rng.f32_mixed()
            } else {
                rng.f32_in(-1.5, 1.5)
            }
        })
        .collect();
    let b: Vec<f32> = (0..n).map(|_| rng.f32_in(-4.0, 4.0)).collect();
    let (out, ba, bb) = (filled(4 * n, f32::NAN), upload(&a), upload(&b));
    run(
        PACKED,
        "vopd_f32",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut ck = Check::new("vopd_f32");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (mut s0, mut s1, mut s2, mut s3) = (x, y, x + 1.0, y * 3.0);
        for _ in 0..8 {
            s0 = s0.mul_add(0.75, s1);
            s1 = s1.mul_add(x, -1.0);
            s2 = isa_max32(s2, s3) * 0.5;
            s3 += s0;
        }
        for (k, w) in [s0, s1, s2, s3].into_iter().enumerate() {
            ck.f32(got[4 * i + k], w, || {
                format!("s{k} a={x:e} b={y:e} (i={i})")
            });
        }
    }
    ck.finish();
}

#[test]
fn opsel_f16() {
    let n = 1500;
    let mut rng = Rng::new(905);
    let gen = |rng: &mut Rng| -> Vec<u16> { (0..2 * n).map(|_| rng.f16_mixed()).collect() };
    let (a, b) = (gen(&mut rng), gen(&mut rng));
    let c: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    let (of, oh) = (filled(2 * n, f32::NAN), filled(4 * n, 0x5a5au16));
    let (ba, bb, bc) = (upload(&a), upload(&b), upload(&c));
    run(
        PACKED,
        "opsel_f16",
        &[
            Arg::Buffer(&of),
            Arg::Buffer(&oh),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (gf, gh): (Vec<f32>, Vec<u16>) = (read(&of), read(&oh));
    let mut ck = Check::new("opsel_f16");
    for i in 0..n {
        let (hx, hy, gx, gy) = (a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1]);
        let f = |h: u16| f16_to_f64(h) as f32;
        // v_fma_mix_f32: f16 operands widened exactly, one f32 rounding.
        ck.f32(gf[2 * i], f(hy).mul_add(f(gx), c[i]), || {
            format!(
                "fma_mix(h.y, g.x, c) h={hx:#06x},{hy:#06x} g={gx:#06x},{gy:#06x} c={:e} (i={i})",
                c[i]
            )
        });
        ck.f32(gf[2 * i + 1], f(hx).mul_add(f(gy), -c[i]), || {
            format!("fma_mix(h.x, g.y, -c) (i={i})")
        });
        let (fhx, fhy, fgx, fgy) = (
            f16_to_f64(hx),
            f16_to_f64(hy),
            f16_to_f64(gx),
            f16_to_f64(gy),
        );
        let want = [
            f16(fhy * fgx),
            f16(fhy * fgy),
            f16(fhx - fgy),
            f16(fhx - fgy),
        ];
        let names = ["h.y*g.x", "h.y*g.y", "h.x-g.y (lo)", "h.x-g.y (hi)"];
        for k in 0..4 {
            ck.f16(gh[4 * i + k], want[k], || {
                format!(
                    "{} h={hx:#06x},{hy:#06x} g={gx:#06x},{gy:#06x} (i={i})",
                    names[k]
                )
            });
        }
    }
    ck.finish();
}

#[test]
fn constants() {
    let n = 1200;
    let mut rng = Rng::new(906);
    let a: Vec<f32> = (0..n).map(|_| rng.f32_mixed()).collect();
    let b: Vec<i32> = (0..n).map(|_| rng.i32_varied()).collect();
    let (of, od, oi, ol, oh) = (
        filled(6 * n, f32::NAN),
        filled(3 * n, f64::NAN),
        filled(4 * n, 0x5a5a5a5ai32),
        filled(2 * n, 0x5a5a5a5a5a5a5a5ai64),
        filled(2 * n, 0x5a5au16),
    );
    let (ba, bb) = (upload(&a), upload(&b));
    run(
        PACKED,
        "constants",
        &[
            Arg::Buffer(&of),
            Arg::Buffer(&od),
            Arg::Buffer(&oi),
            Arg::Buffer(&ol),
            Arg::Buffer(&oh),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let gf: Vec<f32> = read(&of);
    let gd: Vec<f64> = read(&od);
    let gi: Vec<i32> = read(&oi);
    let gl: Vec<i64> = read(&ol);
    let gh: Vec<u16> = read(&oh);
    let mut ck = Check::new("constants");
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let d = x as f64;
        let wf = [
            x.mul_add(0.5, 4.0),
            x.mul_add(-2.0, -1.0),
            x * (std::f32::consts::FRAC_1_PI / 2.0),
            x.mul_add(3.7, 1234.5),
            isa_min32(x, -4.0),
            x + 1.0e10,
        ];
        for (k, w) in wf.into_iter().enumerate() {
            ck.f32(gf[6 * i + k], w, || format!("f32 op {k} x={x:e} (i={i})"));
        }
        let wd = [d.mul_add(0.5, 2.0), d * 0.1, d + 1_234_567.890_625];
        for (k, w) in wd.into_iter().enumerate() {
            ck.f64(gd[3 * i + k], w, || format!("f64 op {k} x={x:e} (i={i})"));
        }
        let wi = [
            y.wrapping_mul(64).wrapping_sub(16),
            y.wrapping_mul(65).wrapping_add(0x1234_5678),
            y & -16,
            (y as u32 ^ 0xdead_beef) as i32,
        ];
        for (k, w) in wi.into_iter().enumerate() {
            ck.eq(gi[4 * i + k], w, || format!("i32 op {k} y={y} (i={i})"));
        }
        let l = y as i64;
        ck.eq(
            gl[2 * i],
            l.wrapping_mul(0x1_0000_0001).wrapping_add(0x1234_5678_9abc),
            || format!("i64 literal mad y={y} (i={i})"),
        );
        ck.eq(gl[2 * i + 1], l ^ -2, || {
            format!("i64 xor -2 y={y} (i={i})")
        });
        let h = f16(d);
        let fh = f16_to_f64(h);
        ck.f16(gh[2 * i], f16(fh * 0.5 - 2.0), || {
            format!("f16 fma(h, 0.5, -2) h={h:#06x} (i={i})")
        });
        ck.f16(gh[2 * i + 1], f16(fh * 1.75), || {
            format!("f16 h * 1.75 h={h:#06x} (i={i})")
        });
    }
    ck.finish();
}

#[test]
fn wmma_f16() {
    let tiles = 3;
    let mut rng = Rng::new(907);
    // Multiples of 1/8 in [-1, 1] and C in multiples of 1/4: all sums exact in f32.
    let a: Vec<u16> = (0..256 * tiles)
        .map(|_| f16(rng.range(-8, 8) as f64 / 8.0))
        .collect();
    let b: Vec<u16> = (0..256 * tiles)
        .map(|_| f16(rng.range(-8, 8) as f64 / 8.0))
        .collect();
    let c: Vec<f32> = (0..256 * tiles)
        .map(|_| rng.range(-40, 40) as f32 * 0.25)
        .collect();
    let (d, ba, bb, bc) = (
        filled(256 * tiles, f32::NAN),
        upload(&a),
        upload(&b),
        upload(&c),
    );
    run(
        PACKED,
        "wmma_f16",
        &[
            Arg::Buffer(&d),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
        ],
        [tiles as u32, 1, 1],
        [32, 1, 1],
    );
    let got: Vec<f32> = read(&d);
    let mut ck = Check::new("wmma_f16");
    for t in 0..tiles {
        for r in 0..16 {
            for col in 0..16 {
                let o = t * 256;
                let want: f64 = (0..16)
                    .map(|k| f16_to_f64(a[o + r * 16 + k]) * f16_to_f64(b[o + k * 16 + col]))
                    .sum::<f64>()
                    + c[o + r * 16 + col] as f64;
                ck.f32(got[o + r * 16 + col], want as f32, || {
                    format!("tile {t} D[{r}][{col}]")
                });
            }
        }
    }
    ck.finish();
}
