//! HIP source as hipcc users write it, compiled with hcq's bundled HIP header (no ROCm):
//! three typical samples (vector add, a shared-memory reduction, a tiled matrix transpose)
//! unedited, the float math library against the host's, warp shuffles and votes, atomics and
//! `__half`, each result checked element by element against a host computation.

use hcq::{Arg, Buffer, Device, Program};

fn device() -> Device {
    Device::open("amd-emu:0").expect("the emulated GPU opens")
}

fn load(dev: &Device, source: &str, name: &str) -> Program {
    let lib = dev.compile(source).expect("compiles with clang-19");
    dev.program(&lib, name).unwrap()
}

fn upload<T: bytemuck::Pod>(dev: &Device, values: &[T]) -> Buffer {
    let b = dev.alloc(std::mem::size_of_val(values).max(4)).unwrap();
    b.write(values).unwrap();
    b
}

/// The three samples, as a HIP programming guide would have them.
const SAMPLES: &str = r#"
#include <hip/hip_runtime.h>

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

#define BLOCK 256
__global__ void block_sum(const int* in, int* out, int n) {
    __shared__ int partial[BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
    int v = 0;
    if (i < n) v += in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    partial[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[0];
}

#define TILE 16
__global__ void transpose(float* out, const float* in, int width, int height) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < width && y < height) tile[threadIdx.y][threadIdx.x] = in[y * width + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < height && y < width) out[y * height + x] = tile[threadIdx.x][threadIdx.y];
}

// gridDim and blockDim in two dimensions.
__global__ void shape(unsigned int* out) {
    unsigned int t = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y +
                     threadIdx.y * blockDim.x + threadIdx.x;
    out[4 * t] = gridDim.x;
    out[4 * t + 1] = gridDim.y;
    out[4 * t + 2] = blockDim.x;
    out[4 * t + 3] = blockDim.y;
}
"#;

#[test]
fn typical_hip_samples_run_unedited() {
    let dev = device();
    let lib = dev.compile(SAMPLES).unwrap();
    let prg = |name| dev.program(&lib, name).unwrap();

    let n = 10_000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 1.25).collect();
    let (ba, bb, bc) = (
        upload(&dev, &a),
        upload(&dev, &b),
        dev.alloc(n * 4).unwrap(),
    );
    let args = [
        Arg::Buffer(&ba),
        Arg::Buffer(&bb),
        Arg::Buffer(&bc),
        Arg::I32(n as i32),
    ];
    prg("vector_add")
        .launch(&args, [(n as u32).div_ceil(256), 1, 1], [256, 1, 1])
        .unwrap();
    let c: Vec<f32> = bc.read().unwrap();
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "c[{i}]");
    }

    let n = 100_003usize;
    let xs: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 2001 - 1000).collect();
    let blocks = n.div_ceil(512);
    let (input, sums) = (upload(&dev, &xs), dev.alloc(blocks * 4).unwrap());
    let args = [Arg::Buffer(&input), Arg::Buffer(&sums), Arg::I32(n as i32)];
    prg("block_sum")
        .launch(&args, [blocks as u32, 1, 1], [256, 1, 1])
        .unwrap();
    let got: Vec<i32> = sums.read().unwrap();
    for (k, &g) in got.iter().enumerate() {
        let want: i32 = xs[k * 512..((k + 1) * 512).min(n)].iter().sum();
        assert_eq!(g, want, "block {k}");
    }

    let (w, h) = (37usize, 53usize);
    let m: Vec<f32> = (0..w * h).map(|i| i as f32 * 0.25).collect();
    let (input, out) = (upload(&dev, &m), dev.alloc(w * h * 4).unwrap());
    let args = [
        Arg::Buffer(&out),
        Arg::Buffer(&input),
        Arg::I32(w as i32),
        Arg::I32(h as i32),
    ];
    let grid = [(w as u32).div_ceil(16), (h as u32).div_ceil(16), 1];
    prg("transpose").launch(&args, grid, [16, 16, 1]).unwrap();
    let t: Vec<f32> = out.read().unwrap();
    for y in 0..h {
        for x in 0..w {
            assert_eq!(t[x * h + y], m[y * w + x], "({x}, {y})");
        }
    }

    let out = dev.alloc(3 * 2 * 8 * 4 * 16).unwrap();
    prg("shape")
        .launch(&[Arg::Buffer(&out)], [3, 2, 1], [8, 4, 1])
        .unwrap();
    let got: Vec<u32> = out.read().unwrap();
    for t in 0..3 * 2 * 32 {
        assert_eq!(got[4 * t..4 * t + 4], [3, 2, 8, 4], "thread {t}");
    }
}

