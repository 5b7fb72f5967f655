// ML kernels: convolution (direct NCHW 3x3 and im2col feeding a GEMM) and pooling, on 3-D
// grids: x and y walk the output plane, z the (image, channel) planes.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int out_x() { return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x(); }
DEV int out_y() { return __builtin_amdgcn_workgroup_id_y() * __builtin_amdgcn_workgroup_size_y() + __builtin_amdgcn_workitem_id_y(); }
DEV int plane() { return __builtin_amdgcn_workgroup_id_z() * __builtin_amdgcn_workgroup_size_z() + __builtin_amdgcn_workitem_id_z(); }

// out[n][o][y][x] = bias[o] + sum over (c, ky, kx) of in[n][c][y*s-p+ky][x*s-p+kx] * w[o][c][ky][kx],
// zero padding; the sum runs in (c, ky, kx) order, one fma each, the bias added last.
KERNEL void conv2d_3x3_nchw(float* out, const float* in, const float* weight, const float* bias,
                            int batch, int in_channels, int height, int width, int out_channels,
                            int out_height, int out_width, int stride, int pad) {
  int x = out_x(), y = out_y(), p = plane();
  if (x >= out_width || y >= out_height || p >= batch * out_channels) return;
  int n = p / out_channels, o = p % out_channels;
  float acc = 0.0f;
  for (int c = 0; c < in_channels; c++) {
    const float* src = in + ((long)n * in_channels + c) * height * width;
    const float* w = weight + ((long)o * in_channels + c) * 9;
#pragma unroll
    for (int ky = 0; ky < 3; ky++) {
      int iy = y * stride - pad + ky;
#pragma unroll
      for (int kx = 0; kx < 3; kx++) {
        int ix = x * stride - pad + kx;
        float v = (iy >= 0 && iy < height && ix >= 0 && ix < width) ? src[iy * width + ix] : 0.0f;
        acc = __builtin_fmaf(v, w[ky * 3 + kx], acc);
      }
    }
  }
  out[(long)p * out_height * out_width + y * out_width + x] = acc + bias[o];
}

// im2col for one image: column matrix [C*9, OH*OW], row (c*9 + ky*3 + kx), zero padding.
KERNEL void im2col_3x3(float* columns, const float* image, int channels, int height, int width,
                       int out_height, int out_width, int stride, int pad) {
  int x = out_x(), y = out_y(), row = plane();
  if (x >= out_width || y >= out_height || row >= channels * 9) return;
  int c = row / 9, ky = row % 9 / 3, kx = row % 3;
  int iy = y * stride - pad + ky, ix = x * stride - pad + kx;
  float v = (iy >= 0 && iy < height && ix >= 0 && ix < width) ? image[(c * height + iy) * width + ix] : 0.0f;
  columns[(long)row * out_height * out_width + y * out_width + x] = v;
}

// Max pooling (padding never wins) and average pooling that counts only in-bounds taps
// (count_include_pad = false), window `kernel`, per plane of [planes, H, W].
KERNEL void pool2d(float* max_out, float* avg_out, const float* in, int planes, int height, int width,
                   int out_height, int out_width, int kernel, int stride, int pad) {
  int x = out_x(), y = out_y(), p = plane();
  if (x >= out_width || y >= out_height || p >= planes) return;
  const float* src = in + (long)p * height * width;
  float best = -__builtin_inff(), sum = 0.0f;
  int count = 0;
  for (int ky = 0; ky < kernel; ky++) {
    int iy = y * stride - pad + ky;
    if (iy < 0 || iy >= height) continue;
    for (int kx = 0; kx < kernel; kx++) {
      int ix = x * stride - pad + kx;
      if (ix < 0 || ix >= width) continue;
      float v = src[iy * width + ix];
      best = __builtin_fmaxf(best, v);
      sum += v;
      count++;
    }
  }
  long at = (long)p * out_height * out_width + y * out_width + x;
  max_out[at] = best;
  avg_out[at] = sum / (float)count;
}
