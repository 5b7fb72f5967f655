// Kernel suite: the hardware's transcendental and floating-point helper instructions, called
// through clang's amdgcn builtins (each maps to one instruction), and the correctly rounded
// sqrt expansions.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// Approximate f32 instructions: v_rcp_f32, v_rsq_f32, v_sqrt_f32, v_exp_f32 (2^x),
// v_log_f32 (log2 x).
KERNEL void trans_f32(float* out, const float* x, int n) {
  int i = gid();
  if (i >= n) return;
  float v = x[i];
  float* o = out + 5 * i;
  o[0] = __builtin_amdgcn_rcpf(v);
  o[1] = __builtin_amdgcn_rsqf(v);
  o[2] = __builtin_amdgcn_sqrtf(v);
  o[3] = __builtin_amdgcn_exp2f(v);
  o[4] = __builtin_amdgcn_logf(v);
}

// v_sin_f32 / v_cos_f32: the input is in revolutions (sin(2 pi x)).
KERNEL void trans_sincos(float* out, const float* x, int n) {
  int i = gid();
  if (i >= n) return;
  out[2 * i + 0] = __builtin_amdgcn_sinf(x[i]);
  out[2 * i + 1] = __builtin_amdgcn_cosf(x[i]);
}

// Exact helpers: v_fract_f32, v_ldexp_f32, v_frexp_mant_f32, v_frexp_exp_i32_f32,
// v_fmed3_f32, v_cmp_class_f32, and sqrt through __builtin_sqrtf (the correctly rounded
// expansion around v_sqrt_f32) and __builtin_sqrt (f64).
KERNEL void trans_exact(float* of, int* oi, double* od, const float* x, const int* e, int n) {
  int i = gid();
  if (i >= n) return;
  float v = x[i];
  of[6 * i + 0] = __builtin_amdgcn_fractf(v);
  of[6 * i + 1] = __builtin_amdgcn_ldexpf(v, e[i]);
  of[6 * i + 2] = __builtin_amdgcn_frexp_mantf(v);
  of[6 * i + 3] = __builtin_sqrtf(v);
  of[6 * i + 4] = __builtin_amdgcn_fmed3f(v, -1.5f, 2.25f);
  of[6 * i + 5] = __builtin_copysignf(2.5f, v);
  oi[2 * i + 0] = __builtin_amdgcn_frexp_expf(v);
  oi[2 * i + 1] = __builtin_amdgcn_classf(v, e[i] & 0x3ff);
  od[i] = __builtin_sqrt((double)v * 3.0);
}

// f64 helpers: v_rcp_f64 and v_rsq_f64 (approximate), v_ldexp_f64, v_frexp_mant_f64,
// v_frexp_exp_i32_f64, v_fract_f64 (exact).
KERNEL void trans_f64(double* od, int* oi, const double* x, const int* e, int n) {
  int i = gid();
  if (i >= n) return;
  double v = x[i];
  od[5 * i + 0] = __builtin_amdgcn_rcp(v);
  od[5 * i + 1] = __builtin_amdgcn_rsq(v);
  od[5 * i + 2] = __builtin_amdgcn_ldexp(v, e[i]);
  od[5 * i + 3] = __builtin_amdgcn_frexp_mant(v);
  od[5 * i + 4] = __builtin_amdgcn_fract(v);
  oi[i] = __builtin_amdgcn_frexp_exp(v);
}

// f16 instructions: v_rcp_f16, v_sqrt_f16, v_rsq_f16 (approximate), v_ldexp_f16,
// v_frexp_mant_f16, v_fract_f16 (exact).
KERNEL void trans_f16(_Float16* out, const _Float16* x, const int* e, int n) {
  int i = gid();
  if (i >= n) return;
  _Float16 v = x[i];
  _Float16* o = out + 6 * i;
  o[0] = __builtin_amdgcn_rcph(v);
  o[1] = __builtin_amdgcn_sqrth(v);
  o[2] = __builtin_amdgcn_rsqh(v);
  o[3] = __builtin_amdgcn_ldexph(v, e[i] & 15);
  o[4] = __builtin_amdgcn_frexp_manth(v);
  o[5] = __builtin_amdgcn_fracth(v);
}