#[test]
fn the_header_is_there_without_an_include() {
    let dev = device();
    let prg = load(
        &dev,
        "__global__ void k(int* o) { o[threadIdx.x] = threadIdx.x * warpSize + __popc(threadIdx.x); }",
        "k",
    );
    let out = dev.alloc(64 * 4).unwrap();
    prg.launch(&[Arg::Buffer(&out)], [1, 1, 1], [64, 1, 1])
        .unwrap();
    let got: Vec<i32> = out.read().unwrap();
    for (t, &g) in got.iter().enumerate() {
        assert_eq!(
            g,
            t as i32 * 32 + (t as u32).count_ones() as i32,
            "lane {t}"
        );
    }
}

const MATH: &str = r#"
#include <hip/hip_runtime.h>
#define UNARY(name, expr) \
    __global__ void name(float* out, const float* in, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x; \
        if (i < n) { float x = in[i]; out[i] = expr; } }
UNARY(m_sqrtf, sqrtf(x)) UNARY(m_rsqrtf, rsqrtf(x)) UNARY(m_cbrtf, cbrtf(x))
UNARY(m_expf, expf(x)) UNARY(m_exp2f, exp2f(x)) UNARY(m_exp10f, exp10f(x)) UNARY(m_expm1f, expm1f(x))
UNARY(m_logf, logf(x)) UNARY(m_log2f, log2f(x)) UNARY(m_log10f, log10f(x)) UNARY(m_log1pf, log1pf(x))
UNARY(m_sinf, sinf(x)) UNARY(m_cosf, cosf(x)) UNARY(m_tanf, tanf(x))
UNARY(m_asinf, asinf(x)) UNARY(m_acosf, acosf(x)) UNARY(m_atanf, atanf(x))
UNARY(m_sinhf, sinhf(x)) UNARY(m_coshf, coshf(x)) UNARY(m_tanhf, tanhf(x))
UNARY(m_asinhf, asinhf(x)) UNARY(m_acoshf, acoshf(x)) UNARY(m_atanhf, atanhf(x))
UNARY(m_erff, erff(x)) UNARY(m_erfcf, erfcf(x))
UNARY(m_floorf, floorf(x)) UNARY(m_ceilf, ceilf(x)) UNARY(m_truncf, truncf(x)) UNARY(m_roundf, roundf(x))
UNARY(m_fabsf, fabsf(x)) UNARY(m_powf, powf(x, 1.37f)) UNARY(m_atan2f, atan2f(x, 0.75f - x))
UNARY(m_hypotf, hypotf(x, 2.5f)) UNARY(m_fmodf, fmodf(x, 0.7f)) UNARY(m_fmaf, fmaf(x, x, -1.0f))
UNARY(m_remainderf, remainderf(x, 0.7f)) UNARY(m_fmodf_big, fmodf(x * 1e6f, 0.3f))
UNARY(m_sqrt, sqrt(x)) UNARY(m_exp, exp(x)) UNARY(m_pow, pow(x, 2.0f))
UNARY(f_expf, __expf(x)) UNARY(f_logf, __logf(x)) UNARY(f_sinf, __sinf(x)) UNARY(f_cosf, __cosf(x))
UNARY(f_powf, __powf(x, 1.37f)) UNARY(f_fdividef, __fdividef(x, 3.0f))
"#;

