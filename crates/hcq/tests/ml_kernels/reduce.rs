//! Row reductions: sum/max/argmax over workgroup sizes 32..1024, softmax and log-softmax (also
//! with the row in dynamic LDS), layernorm/rmsnorm, and a two-pass sum through partials.

use crate::common::*;
use crate::REDUCE;
use hcq::Arg;

#[test]
fn row_sum_max_argmax_every_workgroup_size() {
    let (rows, cols) = (6usize, 1000usize);
    let mut rng = Rng::new(10);
    // Multiples of 1/8 below 64 in magnitude: every partial sum is exact in f32, so the sum
    // is exact whatever the order; the coarse grid also makes ties for the maximum common.
    let mut x: Vec<f32> = (0..rows * cols)
        .map(|_| rng.range(-512, 511) as f32 / 8.0)
        .collect();
    // Rows 1 and 3 hold their maximum twice, the later copy in a different wave.
    for r in [1usize, 3] {
        let row = &mut x[r * cols..(r + 1) * cols];
        row[700] = 64.0;
        row[129] = 64.0;
    }
    let x_buf = upload(&x);
    for local in [32u32, 64, 256, 1024] {
        let (sums, maxes, argmaxes) = (
            filled(rows, f32::NAN),
            filled(rows, f32::NAN),
            filled(rows, -1i32),
        );
        run(
            REDUCE,
            "row_sum_max_argmax",
            &[
                Arg::Buffer(&sums),
                Arg::Buffer(&maxes),
                Arg::Buffer(&argmaxes),
                Arg::Buffer(&x_buf),
                Arg::I32(cols as i32),
            ],
            [rows as u32, 1, 1],
            [local, 1, 1],
        );
        let (sums, maxes, argmaxes): (Vec<f32>, Vec<f32>, Vec<i32>) =
            (read(&sums), read(&maxes), read(&argmaxes));
        let mut check = Check::new(&format!("row_sum_max_argmax, workgroup {local}"));
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let sum: f64 = row.iter().map(|&v| v as f64).sum();
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let first = row.iter().position(|&v| v == max).unwrap() as i32;
            check.f32(sums[r], sum as f32, || format!("sum of row {r}"));
            check.f32(maxes[r], max, || format!("max of row {r}"));
            check.eq(argmaxes[r], first, || format!("argmax of row {r}"));
        }
        check.finish();
    }
}

fn softmax_reference(row: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let max = row
        .iter()
        .map(|&v| v as f64)
        .fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let probs = row.iter().map(|&v| (v as f64 - max).exp() / sum).collect();
    let log_probs = row.iter().map(|&v| v as f64 - max - sum.ln()).collect();
    (probs, log_probs)
}

/// Relative error bound of a softmax probability with inputs spread over `spread`: each exp
/// sees an argument off by (|x - max| + |x - max| * log2 e) roundings of 2^-24 relative, plus
/// 1 ulp of v_exp_f32; the sum adds at most one rounding per element (and carries the worst
/// term error); the reciprocal and the product add one each.
fn softmax_relative_bound(spread: f64, cols: usize) -> f64 {
    (2.0 * 2.5 * spread + cols as f64 + 8.0) * F32_UNIT_ROUNDOFF
}

#[test]
fn softmax_and_log_softmax() {
    let (rows, cols) = (5usize, 1000usize);
    let mut rng = Rng::new(11);
    let x = rng.f32s(rows * cols, -10.0, 10.0);
    let (probs, log_probs) = (filled(rows * cols, f32::NAN), filled(rows * cols, f32::NAN));
    run(
        REDUCE,
        "softmax_rows",
        &[
            Arg::Buffer(&probs),
            Arg::Buffer(&log_probs),
            Arg::Buffer(&upload(&x)),
            Arg::I32(cols as i32),
        ],
        [rows as u32, 1, 1],
        [256, 1, 1],
    );
    let (probs, log_probs): (Vec<f32>, Vec<f32>) = (read(&probs), read(&log_probs));
    let relative = softmax_relative_bound(20.0, cols);
    let mut check = Check::new("softmax_rows");
    for r in 0..rows {
        let (want_p, want_lp) = softmax_reference(&x[r * cols..(r + 1) * cols]);
        for c in 0..cols {
            let i = r * cols + c;
            check.close(probs[i], want_p[c], relative * want_p[c], || {
                format!("softmax[{r}][{c}]")
            });
            // log-softmax: the log of the sum is off by the sum's relative error (absolute in
            // the log) plus v_log_f32's and the ln 2 product's roundings; the subtractions
            // round once each relative to their results.
            let bound = relative + (4.0 * want_lp[c].abs() + 4.0) * F32_UNIT_ROUNDOFF;
            check.close(log_probs[i], want_lp[c], bound, || {
                format!("log_softmax[{r}][{c}]")
            });
        }
    }
    check.finish();
}

