//! memory.hip: vector loads/stores, 64-bit pointers, scratch, scalar loads, kernel arguments,
//! 2-D and 3-D grids.

use crate::common::*;
use crate::MEMORY;
use hcq::Arg;

const LOCAL: u32 = 64;

#[test]
fn mem_vec() {
    let n = 1100;
    let mut rng = Rng::new(701);
    let a: Vec<f32> = (0..4 * n).map(|_| rng.f32_exp(-20, 20)).collect();
    let b: Vec<f32> = (0..4 * n).map(|_| rng.f32_exp(-20, 20)).collect();
    let c: Vec<i32> = (0..2 * n).map(|_| rng.i32()).collect();
    let d: Vec<u32> = (0..3 * n).map(|_| rng.u32()).collect();
    let (o4, o2, o3) = (
        filled(4 * n, f32::NAN),
        filled(2 * n, 0x5a5a5a5ai32),
        filled(3 * n, 0x5a5a5a5au32),
    );
    let (ba, bb, bc, bd) = (upload(&a), upload(&b), upload(&c), upload(&d));
    run(
        MEMORY,
        "mem_vec",
        &[
            Arg::Buffer(&o4),
            Arg::Buffer(&o2),
            Arg::Buffer(&o3),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::Buffer(&bc),
            Arg::Buffer(&bd),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let (g4, g2, g3): (Vec<f32>, Vec<i32>, Vec<u32>) = (read(&o4), read(&o2), read(&o3));
    let mut ck = Check::new("mem_vec");
    for i in 0..n {
        for k in 0..4 {
            // x.wzyx * 2 + y: the product by 2 is exact, so fused or not gives the same.
            let want = (a[4 * i + 3 - k] * 2.0) + b[4 * i + k];
            ck.f32(g4[4 * i + k], want, || format!("float4 lane {k} (i={i})"));
        }
        let (vx, vy) = (c[2 * i], c[2 * i + 1]);
        ck.eq(g2[2 * i], vy.wrapping_sub(1), || format!("int2.x (i={i})"));
        ck.eq(g2[2 * i + 1], vx ^ vy, || format!("int2.y (i={i})"));
        let w = &d[3 * i..3 * i + 3];
        ck.eq(
            &g3[3 * i..3 * i + 3],
            &[w[2], w[0].wrapping_add(w[1]), w[1] << 1][..],
            || format!("uint3 (i={i})"),
        );
    }
    ck.finish();
}

#[test]
fn mem_ptr64() {
    let n = 1500;
    let len = 5000usize;
    let mut rng = Rng::new(702);
    let base: Vec<i32> = (0..len).map(|_| rng.i32()).collect();
    let idx: Vec<u64> = (0..n)
        .map(|_| rng.range(0, len as i64 - 1) as u64)
        .collect();
    let (out, bbase, bidx) = (
        filled(3 * n, 0x5a5a5a5a5a5a5a5ai64),
        upload(&base),
        upload(&idx),
    );
    run(
        MEMORY,
        "mem_ptr64",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&bbase),
            Arg::Buffer(&bidx),
            Arg::I32(n as i32),
            Arg::I64(len as i64),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("mem_ptr64");
    for i in 0..n {
        let j = idx[i] as usize;
        let want = [
            base[j] as i64,
            base[len - 1 - j] as i64,
            (len as i64 - 1 - 2 * j as i64) * 4,
        ];
        for k in 0..3 {
            ck.eq(got[3 * i + k], want[k], || {
                format!("op {k} idx={j} (i={i})")
            });
        }
    }
    ck.finish();
}

#[test]
fn mem_ptr_chase() {
    let n = 1300;
    let m: usize = 700;
    let mut rng = Rng::new(703);
    let data: Vec<i32> = (0..m)
        .map(|_| rng.range(-1_000_000, 1_000_000) as i32)
        .collect();
    let perm: Vec<i32> = (0..n)
        .map(|_| rng.range(0, 40) as i32 * 17 % m as i32)
        .collect();
    let (table, bdata, bperm, out) = (
        filled(n, 0u64),
        upload(&data),
        upload(&perm),
        filled(n, 0x5a5a5a5ai32),
    );
    run(
        MEMORY,
        "mem_ptr_store",
        &[
            Arg::Buffer(&table),
            Arg::Buffer(&bdata),
            Arg::Buffer(&bperm),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let addrs: Vec<u64> = read(&table);
    run(
        MEMORY,
        "mem_ptr_chase",
        &[Arg::Buffer(&out), Arg::Buffer(&table), Arg::I32(n as i32)],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("mem_ptr_chase");
    // The stored addresses are 4 bytes apart per element of `data`.
    let data_base = addrs[0] - 4 * perm[0] as u64;
    for i in 0..n {
        ck.eq(addrs[i], data_base + 4 * perm[i] as u64, || {
            format!("stored address (i={i})")
        });
        let want = data[perm[i] as usize] * 2 + (perm[i] == perm[(i + 1) % n]) as i32;
        ck.eq(got[i], want, || {
            format!("loaded through the pointer, perm={} (i={i})", perm[i])
        });
    }
    ck.finish();
}

#[test]
fn mem_scratch() {
    let n = 600;
    let mut rng = Rng::new(704);
    let a: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let (out, ba) = (filled(2 * n, 0x5a5a5a5ai32), upload(&a));
    run(
        MEMORY,
        "mem_scratch",
        &[Arg::Buffer(&out), Arg::Buffer(&ba), Arg::I32(n as i32)],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("mem_scratch");
    for i in 0..n {
        let x = a[i];
        let mut p = [0i32; 64];
        for (k, v) in p.iter_mut().enumerate() {
            *v = x.wrapping_mul(k as u32) as i32 ^ k as i32;
        }
        for j in 0..24 {
            let idx = ((x >> j) & 63) as usize;
            p[idx] = p[idx].wrapping_add(j);
            p[(idx * 7 + 3) & 63] ^= p[idx];
        }
        let w0 = p[(x & 63) as usize].wrapping_add(p[((x >> 6) & 63) as usize]);
        let w1 = (0..64).step_by(3).fold(0i32, |s, k| s.wrapping_add(p[k]));
        ck.eq(got[2 * i], w0, || format!("lookup, a={x:#x} (i={i})"));
        ck.eq(got[2 * i + 1], w1, || format!("sum, a={x:#x} (i={i})"));
    }
    ck.finish();
}

#[test]
fn mem_args() {
    let n = 300;
    // params_t: int a[8] at 0, float scale at 32, long offset at 40 (48 bytes).
    let pa: [i32; 8] = [3, -7, 11, 100, -1000, 5, 0, 42];
    let (scale, offset) = (0.75f32, 1i64 << 40);
    let mut prm = Vec::new();
    for v in pa {
        prm.extend_from_slice(&v.to_le_bytes());
    }
    prm.extend_from_slice(&scale.to_le_bytes());
    prm.extend_from_slice(&[0; 4]);
    prm.extend_from_slice(&offset.to_le_bytes());
    let mut rng = Rng::new(705);
    let x: Vec<i32> = (0..n)
        .map(|_| rng.range(-100_000, 100_000) as i32)
        .collect();
    let (i32v, u32v, i64v, u64v, f32v, f64v) = (
        -123456i32,
        0xfedc_ba98u32,
        -(1i64 << 50) + 7,
        0xfedc_ba98_7654_3210u64,
        1.5f32,
        0.1f64,
    );
    let (out, bprm, bx) = (filled(8 * n, f64::NAN), upload(&prm), upload(&x));
    run(
        MEMORY,
        "mem_args",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&bprm),
            Arg::I32(i32v),
            Arg::U32(u32v),
            Arg::I64(i64v),
            Arg::U64(u64v),
            Arg::F32(f32v),
            Arg::F64(f64v),
            Arg::Buffer(&bx),
            Arg::I32(n as i32),
        ],
        groups(n, LOCAL),
        [LOCAL, 1, 1],
    );
    let got: Vec<f64> = read(&out);
    let mut ck = Check::new("mem_args");
    for i in 0..n {
        let want = [
            pa[i & 7] as f64 * scale as f64 + offset as f64,
            (pa[0] + pa[7]) as f64,
            i32v as f64 + x[i] as f64,
            u32v as f64,
            (i64v + i as i64) as f64,
            (u64v >> 12) as f64,
            f32v as f64 * x[i] as f64,
            f64v + i as f64,
        ];
        let names = [
            "scalar-loaded params",
            "params a[0]+a[7]",
            "i32 arg",
            "u32 arg",
            "i64 arg",
            "u64 arg",
            "f32 arg",
            "f64 arg",
        ];
        for k in 0..8 {
            ck.f64(got[8 * i + k], want[k], || format!("{} (i={i})", names[k]));
        }
    }
    ck.finish();
}

#[test]
fn mem_grid3d() {
    let (grid, local) = ([3u32, 2, 4], [4u32, 3, 2]);
    let (w, h, d) = (
        (grid[0] * local[0]) as usize,
        (grid[1] * local[1]) as usize,
        (grid[2] * local[2]) as usize,
    );
    let out = filled(2 * w * h * d, 0x5a5a5a5au32);
    run(MEMORY, "mem_grid3d", &[Arg::Buffer(&out)], grid, local);
    let got: Vec<u32> = read(&out);
    let mut ck = Check::new("mem_grid3d");
    for z in 0..d {
        for y in 0..h {
            for x in 0..w {
                let o = 2 * ((z * h + y) * w + x);
                let (tx, ty, tz) = (
                    x as u32 % local[0],
                    y as u32 % local[1],
                    z as u32 % local[2],
                );
                ck.eq(
                    got[o],
                    ((x as u32) << 20) | ((y as u32) << 10) | z as u32,
                    || format!("coordinates at ({x},{y},{z})"),
                );
                let want = (local[0] << 24)
                    | (local[1] << 16)
                    | (local[2] << 8)
                    | (grid[2] << 4)
                    | (tx + ty + tz);
                ck.eq(got[o + 1], want, || {
                    format!("sizes / local ids at ({x},{y},{z})")
                });
            }
        }
    }
    ck.finish();
}

#[test]
fn mem_grid2d() {
    let (w, h) = (37usize, 29usize);
    let mut rng = Rng::new(706);
    let img: Vec<i32> = (0..w * h).map(|_| rng.range(-1000, 1000) as i32).collect();
    let (out, bimg) = (filled(w * h, 0x5a5a5a5ai32), upload(&img));
    run(
        MEMORY,
        "mem_grid2d",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&bimg),
            Arg::I32(w as i32),
            Arg::I32(h as i32),
        ],
        [w.div_ceil(8) as u32, h.div_ceil(4) as u32, 1],
        [8, 4, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("mem_grid2d");
    for y in 0..h as i32 {
        for x in 0..w as i32 {
            let mut s = 0;
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let xx = (x + dx).clamp(0, w as i32 - 1);
                    let yy = (y + dy).clamp(0, h as i32 - 1);
                    s += img[(yy * w as i32 + xx) as usize] * (dx + 2) * (dy + 3);
                }
            }
            ck.eq(got[(y * w as i32 + x) as usize], s, || format!("({x},{y})"));
        }
    }
    ck.finish();
}

#[test]
fn mem_d16() {
    let n = 1000;
    let mut rng = Rng::new(707);
    let a: Vec<i16> = (0..n).map(|_| rng.u32() as i16).collect();
    let b: Vec<i16> = (0..n).map(|_| rng.u32() as i16).collect();
    let (out, ba, bb) = (filled(2 * n, 0x5a5ai16), upload(&a), upload(&b));
    run(
        MEMORY,
        "mem_d16",
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
    let mut ck = Check::new("mem_d16");
    for i in 0..n {
        ck.eq(got[2 * i], b[n - 1 - i].wrapping_sub(5), || {
            format!("high half (i={i})")
        });
        ck.eq(got[2 * i + 1], a[i].wrapping_add(3), || {
            format!("low half (i={i})")
        });
    }
    ck.finish();
}