/// The host's function, in f64: its result rounded to f32 is the reference.
type Host = fn(f64) -> f64;

/// Device results of `name` over `xs` within `ulps` of the host's `f`, or `abs` near zero.
fn check_math(dev: &Device, lib: &[u8], name: &str, f: Host, xs: &[f32], ulps: f32, abs: f32) {
    let prg = dev.program(lib, name).unwrap();
    let (input, out) = (upload(dev, xs), dev.alloc(xs.len() * 4).unwrap());
    let args = [
        Arg::Buffer(&out),
        Arg::Buffer(&input),
        Arg::I32(xs.len() as i32),
    ];
    prg.launch(&args, [(xs.len() as u32).div_ceil(64), 1, 1], [64, 1, 1])
        .unwrap();
    let got: Vec<f32> = out.read().unwrap();
    for (&x, &g) in xs.iter().zip(&got) {
        let want = f(f64::from(x)) as f32;
        if want.is_nan() {
            assert!(g.is_nan(), "{name}({x}) = {g}, the host says NaN");
            continue;
        }
        if want.is_infinite() {
            assert_eq!(g, want, "{name}({x})");
            continue;
        }
        let ulp = (want.abs().max(f32::MIN_POSITIVE) * f32::EPSILON).max(f32::MIN_POSITIVE);
        let err = (g - want).abs();
        assert!(
            err <= ulps * ulp || err <= abs,
            "{name}({x}) = {g}, the host says {want}: {:.1} ulp",
            err / ulp
        );
    }
}

fn spread(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32)
        .collect()
}

