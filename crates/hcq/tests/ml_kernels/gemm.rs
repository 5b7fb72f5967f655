//! GEMM variants on sizes that are not multiples of any tile. Every variant but WMMA
//! accumulates one fma per k in increasing k order, so the host repeats that order exactly.

use crate::common::*;
use crate::GEMM;
use hcq::Arg;

const M: usize = 37;
const N: usize = 45;
const K: usize = 53;

/// C = A * B with one f32 fma per k in increasing k order, as the kernels do.
fn gemm_in_k_order(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for row in 0..m {
        for col in 0..n {
            c[row * n + col] =
                (0..k).fold(0f32, |acc, i| a[row * k + i].mul_add(b[i * n + col], acc));
        }
    }
    c
}

fn check_exact(what: &str, got: &[f32], want: &[f32], n: usize) {
    let mut check = Check::new(what);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        check.f32(*g, *w, || format!("c[{}][{}]", i / n, i % n));
    }
    check.finish();
}

fn run_gemm(name: &str, a: &[f32], b: &[f32], groups: [u32; 3], local: [u32; 3]) -> Vec<f32> {
    let c = filled(M * N, f32::NAN);
    run(
        GEMM,
        name,
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&upload(a)),
            Arg::Buffer(&upload(b)),
            Arg::I32(M as i32),
            Arg::I32(N as i32),
            Arg::I32(K as i32),
        ],
        groups,
        local,
    );
    read(&c)
}

#[test]
fn naive_tiled_and_spilling_gemm() {
    let mut rng = Rng::new(20);
    let a = rng.f32s(M * K, -2.0, 2.0);
    let b = rng.f32s(K * N, -2.0, 2.0);
    let want = gemm_in_k_order(&a, &b, M, N, K);
    let naive = run_gemm(
        "gemm_naive",
        &a,
        &b,
        [blocks(N, 16), blocks(M, 8), 1],
        [16, 8, 1],
    );
    check_exact("gemm_naive", &naive, &want, N);
    let tiled = run_gemm(
        "gemm_lds_tiled",
        &a,
        &b,
        [blocks(N, 32), blocks(M, 32), 1],
        [32, 8, 1],
    );
    check_exact("gemm_lds_tiled", &tiled, &want, N);
    let spilling = run_gemm(
        "gemm_spilling",
        &a,
        &b,
        [blocks(N, 64), blocks(M, 64), 1],
        [8, 8, 1],
    );
    check_exact("gemm_spilling", &spilling, &want, N);
}

#[test]
fn register_blocked_gemm_with_epilogue() {
    let (m, n, k) = (70usize, 131usize, 29usize);
    let (alpha, beta) = (1.5f32, -0.75f32);
    let mut rng = Rng::new(21);
    let a = rng.f32s(m * k, -2.0, 2.0);
    let b = rng.f32s(k * n, -2.0, 2.0);
    let c_in = rng.f32s(m * n, -2.0, 2.0);
    let c = filled(m * n, f32::NAN);
    run(
        GEMM,
        "gemm_register_blocked",
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&upload(&c_in)),
            Arg::Buffer(&upload(&a)),
            Arg::Buffer(&upload(&b)),
            Arg::I32(m as i32),
            Arg::I32(n as i32),
            Arg::I32(k as i32),
            Arg::F32(alpha),
            Arg::F32(beta),
        ],
        [blocks(n, 64), blocks(m, 64), 1],
        [16, 16, 1],
    );
    let got: Vec<f32> = read(&c);
    let want: Vec<f32> = gemm_in_k_order(&a, &b, m, n, k)
        .iter()
        .zip(&c_in)
        .map(|(acc, cin)| alpha.mul_add(*acc, beta * cin))
        .collect();
    check_exact("gemm_register_blocked", &got, &want, n);
}

/// Random f16 values (as bits) with small magnitudes: a few significant bits each.
fn f16_operands(rng: &mut Rng, count: usize) -> (Vec<u16>, Vec<f32>) {
    let values: Vec<f32> = (0..count)
        .map(|_| rng.range(-2048, 2047) as f32 / 1024.0)
        .collect();
    (values.iter().map(|&v| f16_bits(v as f64)).collect(), values)
}

#[test]
fn f16_gemm_with_f32_accumulation() {
    let mut rng = Rng::new(22);
    let (a_bits, a) = f16_operands(&mut rng, M * K);
    let (b_bits, b) = f16_operands(&mut rng, K * N);
    let c = filled(M * N, f32::NAN);
    run(
        GEMM,
        "gemm_f16_acc_f32",
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&upload(&a_bits)),
            Arg::Buffer(&upload(&b_bits)),
            Arg::I32(M as i32),
            Arg::I32(N as i32),
            Arg::I32(K as i32),
        ],
        [blocks(N, 16), blocks(M, 16), 1],
        [16, 16, 1],
    );
    check_exact(
        "gemm_f16_acc_f32",
        &read(&c),
        &gemm_in_k_order(&a, &b, M, N, K),
        N,
    );
}

#[test]
fn wmma_gemm() {
    let mut rng = Rng::new(23);
    let (a_bits, a) = f16_operands(&mut rng, M * K);
    let (b_bits, b) = f16_operands(&mut rng, K * N);
    let c = filled(M * N, f32::NAN);
    run(
        GEMM,
        "gemm_wmma",
        &[
            Arg::Buffer(&c),
            Arg::Buffer(&upload(&a_bits)),
            Arg::Buffer(&upload(&b_bits)),
            Arg::I32(M as i32),
            Arg::I32(N as i32),
            Arg::I32(K as i32),
        ],
        [blocks(N, 32), blocks(M, 16), 1],
        [64, 1, 1],
    );
    let got: Vec<f32> = read(&c);
    let mut check = Check::new("gemm_wmma");
    for row in 0..M {
        for col in 0..N {
            let terms = (0..K).map(|i| a[row * K + i] as f64 * b[i * N + col] as f64);
            let want: f64 = terms.clone().sum();
            let magnitude: f64 = terms.map(f64::abs).sum();
            // f16 products are exact in f32; the unit's summation order within a 16-deep
            // step is unspecified, so allow one f32 rounding per term plus one per step.
            let bound = (K + K / 16 + 2) as f64 * F32_UNIT_ROUNDOFF * magnitude;
            check.close(got[row * N + col], want, bound, || {
                format!("c[{row}][{col}]")
            });
        }
    }
    check.finish();
}
