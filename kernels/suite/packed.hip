// Kernel suite: packed 16-bit math (v_pk_*), dot products (v_dot*), VOPD dual issue
// (v_dual_*), OPSEL on f16 high halves, inline and literal constants, and WMMA.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

typedef _Float16 half2_t __attribute__((ext_vector_type(2)));
typedef short short2_t __attribute__((ext_vector_type(2)));
typedef unsigned short ushort2_t __attribute__((ext_vector_type(2)));

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// v_pk_add_f16, v_pk_mul_f16, v_pk_fma_f16, v_pk_min/max_f16, swizzled operands (op_sel),
// inline constants in packed form.
KERNEL void pk_f16(half2_t* out, const half2_t* a, const half2_t* b, const half2_t* c, int n) {
  int i = gid();
  if (i >= n) return;
  half2_t x = a[i], y = b[i], z = c[i];
  half2_t* o = out + 7 * i;
  o[0] = x + y;
  o[1] = x * y;
  o[2] = __builtin_elementwise_fma(x, y, z);
  o[3] = __builtin_elementwise_min(x, y);
  o[4] = __builtin_elementwise_max(x, y);
  o[5] = x.yx - y;
  o[6] = __builtin_elementwise_fma(x, (half2_t){2.0f16, 2.0f16}, (half2_t){1.0f16, -0.5f16});
}

// v_pk_add_u16, v_pk_sub_u16, v_pk_mul_lo_u16, v_pk_lshlrev_b16, v_pk_ashrrev_i16,
// v_pk_lshrrev_b16, v_pk_min_i16, v_pk_max_u16, v_pk_mad_u16.
KERNEL void pk_i16(short2_t* out, const short2_t* a, const short2_t* b, int n) {
  int i = gid();
  if (i >= n) return;
  short2_t x = a[i], y = b[i];
  ushort2_t ux = __builtin_bit_cast(ushort2_t, x), uy = __builtin_bit_cast(ushort2_t, y);
  short2_t* o = out + 9 * i;
  o[0] = __builtin_bit_cast(short2_t, ux + uy);
  o[1] = __builtin_bit_cast(short2_t, ux - uy);
  o[2] = __builtin_bit_cast(short2_t, ux * uy);
  o[3] = __builtin_bit_cast(short2_t, ux << (uy & (ushort2_t){15, 15}));
  o[4] = x >> (y & (short2_t){15, 15});
  o[5] = __builtin_bit_cast(short2_t, ux >> (uy & (ushort2_t){15, 15}));
  o[6] = __builtin_elementwise_min(x, y);
  o[7] = __builtin_bit_cast(short2_t, __builtin_elementwise_max(ux, uy));
  o[8] = __builtin_bit_cast(short2_t, ux * uy + ux.yx);
}

// Dot products: v_dot4_u32_u8, v_dot4_i32_iu8 (mixed signedness), v_dot8_u32_u4,
// v_dot8_i32_iu4, v_dot2_f32_f16, v_dot2_f16_f16, and clamping (saturating) forms.
KERNEL void dot(int* oi, float* of, _Float16* oh, const unsigned* a, const unsigned* b,
                const int* c, int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i], y = b[i];
  int z = c[i];
  int* o = oi + 6 * i;
  o[0] = (int)__builtin_amdgcn_udot4(x, y, (unsigned)z, false);
  o[1] = __builtin_amdgcn_sudot4(true, (int)x, false, (int)y, z, false);
  o[2] = (int)__builtin_amdgcn_udot8(x, y, (unsigned)z, false);
  o[3] = __builtin_amdgcn_sudot8(true, (int)x, true, (int)y, z, false);
  o[4] = (int)__builtin_amdgcn_udot4(x, y, 0xfffff000u | (unsigned)(z & 0xfff), true);
  o[5] = __builtin_amdgcn_sudot4(true, (int)x, true, (int)y, z < 0 ? (int)0x80000100 : 0x7ffffe00, true);
  // Small f16 values (multiples of 1/8 up to 8): every product and sum is exact.
  half2_t hx = {(_Float16)(int)(x & 63) * 0.125f16, (_Float16)(int)((x >> 6) & 63) * -0.125f16};
  half2_t hy = {(_Float16)(int)(y & 63) * 0.125f16, (_Float16)(int)((y >> 6) & 63) * 0.125f16};
  of[i] = __builtin_amdgcn_fdot2(hx, hy, (float)(z & 255) * 0.5f, false);
  // Smaller values for the f16 accumulator: multiples of 1/16 below 32, exact in f16.
  half2_t gx = {(_Float16)(int)(x & 7) * 0.25f16, (_Float16)(int)((x >> 3) & 7) * -0.25f16};
  half2_t gy = {(_Float16)(int)(y & 7) * 0.25f16, (_Float16)(int)((y >> 3) & 7) * 0.25f16};
  oh[i] = __builtin_amdgcn_fdot2_f16_f16(gx, gy, (_Float16)(int)(z & 15));
}