#[test]
fn the_math_library_agrees_with_the_host() {
    let dev = device();
    let lib = dev.compile(MATH).unwrap();
    let wide = spread(-20.0, 20.0, 1001);
    let positive = spread(1e-3, 1000.0, 1001);
    let unit = spread(-1.0, 1.0, 1001);
    let small = spread(-0.5, 0.5, 1001);
    let trig = spread(-100.0, 100.0, 1001);
    let cases: &[(&str, Host, &[f32], f32, f32)] = &[
        ("m_sqrtf", f64::sqrt, &positive, 1.0, 0.0),
        ("m_rsqrtf", |x| 1.0 / x.sqrt(), &positive, 2.0, 0.0),
        ("m_cbrtf", f64::cbrt, &wide, 2.0, 0.0),
        ("m_expf", f64::exp, &wide, 2.0, 0.0),
        ("m_exp2f", f64::exp2, &wide, 2.0, 0.0),
        ("m_exp10f", |x| 10f64.powf(x), &small, 2.0, 0.0),
        ("m_expm1f", f64::exp_m1, &wide, 3.0, 1e-7),
        ("m_logf", f64::ln, &positive, 2.0, 0.0),
        ("m_log2f", f64::log2, &positive, 2.0, 0.0),
        ("m_log10f", f64::log10, &positive, 2.0, 0.0),
        ("m_log1pf", f64::ln_1p, &positive, 3.0, 1e-7),
        ("m_log1pf", f64::ln_1p, &small, 3.0, 1e-7),
        ("m_sinf", f64::sin, &trig, 4.0, 2e-7),
        ("m_cosf", f64::cos, &trig, 4.0, 2e-7),
        ("m_tanf", f64::tan, &unit, 4.0, 1e-7),
        ("m_asinf", f64::asin, &unit, 4.0, 1e-7),
        ("m_acosf", f64::acos, &unit, 4.0, 1e-7),
        ("m_atanf", f64::atan, &wide, 3.0, 0.0),
        ("m_sinhf", f64::sinh, &small, 4.0, 0.0),
        ("m_sinhf", f64::sinh, &wide, 4.0, 0.0),
        ("m_coshf", f64::cosh, &wide, 4.0, 0.0),
        ("m_tanhf", f64::tanh, &wide, 4.0, 1e-7),
        ("m_asinhf", f64::asinh, &wide, 4.0, 1e-7),
        ("m_acoshf", f64::acosh, &positive, 4.0, 1e-6),
        (
            "m_atanhf",
            f64::atanh,
            &spread(-0.99, 0.99, 1001),
            4.0,
            1e-7,
        ),
        ("m_erff", libm_erf, &spread(-6.0, 6.0, 1001), 4.0, 1e-7),
        (
            "m_erfcf",
            |x| 1.0 - libm_erf(x),
            &spread(-1.0, 3.0, 1001),
            4.0,
            2e-7,
        ),
        ("m_floorf", f64::floor, &wide, 0.0, 0.0),
        ("m_ceilf", f64::ceil, &wide, 0.0, 0.0),
        ("m_truncf", f64::trunc, &wide, 0.0, 0.0),
        ("m_roundf", f64::round, &spread(-4.5, 4.5, 19), 0.0, 0.0),
        ("m_fabsf", f64::abs, &wide, 0.0, 0.0),
        // The back end's exp2(y log2 x): its error grows with |y log2 x| (14 here).
        (
            "m_powf",
            |x| x.powf(f64::from(1.37f32)),
            &positive,
            8.0,
            0.0,
        ),
        (
            "m_atan2f",
            |x| x.atan2(f64::from(0.75 - x as f32)),
            &wide,
            4.0,
            1e-7,
        ),
        ("m_hypotf", |x| x.hypot(2.5), &wide, 2.0, 0.0),
        // Exact, as C's fmod and remainder are.
        ("m_fmodf", |x| x % f64::from(0.7f32), &wide, 0.0, 0.0),
        (
            "m_fmodf_big",
            |x| f64::from(x as f32 * 1e6) % f64::from(0.3f32),
            &wide,
            0.0,
            0.0,
        ),
        (
            "m_remainderf",
            |x| ieee_remainder(x, f64::from(0.7f32)),
            &wide,
            0.0,
            0.0,
        ),
        ("m_fmaf", |x| x.mul_add(x, -1.0), &wide, 0.0, 0.0),
        ("m_sqrt", f64::sqrt, &positive, 1.0, 0.0),
        ("m_exp", f64::exp, &wide, 2.0, 0.0),
        ("m_pow", |x| x * x, &wide, 2.0, 0.0),
        // The fast forms trade accuracy for speed, as with hipcc.
        ("f_expf", f64::exp, &small, 64.0, 1e-6),
        ("f_logf", f64::ln, &positive, 64.0, 1e-6),
        ("f_sinf", f64::sin, &spread(-3.2, 3.2, 1001), 64.0, 1e-6),
        ("f_cosf", f64::cos, &spread(-3.2, 3.2, 1001), 64.0, 1e-6),
        (
            "f_powf",
            |x| x.powf(f64::from(1.37f32)),
            &spread(0.01, 10.0, 1001),
            64.0,
            1e-6,
        ),
        ("f_fdividef", |x| x / 3.0, &wide, 4.0, 0.0),
    ];
    for &(name, f, xs, ulps, abs) in cases {
        check_math(&dev, &lib, name, f, xs, ulps, abs);
    }
}

/// IEEE remainder: x - n y with n the nearest whole number to x / y, ties to even (exact
/// here: f32 operands in f64).
fn ieee_remainder(x: f64, y: f64) -> f64 {
    let r = x % y;
    let ay = y.abs();
    let q_odd = ((x - r) / y).abs() % 2.0 == 1.0;
    let r = if r.abs() > ay - r.abs() || (r.abs() == ay - r.abs() && q_odd) {
        r - ay.copysign(x)
    } else {
        r
    };
    if r == 0.0 {
        0f64.copysign(x)
    } else {
        r
    }
}

