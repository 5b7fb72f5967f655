//! lds.hip: workgroup-shared memory with barriers and fences.

use crate::common::*;
use crate::LDS;
use hcq::Arg;

#[test]
fn lds_reduce() {
    let n: usize = 3000; // 12 workgroups of 256, the last one partial
    let mut rng = Rng::new(501);
    let a: Vec<u32> = (0..n).map(|_| rng.u32()).collect();
    let g = n.div_ceil(256);
    let (out, ba) = (filled(g, 0x5a5a5a5au32), upload(&a));
    run(
        LDS,
        "lds_reduce",
        &[Arg::Buffer(&out), Arg::Buffer(&ba), Arg::I32(n as i32)],
        groups(n, 256),
        [256, 1, 1],
    );
    let got: Vec<u32> = read(&out);
    let mut ck = Check::new("lds_reduce");
    for (k, chunk) in a.chunks(256).enumerate() {
        let want = chunk.iter().fold(0u32, |s, &v| s.wrapping_add(v));
        ck.eq(got[k], want, || format!("workgroup {k}"));
    }
    ck.finish();
}

#[test]
fn lds_scan() {
    let n = 1000; // 8 workgroups of 128, the last one partial
    let mut rng = Rng::new(502);
    let a: Vec<i32> = (0..n)
        .map(|_| rng.range(-1_000_000, 1_000_000) as i32)
        .collect();
    let (out, ba) = (filled(n, 0x5a5a5a5ai32), upload(&a));
    run(
        LDS,
        "lds_scan",
        &[Arg::Buffer(&out), Arg::Buffer(&ba), Arg::I32(n as i32)],
        groups(n, 128),
        [128, 1, 1],
    );
    let got: Vec<i32> = read(&out);
    let mut ck = Check::new("lds_scan");
    for (k, chunk) in a.chunks(128).enumerate() {
        let mut s = 0i32;
        for (t, &v) in chunk.iter().enumerate() {
            s += v;
            let i = k * 128 + t;
            ck.eq(got[i], s, || format!("workgroup {k} lane {t} (i={i})"));
        }
    }
    ck.finish();
}

#[test]
fn lds_matmul() {
    let (m, k, p) = (45usize, 50usize, 37usize);
    let mut rng = Rng::new(503);
    // Multiples of 1/4 in [-2, 2]: every product and partial sum is exact in f32, so the
    // result does not depend on the summation order or on fma contraction.
    let a: Vec<f32> = (0..m * k).map(|_| rng.range(-8, 8) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..k * p).map(|_| rng.range(-8, 8) as f32 * 0.25).collect();
    let (c, ba, bb) = (filled(m * p, f32::NAN), upload(&a), upload(&b));
    run(
        LDS,
        "lds_matmul",
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&ba),
            Arg::Buffer(&bb),
            Arg::I32(m as i32),
            Arg::I32(k as i32),
            Arg::I32(p as i32),
        ],
        [p.div_ceil(16) as u32, m.div_ceil(16) as u32, 1],
        [16, 16, 1],
    );
    let got: Vec<f32> = read(&c);
    let mut ck = Check::new("lds_matmul");
    for r in 0..m {
        for col in 0..p {
            let want: f64 = (0..k)
                .map(|j| a[r * k + j] as f64 * b[j * p + col] as f64)
                .sum();
            ck.f32(got[r * p + col], want as f32, || format!("C[{r}][{col}]"));
        }
    }
    ck.finish();
}

#[test]
fn lds_transpose() {
    let (rows, cols) = (70usize, 45usize);
    let input: Vec<u32> = (0..rows * cols)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761))
        .collect();
    let (out, bi) = (filled(rows * cols, 0x5a5a5a5au32), upload(&input));
    run(
        LDS,
        "lds_transpose",
        &[
            Arg::Buffer(&out),
            Arg::Buffer(&bi),
            Arg::I32(rows as i32),
            Arg::I32(cols as i32),
        ],
        [cols.div_ceil(16) as u32, rows.div_ceil(16) as u32, 1],
        [16, 16, 1],
    );
    let got: Vec<u32> = read(&out);
    let mut ck = Check::new("lds_transpose");
    for r in 0..rows {
        for c in 0..cols {
            ck.eq(got[c * rows + r], input[r * cols + c], || {
                format!("out[{c}][{r}]")
            });
        }
    }
    ck.finish();
}

#[test]
fn lds_widths() {
    let n = 700; // 11 workgroups of 64, the last one partial
    let mut rng = Rng::new(504);
    let a: Vec<i64> = (0..n).map(|_| rng.next_u64() as i64).collect();
    let (out, ba) = (filled(n * 6, 0x5a5a5a5a5a5a5a5ai64), upload(&a));
    run(
        LDS,
        "lds_widths",
        &[Arg::Buffer(&out), Arg::Buffer(&ba), Arg::I32(n as i32)],
        groups(n, 64),
        [64, 1, 1],
    );
    let got: Vec<i64> = read(&out);
    let mut ck = Check::new("lds_widths");
    let val = |j: usize| if j < n { a[j] } else { 0 };
    for i in 0..n {
        let (g, t) = (i / 64, i % 64);
        let (xu, xw) = (val(g * 64 + (t + 1) % 64), val(g * 64 + (t + 63) % 64));
        let byte = |v: i64, k: u32| ((v >> (8 * k)) & 0xff) as f32;
        let want = [
            xu as i8 as i64,
            (xw >> 8) as u16 as i64,
            xu ^ xw,
            (byte(xu, 0) + 2.0 * byte(xu, 1) + 4.0 * byte(xu, 2) + 8.0 * byte(xu, 3)) as i64,
            xu as i32 as i64 + (xu >> 32) as i32 as i64,
            xw as i32 as i64 * 3 - (xw >> 32) as i32 as i64,
        ];
        let names = ["b8", "b16", "b64", "b128", "2addr", "2addr-w"];
        for k in 0..6 {
            ck.eq(got[6 * i + k], want[k], || format!("{} (i={i})", names[k]));
        }
    }
    ck.finish();
}

#[test]
fn lds_histogram() {
    let n = 3001;
    let mut rng = Rng::new(505);
    // Skewed: half the values land in bin 5, so many lanes hit the same LDS word at once.
    let a: Vec<u32> = (0..n)
        .map(|_| if rng.chance(1, 2) { 5 } else { rng.u32() })
        .collect();
    let (hist, ba) = (filled(64, 0u32), upload(&a));
    run(
        LDS,
        "lds_histogram",
        &[Arg::Buffer(&hist), Arg::Buffer(&ba), Arg::I32(n as i32)],
        groups(n, 256),
        [256, 1, 1],
    );
    let got: Vec<u32> = read(&hist);
    let mut want = [0u32; 64];
    for v in &a {
        want[(v & 63) as usize] += 1;
    }
    let mut ck = Check::new("lds_histogram");
    for b in 0..64 {
        ck.eq(got[b], want[b], || format!("bin {b}"));
    }
    ck.finish();
}