// Four independent f32 recurrences, unrolled: clang pairs their operations as VOPD
// (v_dual_add_f32, v_dual_mul_f32, v_dual_fmamk_f32, v_dual_fmac_f32, v_dual_max_f32 ...).
KERNEL void vopd_f32(float* out, const float* a, const float* b, int n) {
  // No contraction: y * 3 followed by s3 + s0 would otherwise fuse into one fma.
#pragma clang fp contract(off)
  int i = gid();
  if (i >= n) return;
  float x = a[i], y = b[i];
  float s0 = x, s1 = y, s2 = x + 1.0f, s3 = y * 3.0f;
  for (int k = 0; k < 8; k++) {
    s0 = __builtin_fmaf(s0, 0.75f, s1);
    s1 = __builtin_fmaf(s1, x, -1.0f);
    s2 = __builtin_fmaxf(s2, s3) * 0.5f;
    s3 = s3 + s0;
  }
  out[4 * i + 0] = s0;
  out[4 * i + 1] = s1;
  out[4 * i + 2] = s2;
  out[4 * i + 3] = s3;
}

// OPSEL: operands taken from the high or low halves of 32-bit registers: v_fma_mix_f32
// (f16 x f16 + f32 in f32) and packed f16 math on swizzled halves (v_pk_mul_f16,
// v_pk_add_f16 with op_sel / op_sel_hi / neg).
KERNEL void opsel_f16(float* of, half2_t* oh, const half2_t* a, const half2_t* b,
                      const float* c, int n) {
  int i = gid();
  if (i >= n) return;
  half2_t h = a[i], g = b[i];
  of[2 * i] = __builtin_fmaf((float)h.y, (float)g.x, c[i]);
  of[2 * i + 1] = __builtin_fmaf((float)h.x, (float)g.y, -c[i]);
  oh[2 * i] = h.yy * g.xy;
  oh[2 * i + 1] = h.xx - g.yy;
}

// Inline constants (0, +-0.5, +-1, +-2, +-4, 1/(2 pi), integers -16..64) and 32-bit literals
// in f32, f64, f16, i32 and i64 operations.
KERNEL void constants(float* of, double* od, int* oi, long* ol, _Float16* oh, const float* a,
                      const int* b, int n) {
  int i = gid();
  if (i >= n) return;
  float x = a[i];
  int y = b[i];
  of[6 * i + 0] = __builtin_fmaf(x, 0.5f, 4.0f);
  of[6 * i + 1] = __builtin_fmaf(x, -2.0f, -1.0f);
  of[6 * i + 2] = x * 0.15915494309189535f;
  of[6 * i + 3] = __builtin_fmaf(x, 3.7f, 1234.5f);
  of[6 * i + 4] = __builtin_fminf(x, -4.0f);
  of[6 * i + 5] = x + 1.0e10f;
  double d = (double)x;
  od[3 * i + 0] = __builtin_fma(d, 0.5, 2.0);
  od[3 * i + 1] = d * 0.1;
  od[3 * i + 2] = d + 1234567.890625;
  oi[4 * i + 0] = y * 64 - 16;
  oi[4 * i + 1] = y * 65 + 0x12345678;
  oi[4 * i + 2] = y & -16;
  oi[4 * i + 3] = (int)((unsigned)y ^ 0xdeadbeefu);
  long l = (long)y;
  ol[2 * i + 0] = l * 0x100000001L + 0x123456789abcL;
  ol[2 * i + 1] = l ^ -2L;
  _Float16 h = (_Float16)x;
  oh[2 * i + 0] = __builtin_fmaf16(h, 0.5f16, -2.0f16);
  oh[2 * i + 1] = h * 1.75f16;
}

typedef _Float16 half16_t __attribute__((ext_vector_type(16)));
typedef float float8_t __attribute__((ext_vector_type(8)));

// v_wmma_f32_16x16x16_f16 (wave32): D = A * B + C for one 16x16x16 tile per wave.
// Lane l holds row (l % 16) of A and column (l % 16) of B (16 halves each, both wave halves
// hold the same data); D/C element (row 2*v + l / 16, column l % 16) sits in VGPR v.
KERNEL void wmma_f16(float* d, const _Float16* a, const _Float16* b, const float* c) {
  unsigned lane = __builtin_amdgcn_workitem_id_x();
  unsigned tile = __builtin_amdgcn_workgroup_id_x();
  const _Float16* ta = a + tile * 256;
  const _Float16* tb = b + tile * 256;
  half16_t va, vb;
  for (int k = 0; k < 16; k++) {
    va[k] = ta[(lane % 16) * 16 + k];
    vb[k] = tb[k * 16 + lane % 16];
  }
  float8_t vc;
  for (int v = 0; v < 8; v++) vc[v] = c[tile * 256 + (2 * v + lane / 16) * 16 + lane % 16];
  float8_t vd = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(va, vb, vc);
  for (int v = 0; v < 8; v++) d[tile * 256 + (2 * v + lane / 16) * 16 + lane % 16] = vd[v];
}
