//! Convolution (direct and im2col + GEMM) and pooling on 3-D grids, against host loops that
//! accumulate in the kernels' (channel, ky, kx) order.

use crate::common::*;
use crate::{CONV, GEMM};
use hcq::Arg;

struct ConvShape {
    batch: usize,
    channels: usize,
    height: usize,
    width: usize,
    out_channels: usize,
    stride: usize,
    pad: usize,
}

impl ConvShape {
    fn out_size(&self, size: usize) -> usize {
        (size + 2 * self.pad - 3) / self.stride + 1
    }

    /// The convolution without bias, summed in (c, ky, kx) order with one fma each.
    fn reference(&self, input: &[f32], weight: &[f32], n: usize, o: usize) -> Vec<f32> {
        let (oh, ow) = (self.out_size(self.height), self.out_size(self.width));
        let mut out = vec![0f32; oh * ow];
        for y in 0..oh {
            for x in 0..ow {
                let mut acc = 0f32;
                for c in 0..self.channels {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let iy = (y * self.stride + ky) as isize - self.pad as isize;
                            let ix = (x * self.stride + kx) as isize - self.pad as isize;
                            let inside = (0..self.height as isize).contains(&iy)
                                && (0..self.width as isize).contains(&ix);
                            let v = if inside {
                                input[((n * self.channels + c) * self.height + iy as usize)
                                    * self.width
                                    + ix as usize]
                            } else {
                                0.0
                            };
                            let w = weight[(o * self.channels + c) * 9 + ky * 3 + kx];
                            acc = v.mul_add(w, acc);
                        }
                    }
                }
                out[y * ow + x] = acc;
            }
        }
        out
    }
}

#[test]
fn direct_and_im2col_convolution() {
    for shape in [
        ConvShape {
            batch: 2,
            channels: 3,
            height: 13,
            width: 11,
            out_channels: 4,
            stride: 1,
            pad: 1,
        },
        ConvShape {
            batch: 1,
            channels: 5,
            height: 17,
            width: 14,
            out_channels: 3,
            stride: 2,
            pad: 1,
        },
    ] {
        let mut rng = Rng::new(30 + shape.stride as u64);
        let (oh, ow) = (shape.out_size(shape.height), shape.out_size(shape.width));
        let input = rng.f32s(
            shape.batch * shape.channels * shape.height * shape.width,
            -1.0,
            1.0,
        );
        let weight = rng.f32s(shape.out_channels * shape.channels * 9, -1.0, 1.0);
        let bias = rng.f32s(shape.out_channels, -0.5, 0.5);
        let planes = shape.batch * shape.out_channels;
        let out = filled(planes * oh * ow, f32::NAN);
        let (input_buf, weight_buf) = (upload(&input), upload(&weight));
        let dims = |v: usize| Arg::I32(v as i32);
        run(
            CONV,
            "conv2d_3x3_nchw",
            &[
                Arg::Buffer(&out),
                Arg::Buffer(&input_buf),
                Arg::Buffer(&weight_buf),
                Arg::Buffer(&upload(&bias)),
                dims(shape.batch),
                dims(shape.channels),
                dims(shape.height),
                dims(shape.width),
                dims(shape.out_channels),
                dims(oh),
                dims(ow),
                dims(shape.stride),
                dims(shape.pad),
            ],
            [blocks(ow, 8), blocks(oh, 4), blocks(planes, 2)],
            [8, 4, 2],
        );
        let direct: Vec<f32> = read(&out);
        let mut check = Check::new(&format!("conv2d_3x3_nchw, stride {}", shape.stride));
        for n in 0..shape.batch {
            for o in 0..shape.out_channels {
                let want = shape.reference(&input, &weight, n, o);
                let plane = &direct[(n * shape.out_channels + o) * oh * ow..][..oh * ow];
                for (i, (got, w)) in plane.iter().zip(&want).enumerate() {
                    check.f32(*got, w + bias[o], || format!("out[{n}][{o}][{i}]"));
                }
            }
        }
        check.finish();

        // im2col of image 0, then weight [O, C*9] x columns [C*9, OH*OW] with the GEMM.
        let rows = shape.channels * 9;
        let columns = filled(rows * oh * ow, f32::NAN);
        run(
            CONV,
            "im2col_3x3",
            &[
                Arg::Buffer(&columns),
                Arg::Buffer(&input_buf),
                dims(shape.channels),
                dims(shape.height),
                dims(shape.width),
                dims(oh),
                dims(ow),
                dims(shape.stride),
                dims(shape.pad),
            ],
            [blocks(ow, 16), blocks(oh, 4), rows as u32],
            [16, 4, 1],
        );
        let product = filled(shape.out_channels * oh * ow, f32::NAN);
        run(
            GEMM,
            "gemm_naive",
            &[
                Arg::Buffer(&product),
                Arg::Buffer(&weight_buf),
                Arg::Buffer(&columns),
                dims(shape.out_channels),
                dims(oh * ow),
                dims(rows),
            ],
            [blocks(oh * ow, 64), shape.out_channels as u32, 1],
            [64, 1, 1],
        );
        let product: Vec<f32> = read(&product);
        let mut check = Check::new(&format!("im2col + gemm, stride {}", shape.stride));
        for o in 0..shape.out_channels {
            let want = shape.reference(&input, &weight, 0, o);
            for (i, w) in want.iter().enumerate() {
                check.f32(product[o * oh * ow + i], *w, || format!("out[0][{o}][{i}]"));
            }
        }
        check.finish();
    }
}

