// ML kernels: elementwise patterns as framework code generators emit them: strided and
// broadcast views with 64-bit index math, fused activations, dtype casts, int8 quantization.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

typedef long long i64;

DEV unsigned global_id_x() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// out[i] = a[view_a(i)] * b[view_b(i)] + 1 over a contiguous 4-D output. Each input is a view:
// element offset plus one stride per dimension (negative for reversed axes, 0 for broadcast),
// as a tinygrad/PyTorch `as_strided` view with 64-bit strides. Deliberately more than 16
// arguments, like generated kernels taking every shape and stride separately.
KERNEL void strided_broadcast_fma(float* out, const float* a, const float* b,
                                  i64 dim0, i64 dim1, i64 dim2, i64 dim3,
                                  i64 a_offset, i64 a_stride0, i64 a_stride1, i64 a_stride2,
                                  i64 a_stride3,
                                  i64 b_offset, i64 b_stride0, i64 b_stride1, i64 b_stride2,
                                  i64 b_stride3, i64 total) {
  i64 linear = (i64)global_id_x();
  if (linear >= total) return;
  i64 rest = linear;
  i64 i3 = rest % dim3;
  rest /= dim3;
  i64 i2 = rest % dim2;
  rest /= dim2;
  i64 i1 = rest % dim1;
  i64 i0 = rest / dim1;
  i64 at_a = a_offset + i0 * a_stride0 + i1 * a_stride1 + i2 * a_stride2 + i3 * a_stride3;
  i64 at_b = b_offset + i0 * b_stride0 + i1 * b_stride1 + i2 * b_stride2 + i3 * b_stride3;
  out[linear] = __builtin_fmaf(a[at_a], b[at_b], 1.0f);
}

DEV float fast_exp(float x) { return __builtin_amdgcn_exp2f(x * 1.44269504088896341f); }

// tanh(u) = 1 - 2 / (exp(2u) + 1): exp overflowing to inf gives exactly 1.
DEV float fast_tanh(float u) { return 1.0f - 2.0f * __builtin_amdgcn_rcpf(fast_exp(2.0f * u) + 1.0f); }

// The fused activation epilogue of a linear layer: bias add then GELU (tanh form) or SiLU,
// written out with the hardware exp2/rcp like hand-tuned kernels do (no libm on the device).
KERNEL void bias_gelu_silu(float* gelu_out, float* silu_out, const float* x, const float* bias,
                           int rows, int cols) {
  unsigned i = global_id_x();
  if (i >= (unsigned)(rows * cols)) return;
  float v = x[i] + bias[i % cols];
  float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  gelu_out[i] = 0.5f * v * (1.0f + fast_tanh(inner));
  silu_out[i] = v * __builtin_amdgcn_rcpf(1.0f + fast_exp(-v));
}

// f32 -> bf16 by bit manipulation, round to nearest even; NaN stays a (quiet) NaN.
DEV unsigned short f32_to_bf16(float f) {
  unsigned bits = __builtin_bit_cast(unsigned, f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((bits >> 16) | 0x40u);
  unsigned rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (unsigned short)((bits + rounding) >> 16);
}

DEV float bf16_to_f32(unsigned short h) { return __builtin_bit_cast(float, (unsigned)h << 16); }

// Mixed-precision casts: f32 -> f16 (hardware RNE), f32 -> bf16 (bits), and the bf16/f16
// values widened back and added, as an autocast round trip does.
KERNEL void cast_f16_bf16(_Float16* as_f16, unsigned short* as_bf16, float* widened_sum,
                          const float* x, int n) {
  unsigned i = global_id_x();
  if (i >= (unsigned)n) return;
  float v = x[i];
  _Float16 h = (_Float16)v;
  unsigned short b = f32_to_bf16(v);
  as_f16[i] = h;
  as_bf16[i] = b;
  widened_sum[i] = (float)h + bf16_to_f32(b);
}

// Per-channel affine int8 quantization (q = clamp(rint(x / scale) + zero_point)) and the
// dequantized value, as PyTorch's quantize_per_channel along axis 1 of [rows, channels].
KERNEL void quantize_int8(signed char* q_out, float* dq_out, const float* x,
                          const float* inv_scale, const float* scale, const int* zero_point,
                          int rows, int channels) {
  unsigned i = global_id_x();
  if (i >= (unsigned)(rows * channels)) return;
  int c = i % channels;
  float scaled = __builtin_rintf(x[i] * inv_scale[c]) + (float)zero_point[c];
  float clamped = __builtin_fminf(__builtin_fmaxf(scaled, -128.0f), 127.0f);
  signed char q = (signed char)(int)clamped;
  q_out[i] = q;
  dq_out[i] = (float)((int)q - zero_point[c]) * scale[c];
}

// Small structs passed by value in the kernel-argument segment, between scalars of other sizes:
// out[r][c] = in[r][c] * affine.scale + affine.shift for the window rows x cols at origin.
struct Extent {
  int rows;
  int cols;
};
struct Affine {
  float scale;
  float shift;
};

KERNEL void window_affine(float* out, unsigned pitch, struct Extent window, const float* in,
                          struct Affine affine, long long origin, struct Extent grid_extent) {
  unsigned i = global_id_x();
  if (i >= (unsigned)(window.rows * window.cols)) return;
  int r = i / window.cols, c = i % window.cols;
  if (r >= grid_extent.rows || c >= grid_extent.cols) return;
  out[i] = __builtin_fmaf(in[origin + (long long)r * pitch + c], affine.scale, affine.shift);
}
