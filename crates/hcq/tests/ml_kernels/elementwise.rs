//! Elementwise kernels: strided/broadcast views, fused activations, casts, quantization, and
//! struct arguments.

use crate::common::*;
use crate::ELEMENTWISE;
use hcq::Arg;

/// A 4-D view into flat storage: element offset plus one stride per dimension.
struct View {
    offset: i64,
    strides: [i64; 4],
}

impl View {
    fn at(&self, index: [i64; 4]) -> usize {
        let flat: i64 = self.offset + (0..4).map(|d| index[d] * self.strides[d]).sum::<i64>();
        usize::try_from(flat).expect("views stay inside their storage")
    }
}

#[test]
fn strided_broadcast_fma() {
    let dims: [i64; 4] = [3, 5, 4, 7];
    let total: i64 = dims.iter().product();
    let mut rng = Rng::new(1);
    // `a` is a permuted contiguous tensor (storage order d3, d0, d2, d1) sliced 11 elements in,
    // with axes 0 and 2 reversed; `b` is [1, 5, 1, 7] broadcast, its last axis reversed.
    let (d0, d1, d2, d3) = (dims[0], dims[1], dims[2], dims[3]);
    let plain = [d1 * d2, 1, d1, d0 * d1 * d2];
    let a_view = View {
        offset: 11 + (d0 - 1) * plain[0] + (d2 - 1) * plain[2],
        strides: [-plain[0], plain[1], -plain[2], plain[3]],
    };
    let b_view = View {
        offset: d3 - 1,
        strides: [0, d3, 0, -1],
    };
    let a = rng.f32s(11 + total as usize, -4.0, 4.0);
    let b = rng.f32s((d1 * d3) as usize, -4.0, 4.0);
    let out = filled(total as usize, f32::NAN);
    let (a_buf, b_buf) = (upload(&a), upload(&b));
    let mut args = vec![Arg::Buffer(&out), Arg::Buffer(&a_buf), Arg::Buffer(&b_buf)];
    args.extend(dims.iter().map(|&d| Arg::I64(d)));
    for view in [&a_view, &b_view] {
        args.push(Arg::I64(view.offset));
        args.extend(view.strides.iter().map(|&s| Arg::I64(s)));
    }
    args.push(Arg::I64(total));
    assert!(args.len() > 16);
    run(
        ELEMENTWISE,
        "strided_broadcast_fma",
        &args,
        [blocks(total as usize, 64), 1, 1],
        [64, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut check = Check::new("strided_broadcast_fma");
    let mut linear = 0;
    for i0 in 0..d0 {
        for i1 in 0..d1 {
            for i2 in 0..d2 {
                for i3 in 0..d3 {
                    let index = [i0, i1, i2, i3];
                    let want = a[a_view.at(index)].mul_add(b[b_view.at(index)], 1.0);
                    check.f32(got[linear], want, || format!("{index:?}"));
                    linear += 1;
                }
            }
        }
    }
    check.finish();
}

#[test]
fn bias_gelu_silu() {
    let (rows, cols) = (13usize, 77usize);
    let mut rng = Rng::new(2);
    let x = rng.f32s(rows * cols, -6.0, 6.0);
    let bias = rng.f32s(cols, -1.0, 1.0);
    let (gelu, silu) = (filled(rows * cols, f32::NAN), filled(rows * cols, f32::NAN));
    run(
        ELEMENTWISE,
        "bias_gelu_silu",
        &[
            Arg::Buffer(&gelu),
            Arg::Buffer(&silu),
            Arg::Buffer(&upload(&x)),
            Arg::Buffer(&upload(&bias)),
            Arg::I32(rows as i32),
            Arg::I32(cols as i32),
        ],
        [blocks(rows * cols, 128), 1, 1],
        [128, 1, 1],
    );
    let (gelu, silu): (Vec<f32>, Vec<f32>) = (read(&gelu), read(&silu));
    let mut check = Check::new("bias_gelu_silu");
    for i in 0..rows * cols {
        let v = (x[i] + bias[i % cols]) as f64;
        let inner = (2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v);
        let want_gelu = 0.5 * v * (1.0 + inner.tanh());
        let want_silu = v / (1.0 + (-v).exp());
        // exp is v_exp_f32 (1 ulp) of an argument rounded to f32, so its relative error is
        // below (|argument| + 2) * 2^-24 with |argument| <= 2 * 1.45 * 13 here; tanh passes
        // at most half of that on as absolute error, and 0.5 * v scales it: 2e-6 * (1 + |v|)
        // covers it with the final roundings.
        check.close(gelu[i], want_gelu, 2e-6 * (1.0 + v.abs()), || {
            format!("gelu({v})")
        });
        // SiLU: the same exp error (|argument| <= 7.5) plus the rcp and product roundings,
        // all relative to the result.
        let silu_bound = (1.5 * v.abs() + 6.0) * F32_UNIT_ROUNDOFF * want_silu.abs();
        check.close(silu[i], want_silu, silu_bound, || format!("silu({v})"));
    }
    check.finish();
}

/// f32 inputs for the cast test: f16 overflow and underflow ranges, exact f16 and bf16
/// rounding ties, specials, and random bit patterns.
fn cast_inputs(rng: &mut Rng) -> Vec<f32> {
    let mut xs = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        65504.0,
        65519.996,
        65520.0,
        -65520.0,
        f32::MAX,
        f32::MIN_POSITIVE,
        1.0e-45,
        5.9604645e-8,
        2.9802322e-8,
        2.9802326e-8,
    ];
    for _ in 0..200 {
        // A tie halfway between two f16 values (fraction bits 10 and up: ...1000...).
        let exponent = rng.range(-24, 15) as i32;
        let fraction = rng.range(0, 1023) as f64;
        let tie = (1024.0 + fraction + 0.5) * 2f64.powi(exponent - 10);
        xs.push(if rng.range(0, 1) == 0 { tie } else { -tie } as f32);
        // A bf16 tie: the low 16 bits exactly 0x8000.
        xs.push(f32::from_bits(
            ((rng.next_u64() as u32) & 0xffff_0000) | 0x8000,
        ));
        let bits = rng.next_u64() as u32;
        if (bits >> 23) & 0xff != 0xff {
            xs.push(f32::from_bits(bits));
        }
        xs.push(rng.f32_in(-70000.0, 70000.0));
        xs.push(rng.f32_in(-1.0e-4, 1.0e-4));
    }
    xs.retain(|x| x.is_nan() || x.is_finite() || x.is_infinite());
    xs
}

#[test]
fn cast_f16_bf16() {
    let mut rng = Rng::new(3);
    let x = cast_inputs(&mut rng);
    let n = x.len();
    let (as_f16, as_bf16, sum) = (
        filled(n, 0xdeadu16),
        filled(n, 0xdeadu16),
        filled(n, f32::NAN),
    );
    run(
        ELEMENTWISE,
        "cast_f16_bf16",
        &[
            Arg::Buffer(&as_f16),
            Arg::Buffer(&as_bf16),
            Arg::Buffer(&sum),
            Arg::Buffer(&upload(&x)),
            Arg::I32(n as i32),
        ],
        [blocks(n, 96), 1, 1],
        [96, 1, 1],
    );
    let (h, b, sum): (Vec<u16>, Vec<u16>, Vec<f32>) = (read(&as_f16), read(&as_bf16), read(&sum));
    let mut check = Check::new("cast_f16_bf16");
    for i in 0..n {
        let v = x[i] as f64;
        let f16_got = f16_value(h[i]);
        let bf16_got = f32::from_bits((b[i] as u32) << 16);
        let f16_want = round_to_format(v, 10, -14, 15);
        let bf16_want = round_to_format(v, 7, -126, 127);
        let same = |got: f64, want: f64| {
            (got.is_nan() && want.is_nan())
                || (got == want && got.is_sign_negative() == want.is_sign_negative())
        };
        check.ok(same(f16_got, f16_want), || {
            format!(
                "f16({v:e}): got {f16_got:e} ({:#06x}), want {f16_want:e}",
                h[i]
            )
        });
        check.ok(same(bf16_got as f64, bf16_want), || {
            format!(
                "bf16({v:e}): got {bf16_got:e} ({:#06x}), want {bf16_want:e}",
                b[i]
            )
        });
        check.ok(!x[i].is_nan() || b[i] & 0x40 != 0, || {
            format!(
                "bf16(NaN {:#x}) is not a quiet NaN: {:#06x}",
                x[i].to_bits(),
                b[i]
            )
        });
        let want_sum = f16_want as f32 + bf16_want as f32;
        check.f32(sum[i], want_sum, || format!("f16 + bf16 of {v:e}"));
    }
    check.finish();
}

#[test]
fn quantize_int8() {
    let (rows, channels) = (9usize, 37usize);
    let mut rng = Rng::new(4);
    // Every third channel has a power-of-two scale, so x / scale is exact and the inputs on a
    // 1/16 grid hit rounding ties; the others have arbitrary scales. Inputs reach far enough
    // to saturate at both ends.
    let scale: Vec<f32> = (0..channels)
        .map(|c| {
            if c % 3 == 0 {
                2f32.powi(rng.range(-3, 1) as i32)
            } else {
                rng.f32_in(0.01, 0.2)
            }
        })
        .collect();
    let inv_scale: Vec<f32> = scale.iter().map(|s| 1.0 / s).collect();
    let zero_point: Vec<i32> = (0..channels).map(|_| rng.range(-10, 10) as i32).collect();
    let x: Vec<f32> = (0..rows * channels)
        .map(|i| {
            if (i % channels) % 3 == 0 {
                rng.range(-800, 800) as f32 / 16.0
            } else {
                rng.f32_in(-30.0, 30.0)
            }
        })
        .collect();
    let (q, dq) = (
        filled(rows * channels, 0x55u8),
        filled(rows * channels, f32::NAN),
    );
    run(
        ELEMENTWISE,
        "quantize_int8",
        &[
            Arg::Buffer(&q),
            Arg::Buffer(&dq),
            Arg::Buffer(&upload(&x)),
            Arg::Buffer(&upload(&inv_scale)),
            Arg::Buffer(&upload(&scale)),
            Arg::Buffer(&upload(&zero_point)),
            Arg::I32(rows as i32),
            Arg::I32(channels as i32),
        ],
        [blocks(rows * channels, 256), 1, 1],
        [256, 1, 1],
    );
    let (q, dq): (Vec<i8>, Vec<f32>) = (read(&q), read(&dq));
    let mut check = Check::new("quantize_int8");
    let mut saturated = 0;
    for i in 0..rows * channels {
        let c = i % channels;
        let unclamped = (x[i] * inv_scale[c]).round_ties_even() as i64 + zero_point[c] as i64;
        let want = unclamped.clamp(-128, 127) as i8;
        saturated += usize::from(want as i64 != unclamped);
        check.eq(q[i], want, || format!("q({} / {})", x[i], scale[c]));
        let want_dq = (want as i32 - zero_point[c]) as f32 * scale[c];
        check.f32(dq[i], want_dq, || format!("dequant({})", x[i]));
    }
    assert!(saturated > 0, "the inputs reach saturation");
    check.finish();
}

/// A struct of two 32-bit fields as the 8 bytes it occupies in the argument segment.
fn pair(low: u32, high: u32) -> Arg<'static> {
    Arg::U64(low as u64 | (high as u64) << 32)
}

