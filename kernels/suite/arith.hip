// Kernel suite: arithmetic on every scalar type the GPU has (f16, f32, f64, i8, i16, i32, u32,
// i64, u64), including the compiler's expansions of division and remainder.
// Each kernel writes K results per element to out[i * K + k]; the host recomputes each one.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// f32: IEEE add/sub/mul, the correctly rounded division expansion (v_div_scale/fmas/fixup),
// fma, IEEE min/max, negation and absolute value modifiers.
KERNEL void arith_f32(float* out, const float* a, const float* b, const float* c, int n) {
  int i = gid();
  if (i >= n) return;
  float x = a[i], y = b[i], z = c[i];
  float* o = out + 8 * i;
  o[0] = x + y;
  o[1] = x - y;
  o[2] = x * y;
  o[3] = x / y;
  o[4] = __builtin_fmaf(x, y, z);
  o[5] = __builtin_fminf(x, y);
  o[6] = __builtin_fmaxf(x, y);
  o[7] = -x * __builtin_fabsf(y);
}

// f64: the same set, plus the correctly rounded sqrt expansion (v_rsq_f64 + refinement).
KERNEL void arith_f64(double* out, const double* a, const double* b, const double* c, int n) {
  int i = gid();
  if (i >= n) return;
  double x = a[i], y = b[i], z = c[i];
  double* o = out + 8 * i;
  o[0] = x + y;
  o[1] = x - y;
  o[2] = x * y;
  o[3] = x / y;
  o[4] = __builtin_fma(x, y, z);
  o[5] = __builtin_fmin(x, y);
  o[6] = __builtin_fmax(x, y);
  o[7] = __builtin_sqrt(__builtin_fabs(x));
}

// f16: v_add/sub/mul/fma_f16, min/max, and the f16 division expansion (via f32 rcp + fixup).
KERNEL void arith_f16(_Float16* out, const _Float16* a, const _Float16* b, const _Float16* c,
                      int n) {
  int i = gid();
  if (i >= n) return;
  _Float16 x = a[i], y = b[i], z = c[i];
  _Float16* o = out + 7 * i;
  o[0] = x + y;
  o[1] = x - y;
  o[2] = x * y;
  o[3] = __builtin_fmaf16(x, y, z);
  o[4] = __builtin_fminf16(x, y);
  o[5] = __builtin_fmaxf16(x, y);
  o[6] = x / y;
}

// i32 / u32: wrapping add/sub/mul, high halves of the 64-bit products, shifts, min/max,
// 24-bit multiplies, add-with-carry detection and a multiply-add by a literal.
KERNEL void arith_i32(int* out, const int* a, const int* b, const int* c, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i], y = b[i], z = c[i];
  unsigned ux = x, uy = y, uz = z;
  int* o = out + 16 * i;
  o[0] = (int)(ux + uy);
  o[1] = (int)(ux - uy);
  o[2] = (int)(ux * uy);
  o[3] = (int)(((long)x * (long)y) >> 32);
  o[4] = (int)(((unsigned long)ux * (unsigned long)uy) >> 32);
  o[5] = (int)(ux << (uy & 31));
  o[6] = x >> (y & 31);
  o[7] = (int)(ux >> (uy & 31));
  o[8] = x < y ? x : y;
  o[9] = x > y ? x : y;
  o[10] = (int)(ux < uy ? ux : uy);
  o[11] = (int)(ux > uy ? ux : uy);
  o[12] = (int)((ux & 0xffffffu) * (uy & 0xffffffu));
  o[13] = (int)(((unsigned long)(ux & 0xffffffu) * (unsigned long)(uy & 0xffffffu)) >> 32);
  o[14] = (int)((ux + uy) < ux);
  o[15] = (int)(ux * 0x9e3779b9u + uz);
}