/// erf on the host, in f64 (Rust's standard library has none): its Taylor series below 3,
/// its asymptotic continued fraction above.
fn libm_erf(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 3.0 {
        let (mut term, mut sum, mut k) = (a, a, 0.0);
        while term.abs() > 1e-17 * sum.abs() {
            k += 1.0;
            term *= -a * a / k;
            sum += term / (2.0 * k + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(a) = exp(-a^2) / sqrt(pi) * 1 / (a + 1/2 / (a + 1 / (a + 3/2 / (a + ...))))
        let mut f = a;
        for k in (1..60).rev() {
            f = a + f64::from(k) / 2.0 / f;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / f
    };
    r.copysign(x)
}

const WAVES: &str = r#"
#include <hip/hip_runtime.h>
__global__ void shuffles(int* out, int width) {
    int t = threadIdx.x, v = t * 10 + 3;
    out[t * 6 + 0] = __shfl(v, 5, width);
    out[t * 6 + 1] = __shfl_up(v, 3, width);
    out[t * 6 + 2] = __shfl_down(v, 3, width);
    out[t * 6 + 3] = __shfl_xor(v, 6, width);
    out[t * 6 + 4] = (int)__shfl_xor((float)v + 0.5f, 1, width);
    out[t * 6 + 5] = (int)(__shfl_down((long long)v << 33, 1, width) >> 33);
}
__global__ void votes(unsigned long long* out, const int* in) {
    int t = threadIdx.x, p = in[t];
    out[t * 4 + 0] = __ballot(p);
    out[t * 4 + 1] = __any(p);
    out[t * 4 + 2] = __all(p);
    out[t * 4 + 3] = __activemask();
}
__global__ void atomics(int* counts, float* fsum, unsigned int* wrap, int* extremes, const int* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    atomicAdd(&counts[v & 15], 1);
    atomicAdd(fsum, 0.25f);
    atomicInc(wrap, 6u);
    atomicMax(&extremes[0], v);
    atomicMin(&extremes[1], v);
    atomicCAS(&extremes[2], 0, v == 77 ? 1 : 0);
    atomicOr((unsigned int*)&extremes[3], 1u << (v & 31));
}
__global__ void halves(__half* out, const __half* a, const __half* b) {
    int t = threadIdx.x;
    out[t] = __hfma(a[t], b[t], __float2half(0.5f)) + __hmul(a[t], __float2half(2.0f));
}
"#;

#[test]
fn shuffles_votes_atomics_and_halves() {
    let dev = device();
    let lib = dev.compile(WAVES).unwrap();
    let prg = |name| dev.program(&lib, name).unwrap();

    for width in [32i32, 16, 8] {
        let out = dev.alloc(32 * 6 * 4).unwrap();
        prg("shuffles")
            .launch(&[Arg::Buffer(&out), Arg::I32(width)], [1, 1, 1], [32, 1, 1])
            .unwrap();
        let got: Vec<i32> = out.read().unwrap();
        let v = |lane: i32| lane * 10 + 3;
        for t in 0..32i32 {
            let base = t & !(width - 1);
            let up = if t - 3 < base { t } else { t - 3 };
            let down = if (t & (width - 1)) + 3 >= width {
                t
            } else {
                t + 3
            };
            let x = t ^ 6;
            let xor = if x >= ((t + width) & !(width - 1)) {
                t
            } else {
                x
            };
            let x1 = t ^ 1;
            let xor1 = if x1 >= ((t + width) & !(width - 1)) {
                t
            } else {
                x1
            };
            let down1 = if (t & (width - 1)) + 1 >= width {
                t
            } else {
                t + 1
            };
            let want = [v(base + 5), v(up), v(down), v(xor), v(xor1), v(down1)];
            let at = (t * 6) as usize;
            assert_eq!(got[at..at + 6], want, "lane {t}, width {width}");
        }
    }

    let preds: Vec<i32> = (0..32).map(|t| (t % 3 == 0) as i32).collect();
    let (input, out) = (upload(&dev, &preds), dev.alloc(32 * 4 * 8).unwrap());
    prg("votes")
        .launch(
            &[Arg::Buffer(&out), Arg::Buffer(&input)],
            [1, 1, 1],
            [32, 1, 1],
        )
        .unwrap();
    let got: Vec<u64> = out.read().unwrap();
    let ballot: u64 = (0..32).filter(|t| t % 3 == 0).map(|t| 1u64 << t).sum();
    for t in 0..32 {
        assert_eq!(
            got[t * 4..t * 4 + 4],
            [ballot, 1, 0, 0xffff_ffff],
            "lane {t}"
        );
    }

    let n = 5000usize;
    let xs: Vec<i32> = (0..n as i32).map(|i| (i * 37) % 1009 - 300).collect();
    let input = upload(&dev, &xs);
    let counts = dev.alloc_zeros::<i32>(16).unwrap();
    let fsum = dev.alloc_zeros::<f32>(1).unwrap();
    let wrap = dev.alloc_zeros::<u32>(1).unwrap();
    let extremes = upload(&dev, &[i32::MIN, i32::MAX, 0, 0]);
    let args = [
        Arg::Buffer(&counts),
        Arg::Buffer(&fsum),
        Arg::Buffer(&wrap),
        Arg::Buffer(&extremes),
        Arg::Buffer(&input),
        Arg::I32(n as i32),
    ];
    prg("atomics")
        .launch(&args, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1])
        .unwrap();
    let mut want_counts = [0i32; 16];
    for &x in &xs {
        want_counts[(x & 15) as usize] += 1;
    }
    assert_eq!(counts.read::<i32>().unwrap(), want_counts);
    assert_eq!(fsum.read::<f32>().unwrap(), [n as f32 * 0.25]);
    // atomicInc counts 0..=6 and wraps: n increments leave n mod 7.
    assert_eq!(wrap.read::<u32>().unwrap(), [(n % 7) as u32]);
    let bits = xs.iter().fold(0u32, |acc, &x| acc | 1 << (x & 31));
    assert_eq!(
        extremes.read::<i32>().unwrap(),
        [
            *xs.iter().max().unwrap(),
            *xs.iter().min().unwrap(),
            xs.contains(&77) as i32,
            bits as i32
        ]
    );

    let a: Vec<u16> = (0..64).map(|i| half_bits(i as f32 * 0.25 - 4.0)).collect();
    let b: Vec<u16> = (0..64).map(|i| half_bits(1.5 - i as f32 * 0.125)).collect();
    let (ba, bb, out) = (
        upload(&dev, &a),
        upload(&dev, &b),
        dev.alloc(64 * 2).unwrap(),
    );
    prg("halves")
        .launch(
            &[Arg::Buffer(&out), Arg::Buffer(&ba), Arg::Buffer(&bb)],
            [1, 1, 1],
            [64, 1, 1],
        )
        .unwrap();
    let got: Vec<u16> = out.read().unwrap();
    for t in 0..64 {
        let (x, y) = (half_value(a[t]), half_value(b[t]));
        // fma rounds once, the multiply by 2 is exact, the add rounds once more.
        let fma = half_value(half_bits(x.mul_add(y, 0.5)));
        let want = half_bits(fma + 2.0 * x);
        assert_eq!(got[t], want, "lane {t}: {x} * {y}");
    }
}

/// f32 to IEEE binary16 bits, rounding to nearest even (values here are in half's normal
/// range or zero).
fn half_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let a = x.abs();
    if a == 0.0 {
        return sign;
    }
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    assert!((1..31).contains(&exp), "{x} is outside half's normal range");
    let mant = bits & 0x7f_ffff;
    let mut h = ((exp as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}

fn half_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let mant = (h & 0x3ff) as f32;
    if exp == 0 {
        return sign * mant * 2f32.powi(-24);
    }
    sign * (1.0 + mant / 1024.0) * 2f32.powi(exp - 15)
}
