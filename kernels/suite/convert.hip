// Kernel suite: conversions between the scalar types, with the hardware's rounding and
// saturation (v_cvt_*), and the compiler's expansions for 64-bit integers.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// f32 -> i32 / u32: v_cvt_i32_f32 / v_cvt_u32_f32 truncate, saturate out-of-range values and
// turn NaN into 0 (C leaves those cases undefined; the instruction defines them).
KERNEL void cvt_f32_to_int(int* oi, unsigned* ou, const float* x, int n) {
  int i = gid();
  if (i >= n) return;
  oi[i] = (int)x[i];
  ou[i] = (unsigned)x[i];
}

// i32 / u32 / i64 / u64 -> f32 / f64 (round to nearest even; 64-bit sources are expanded).
KERNEL void cvt_int_to_float(float* of, double* od, const int* a, const long* b, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  long y = b[i];
  of[4 * i + 0] = (float)x;
  of[4 * i + 1] = (float)(unsigned)x;
  of[4 * i + 2] = (float)y;
  of[4 * i + 3] = (float)(unsigned long)y;
  od[4 * i + 0] = (double)x;
  od[4 * i + 1] = (double)(unsigned)x;
  od[4 * i + 2] = (double)y;
  od[4 * i + 3] = (double)(unsigned long)y;
}

// f32 / f64 -> i64 / u64 (expanded with trunc, fma and 32-bit conversions). In-range inputs only.
KERNEL void cvt_float_to_i64(long* out, const float* x, const double* y, int n) {
  int i = gid();
  if (i >= n) return;
  float f = x[i];
  double d = y[i];
  out[4 * i + 0] = (long)f;
  out[4 * i + 1] = (long)(unsigned long)__builtin_fabsf(f);
  out[4 * i + 2] = (long)d;
  out[4 * i + 3] = (long)(unsigned long)__builtin_fabs(d);
}

// f32 <-> f16 (v_cvt_f16_f32: round to nearest even, overflow to inf, f16 denormals) and
// f64 -> f16 (the compiler's correctly rounded expansion), f16 -> f32/f64 (exact).
KERNEL void cvt_f16(_Float16* oh, float* of, double* od, const float* x, const double* y,
                    const _Float16* h, int n) {
  int i = gid();
  if (i >= n) return;
  oh[2 * i + 0] = (_Float16)x[i];
  oh[2 * i + 1] = (_Float16)y[i];
  of[i] = (float)h[i];
  od[i] = (double)h[i];
}

// f16 <-> i16 / u16: v_cvt_i16_f16 / v_cvt_u16_f16 (truncate, saturate, NaN -> 0) and
// v_cvt_f16_i16 / v_cvt_f16_u16 (round to nearest even).
KERNEL void cvt_f16_i16(short* os, _Float16* oh, const _Float16* h, const short* s, int n) {
  int i = gid();
  if (i >= n) return;
  os[2 * i + 0] = (short)h[i];
  os[2 * i + 1] = (short)(unsigned short)h[i];
  oh[2 * i + 0] = (_Float16)s[i];
  oh[2 * i + 1] = (_Float16)(unsigned short)s[i];
}

// f64 <-> f32 (v_cvt_f32_f64 rounds to nearest even, overflows to inf, makes f32 denormals) and
// f64 -> i32 / u32 (v_cvt_i32_f64 / v_cvt_u32_f64: truncate, saturate, NaN -> 0).
KERNEL void cvt_f64(float* of, double* od, int* oi, unsigned* ou, const double* y,
                    const float* x, int n) {
  int i = gid();
  if (i >= n) return;
  of[i] = (float)y[i];
  od[i] = (double)x[i];
  oi[i] = (int)y[i];
  ou[i] = (unsigned)y[i];
}

// Integer widths: truncation to 8/16 bits with sign or zero extension back to 32/64 bits,
// and narrow loads (global_load_i8/u8/i16/u16) extended to 64 bits.
KERNEL void cvt_int_widths(long* out, const long* a, const signed char* b8,
                           const short* b16, int n) {
  int i = gid();
  if (i >= n) return;
  long x = a[i];
  int x32 = (int)x;
  long* o = out + 10 * i;
  o[0] = (signed char)x32;
  o[1] = (unsigned char)x32;
  o[2] = (short)x32;
  o[3] = (unsigned short)x32;
  o[4] = (long)x32;
  o[5] = (long)(unsigned)x32;
  o[6] = (long)b8[i];
  o[7] = (long)(unsigned char)b8[i];
  o[8] = (long)b16[i];
  o[9] = (long)(unsigned short)b16[i];
}

// Rounding to integral values: v_floor/ceil/trunc/rndne_f32 and _f64, roundf's expansion.
KERNEL void cvt_round(float* of, double* od, const float* x, const double* y, int n) {
  int i = gid();
  if (i >= n) return;
  float f = x[i];
  double d = y[i];
  of[5 * i + 0] = __builtin_floorf(f);
  of[5 * i + 1] = __builtin_ceilf(f);
  of[5 * i + 2] = __builtin_truncf(f);
  of[5 * i + 3] = __builtin_rintf(f);
  of[5 * i + 4] = __builtin_roundf(f);
  od[5 * i + 0] = __builtin_floor(d);
  od[5 * i + 1] = __builtin_ceil(d);
  od[5 * i + 2] = __builtin_trunc(d);
  od[5 * i + 3] = __builtin_rint(d);
  od[5 * i + 4] = __builtin_round(d);
}