// i64 / u64: add/sub/mul (v_mad_u64_u32 expansions), 64-bit shifts, min/max, the high half of
// a 128-bit product, negation.
KERNEL void arith_i64(long* out, const long* a, const long* b, int n) {
  int i = gid();
  if (i >= n) return;
  long x = a[i], y = b[i];
  unsigned long ux = x, uy = y;
  long* o = out + 12 * i;
  o[0] = (long)(ux + uy);
  o[1] = (long)(ux - uy);
  o[2] = (long)(ux * uy);
  o[3] = (long)(ux << (uy & 63));
  o[4] = x >> (y & 63);
  o[5] = (long)(ux >> (uy & 63));
  o[6] = x < y ? x : y;
  o[7] = x > y ? x : y;
  o[8] = (long)(ux < uy ? ux : uy);
  o[9] = (long)(ux > uy ? ux : uy);
  o[10] = (long)(((unsigned __int128)ux * uy) >> 64);
  o[11] = (long)(0 - ux);
}

// i8 / i16: arithmetic in narrow types (wrapping on truncation), sign/zero extension, narrow
// loads (global_load_i8/u8/i16/u16) and stores (global_store_b8/b16).
KERNEL void arith_i8_i16(signed char* o8, short* o16, const signed char* a8,
                         const signed char* b8, const short* a16, const short* b16, int n) {
  int i = gid();
  if (i >= n) return;
  signed char x = a8[i], y = b8[i];
  unsigned char ux = (unsigned char)x, uy = (unsigned char)y;
  o8[6 * i + 0] = (signed char)(x + y);
  o8[6 * i + 1] = (signed char)(x * y);
  o8[6 * i + 2] = (signed char)(x >> 2);
  o8[6 * i + 3] = (signed char)(ux >> 2);
  o8[6 * i + 4] = x < y ? x : y;
  o8[6 * i + 5] = (signed char)(ux > uy ? ux : uy);
  short p = a16[i], q = b16[i];
  unsigned short up = (unsigned short)p, uq = (unsigned short)q;
  o16[6 * i + 0] = (short)(p + q);
  o16[6 * i + 1] = (short)(p * q);
  o16[6 * i + 2] = (short)(p >> 3);
  o16[6 * i + 3] = (short)(up >> 3);
  o16[6 * i + 4] = (short)(up < uq ? up : uq);
  o16[6 * i + 5] = (short)(p + x * 3);
}

// Signed and unsigned 32-bit division and remainder (the compiler's rcp-based expansion).
// Divisors are never 0 and the pair (INT_MIN, -1) is avoided (undefined in C).
KERNEL void divrem_i32(int* out, const int* a, const int* b, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i], y = b[i];
  unsigned ux = x, uy = y;
  out[4 * i + 0] = x / y;
  out[4 * i + 1] = x % y;
  out[4 * i + 2] = (int)(ux / uy);
  out[4 * i + 3] = (int)(ux % uy);
}

// Signed and unsigned 64-bit division and remainder (a long inline expansion).
KERNEL void divrem_i64(long* out, const long* a, const long* b, int n) {
  int i = gid();
  if (i >= n) return;
  long x = a[i], y = b[i];
  unsigned long ux = x, uy = y;
  out[4 * i + 0] = x / y;
  out[4 * i + 1] = x % y;
  out[4 * i + 2] = (long)(ux / uy);
  out[4 * i + 3] = (long)(ux % uy);
}

// Division by constants: magic-number multiplies (v_mul_hi_u32/i32, 64-bit mul-hi sequences).
KERNEL void divrem_const(long* out, const long* a, int n) {
  int i = gid();
  if (i >= n) return;
  long x = a[i];
  int x32 = (int)x;
  unsigned u32 = (unsigned)x;
  unsigned long u64 = (unsigned long)x;
  long* o = out + 8 * i;
  o[0] = x32 / 7;
  o[1] = x32 % 7;
  o[2] = x32 / -3;
  o[3] = u32 / 10u;
  o[4] = u32 % 1000u;
  o[5] = x / 1000000007L;
  o[6] = (long)(u64 % 10ul);
  o[7] = x32 / 16;
}