#[test]
fn struct_arguments() {
    let (pitch, storage_rows) = (50usize, 12usize);
    let (window_rows, window_cols) = (6usize, 13usize);
    let (valid_rows, valid_cols) = (5usize, 11usize);
    let origin = 3 * pitch + 7;
    let (scale, shift) = (-1.75f32, 0.625f32);
    let mut rng = Rng::new(5);
    let input = rng.f32s(pitch * storage_rows, -10.0, 10.0);
    let out = filled(window_rows * window_cols, f32::NAN);
    run(
        ELEMENTWISE,
        "window_affine",
        &[
            Arg::Buffer(&out),
            Arg::U32(pitch as u32),
            pair(window_rows as u32, window_cols as u32),
            Arg::Buffer(&upload(&input)),
            pair(scale.to_bits(), shift.to_bits()),
            Arg::I64(origin as i64),
            pair(valid_rows as u32, valid_cols as u32),
        ],
        [1, 1, 1],
        [128, 1, 1],
    );
    let got: Vec<f32> = read(&out);
    let mut check = Check::new("window_affine");
    for r in 0..window_rows {
        for c in 0..window_cols {
            let want = if r < valid_rows && c < valid_cols {
                input[origin + r * pitch + c].mul_add(scale, shift)
            } else {
                f32::NAN
            };
            check.f32(got[r * window_cols + c], want, || format!("({r}, {c})"));
        }
    }
    check.finish();
}