#[test]
fn softmax_with_row_in_dynamic_lds() {
    let (rows, cols) = (4usize, 700usize);
    let mut rng = Rng::new(12);
    let x = rng.f32s(rows * cols, -8.0, 8.0);
    let probs = filled(rows * cols, f32::NAN);
    run_with_lds(
        REDUCE,
        "softmax_rows_cached",
        &[
            Arg::Buffer(&probs),
            Arg::Buffer(&upload(&x)),
            Arg::I32(cols as i32),
        ],
        [rows as u32, 1, 1],
        [128, 1, 1],
        (cols * 4) as u32,
    );
    let probs: Vec<f32> = read(&probs);
    let relative = softmax_relative_bound(16.0, cols);
    let mut check = Check::new("softmax_rows_cached");
    for r in 0..rows {
        let (want, _) = softmax_reference(&x[r * cols..(r + 1) * cols]);
        for c in 0..cols {
            check.close(probs[r * cols + c], want[c], relative * want[c], || {
                format!("softmax[{r}][{c}]")
            });
        }
    }
    check.finish();
}

#[test]
fn layernorm_and_rmsnorm() {
    let (rows, cols) = (5usize, 768usize);
    let eps = 1e-5f32;
    let mut rng = Rng::new(13);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| rng.f32_in(-3.0, 3.0) + (i / cols) as f32 * 0.5)
        .collect();
    let gamma = rng.f32s(cols, 0.5, 1.5);
    let beta = rng.f32s(cols, -0.5, 0.5);
    let (ln, rms) = (filled(rows * cols, f32::NAN), filled(rows * cols, f32::NAN));
    run(
        REDUCE,
        "layernorm_rmsnorm",
        &[
            Arg::Buffer(&ln),
            Arg::Buffer(&rms),
            Arg::Buffer(&upload(&x)),
            Arg::Buffer(&upload(&gamma)),
            Arg::Buffer(&upload(&beta)),
            Arg::I32(cols as i32),
            Arg::F32(eps),
        ],
        [rows as u32, 1, 1],
        [256, 1, 1],
    );
    let (ln, rms): (Vec<f32>, Vec<f32>) = (read(&ln), read(&rms));
    let n = cols as f64;
    let u = F32_UNIT_ROUNDOFF;
    let mut check = Check::new("layernorm_rmsnorm");
    for r in 0..rows {
        let row: Vec<f64> = x[r * cols..(r + 1) * cols]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mean = row.iter().sum::<f64>() / n;
        let mean_abs = row.iter().map(|v| v.abs()).sum::<f64>() / n;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + eps as f64).sqrt();
        let rrms = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n + eps as f64).sqrt();
        for c in 0..cols {
            let (g, b) = (gamma[c] as f64, beta[c] as f64);
            let d = row[c] - mean;
            let want_ln = d * rstd * g + b;
            // The mean is off by at most n roundings of mean|x| (absolute, shifting every d);
            // the variance by about n + 4 relative roundings, which rsq halves (plus its own
            // ulp); the normalization and affine steps round 4 more times.
            let mean_error = n * u * mean_abs;
            let bound = g * rstd * (mean_error + d.abs() * (n / 2.0 + 8.0) * u)
                + 4.0 * u * (want_ln.abs() + b.abs());
            check.close(ln[r * cols + c], want_ln, bound, || {
                format!("layernorm[{r}][{c}]")
            });
            let want_rms = row[c] * rrms * g;
            let bound_rms = (n / 2.0 + 8.0) * u * want_rms.abs();
            check.close(rms[r * cols + c], want_rms, bound_rms, || {
                format!("rmsnorm[{r}][{c}]")
            });
        }
    }
    check.finish();
}

#[test]
fn two_pass_sum_through_partials() {
    let n = 100_000usize;
    let chunk = 4096usize;
    let mut rng = Rng::new(14);
    let x = rng.f32s(n, -1.0, 1.0);
    let partial_count = n.div_ceil(chunk);
    let partials = filled(partial_count, f32::NAN);
    let total = filled(1, f32::NAN);
    run(
        REDUCE,
        "sum_partials",
        &[
            Arg::Buffer(&partials),
            Arg::Buffer(&upload(&x)),
            Arg::I32(n as i32),
            Arg::I32(chunk as i32),
        ],
        [partial_count as u32, 1, 1],
        [256, 1, 1],
    );
    run(
        REDUCE,
        "sum_partials",
        &[
            Arg::Buffer(&total),
            Arg::Buffer(&partials),
            Arg::I32(partial_count as i32),
            Arg::I32(partial_count as i32),
        ],
        [1, 1, 1],
        [64, 1, 1],
    );
    let (partials, total): (Vec<f32>, Vec<f32>) = (read(&partials), read(&total));
    // An element passes through at most 16 serial adds in its thread, 5 butterfly steps and 8
    // per-wave adds in pass 1, then 1 + 5 + 2 in pass 2: 37 roundings, each at most 2^-24 of
    // the magnitudes summed so far, so the error stays below 40 * 2^-24 * sum |x|.
    let mut check = Check::new("sum_partials");
    for (p, got) in partials.iter().enumerate() {
        let part = &x[p * chunk..((p + 1) * chunk).min(n)];
        let want: f64 = part.iter().map(|&v| v as f64).sum();
        let magnitude: f64 = part.iter().map(|&v| v.abs() as f64).sum();
        check.close(*got, want, 40.0 * F32_UNIT_ROUNDOFF * magnitude, || {
            format!("partial {p}")
        });
    }
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let magnitude: f64 = x.iter().map(|&v| v.abs() as f64).sum();
    check.close(total[0], want, 40.0 * F32_UNIT_ROUNDOFF * magnitude, || {
        "total".to_string()
    });
    check.finish();
}