#[test]
fn max_and_average_pooling() {
    let (planes, height, width) = (6usize, 15usize, 12usize);
    let mut rng = Rng::new(32);
    let input = rng.f32s(planes * height * width, -4.0, 4.0);
    for (kernel, stride, pad) in [(2usize, 2usize, 0usize), (3, 2, 1)] {
        let oh = (height + 2 * pad - kernel) / stride + 1;
        let ow = (width + 2 * pad - kernel) / stride + 1;
        let (max_out, avg_out) = (
            filled(planes * oh * ow, f32::NAN),
            filled(planes * oh * ow, f32::NAN),
        );
        let dims = |v: usize| Arg::I32(v as i32);
        run(
            CONV,
            "pool2d",
            &[
                Arg::Buffer(&max_out),
                Arg::Buffer(&avg_out),
                Arg::Buffer(&upload(&input)),
                dims(planes),
                dims(height),
                dims(width),
                dims(oh),
                dims(ow),
                dims(kernel),
                dims(stride),
                dims(pad),
            ],
            [blocks(ow, 4), blocks(oh, 4), blocks(planes, 4)],
            [4, 4, 4],
        );
        let (max_got, avg_got): (Vec<f32>, Vec<f32>) = (read(&max_out), read(&avg_out));
        let mut check = Check::new(&format!("pool2d {kernel}x{kernel} stride {stride}"));
        for p in 0..planes {
            for y in 0..oh {
                for x in 0..ow {
                    let mut taps = Vec::new();
                    for ky in 0..kernel {
                        for kx in 0..kernel {
                            let iy = (y * stride + ky) as isize - pad as isize;
                            let ix = (x * stride + kx) as isize - pad as isize;
                            if (0..height as isize).contains(&iy)
                                && (0..width as isize).contains(&ix)
                            {
                                taps.push(input[(p * height + iy as usize) * width + ix as usize]);
                            }
                        }
                    }
                    let max = taps.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    // The kernel sums in tap order and divides once (correctly rounded).
                    let avg = taps.iter().fold(0f32, |s, v| s + v) / taps.len() as f32;
                    let at = (p * oh + y) * ow + x;
                    check.f32(max_got[at], max, || format!("max[{p}][{y}][{x}]"));
                    check.f32(avg_got[at], avg, || format!("avg[{p}][{y}][{x}]"));
                }
            }
        }
        check.finish();
    }
}
