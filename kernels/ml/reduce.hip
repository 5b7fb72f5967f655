// ML kernels: row reductions with wave shuffles (DPP, ds_bpermute, permlanex16) and LDS:
// sum/max/argmax, softmax, log-softmax, layernorm, rmsnorm, and a multi-pass sum.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline
#define SHARED __attribute__((shared))

#define DPP_QUAD_XOR1 0xb1      // quad_perm [1,0,3,2]
#define DPP_QUAD_XOR2 0x4e      // quad_perm [2,3,0,1]
#define DPP_ROW_HALF_MIRROR 0x141
#define DPP_ROW_MIRROR 0x140

DEV void sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

#define DPP_MOVE(v, ctrl) \
  __builtin_bit_cast(float, __builtin_amdgcn_update_dpp(0, __builtin_bit_cast(int, (v)), (ctrl), 0xf, 0xf, false))

DEV float swap_rows_of_16(float v) {
  return __builtin_bit_cast(float, __builtin_amdgcn_permlanex16(0u, __builtin_bit_cast(unsigned, v),
                                                                0x76543210u, 0xfedcba98u, false, false));
}

// clang 19 sinks the permlanex16 (and the add feeding it) into a caller's `if (lane == 0)`,
// where the other row's lanes are inactive and never computed their half; an empty asm that
// takes the value pins the whole butterfly before any branch.
DEV float materialize(float v) {
  __asm__ volatile("" : "+v"(v));
  return v;
}

// Butterfly over the wave by DPP: afterwards every lane holds the sum of all 32.
DEV float wave_sum(float v) {
  v += DPP_MOVE(v, DPP_QUAD_XOR1);
  v += DPP_MOVE(v, DPP_QUAD_XOR2);
  v += DPP_MOVE(v, DPP_ROW_HALF_MIRROR);
  v += DPP_MOVE(v, DPP_ROW_MIRROR);
  return materialize(v + swap_rows_of_16(v));
}

DEV float wave_max(float v) {
  v = __builtin_fmaxf(v, DPP_MOVE(v, DPP_QUAD_XOR1));
  v = __builtin_fmaxf(v, DPP_MOVE(v, DPP_QUAD_XOR2));
  v = __builtin_fmaxf(v, DPP_MOVE(v, DPP_ROW_HALF_MIRROR));
  v = __builtin_fmaxf(v, DPP_MOVE(v, DPP_ROW_MIRROR));
  return materialize(__builtin_fmaxf(v, swap_rows_of_16(v)));
}

DEV unsigned lane_id() { return __builtin_amdgcn_mbcnt_lo(~0u, 0u); }

// (value, index) max with the lower index winning ties, by ds_bpermute butterflies.
DEV void wave_argmax(float* value, int* index) {
  for (int mask = 16; mask > 0; mask >>= 1) {
    int from = (int)((lane_id() ^ mask) << 2);
    float other_v = __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(from, __builtin_bit_cast(int, *value)));
    int other_i = __builtin_amdgcn_ds_bpermute(from, *index);
    if (other_v > *value || (other_v == *value && other_i < *index)) {
      *value = other_v;
      *index = other_i;
    }
  }
}

// Workgroup-wide sum/max through one LDS slot per wave (workgroups of 32..1024 lanes).
DEV float block_sum(float v, float* scratch) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned waves = (__builtin_amdgcn_workgroup_size_x() + 31) / 32;
  v = wave_sum(v);
  if (lane_id() == 0) scratch[t / 32] = v;
  sync();
  float total = 0.0f;
  for (unsigned w = 0; w < waves; w++) total += scratch[w];
  sync();
  return total;
}

DEV float block_max(float v, float* scratch) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned waves = (__builtin_amdgcn_workgroup_size_x() + 31) / 32;
  v = wave_max(v);
  if (lane_id() == 0) scratch[t / 32] = v;
  sync();
  float best = -__builtin_inff();
  for (unsigned w = 0; w < waves; w++) best = __builtin_fmaxf(best, scratch[w]);
  sync();
  return best;
}

// One workgroup per row, any workgroup size that is a multiple of 32 up to 1024.
KERNEL void row_sum_max_argmax(float* sums, float* maxes, int* argmaxes, const float* x, int cols) {
  SHARED float scratch[32];
  SHARED float wave_best[32];
  SHARED int wave_best_index[32];
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned size = __builtin_amdgcn_workgroup_size_x();
  unsigned row = __builtin_amdgcn_workgroup_id_x();
  const float* xr = x + (long)row * cols;
  float sum = 0.0f, best = -__builtin_inff();
  int best_index = 0x7fffffff;
  for (int c = t; c < cols; c += size) {
    float v = xr[c];
    sum += v;
    if (v > best) {
      best = v;
      best_index = c;
    }
  }
  float total = block_sum(sum, scratch);
  float row_max = block_max(best, scratch);
  wave_argmax(&best, &best_index);
  if (lane_id() == 0) {
    wave_best[t / 32] = best;
    wave_best_index[t / 32] = best_index;
  }
  sync();
  if (t == 0) {
    float b = wave_best[0];
    int bi = wave_best_index[0];
    for (unsigned w = 1; w < size / 32; w++) {
      if (wave_best[w] > b || (wave_best[w] == b && wave_best_index[w] < bi)) {
        b = wave_best[w];
        bi = wave_best_index[w];
      }
    }
    sums[row] = total;
    maxes[row] = row_max;
    argmaxes[row] = bi;
  }
}

DEV float fast_exp(float x) { return __builtin_amdgcn_exp2f(x * 1.44269504088896341f); }
DEV float fast_log(float x) { return __builtin_amdgcn_logf(x) * 0.693147180559945309f; }

// Numerically stable softmax and log-softmax of each row (one workgroup per row).
KERNEL void softmax_rows(float* probs, float* log_probs, const float* x, int cols) {
  SHARED float scratch[32];
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned size = __builtin_amdgcn_workgroup_size_x();
  long base = (long)__builtin_amdgcn_workgroup_id_x() * cols;
  float m = -__builtin_inff();
  for (int c = t; c < cols; c += size) m = __builtin_fmaxf(m, x[base + c]);
  m = block_max(m, scratch);
  float s = 0.0f;
  for (int c = t; c < cols; c += size) s += fast_exp(x[base + c] - m);
  s = block_sum(s, scratch);
  float inv = 1.0f / s;
  float log_s = fast_log(s);
  for (int c = t; c < cols; c += size) {
    float shifted = x[base + c] - m;
    probs[base + c] = fast_exp(shifted) * inv;
    log_probs[base + c] = shifted - log_s;
  }
}

// The same softmax with the row cached in dynamic LDS sized at launch (cols floats), read from
// global memory once.
KERNEL void softmax_rows_cached(float* probs, const float* x, int cols) {
  extern SHARED float row_cache[];
  SHARED float scratch[32];
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned size = __builtin_amdgcn_workgroup_size_x();
  long base = (long)__builtin_amdgcn_workgroup_id_x() * cols;
  float m = -__builtin_inff();
  for (int c = t; c < cols; c += size) {
    float v = x[base + c];
    row_cache[c] = v;
    m = __builtin_fmaxf(m, v);
  }
  m = block_max(m, scratch);
  float s = 0.0f;
  for (int c = t; c < cols; c += size) {
    float e = fast_exp(row_cache[c] - m);
    row_cache[c] = e;
    s += e;
  }
  s = block_sum(s, scratch);
  float inv = 1.0f / s;
  for (int c = t; c < cols; c += size) probs[base + c] = row_cache[c] * inv;
}

// LayerNorm over the last dimension (two-pass mean and variance), then RMSNorm of the same row.
KERNEL void layernorm_rmsnorm(float* ln_out, float* rms_out, const float* x, const float* gamma,
                              const float* beta, int cols, float eps) {
  SHARED float scratch[32];
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned size = __builtin_amdgcn_workgroup_size_x();
  long base = (long)__builtin_amdgcn_workgroup_id_x() * cols;
  float s = 0.0f;
  for (int c = t; c < cols; c += size) s += x[base + c];
  float mean = block_sum(s, scratch) / (float)cols;
  float sq = 0.0f, raw_sq = 0.0f;
  for (int c = t; c < cols; c += size) {
    float d = x[base + c] - mean;
    sq += d * d;
    raw_sq += x[base + c] * x[base + c];
  }
  float var = block_sum(sq, scratch) / (float)cols;
  float mean_sq = block_sum(raw_sq, scratch) / (float)cols;
  float rstd = __builtin_amdgcn_rsqf(var + eps);
  float rrms = __builtin_amdgcn_rsqf(mean_sq + eps);
  for (int c = t; c < cols; c += size) {
    float v = x[base + c];
    ln_out[base + c] = (v - mean) * rstd * gamma[c] + beta[c];
    rms_out[base + c] = v * rrms * gamma[c];
  }
}

// One pass of a multi-pass sum: workgroup g sums elements [g * chunk, (g + 1) * chunk) of `in`
// into partials[g]. Run once over the data and again over the partials.
KERNEL void sum_partials(float* partials, const float* in, int n, int chunk) {
  SHARED float scratch[32];
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned size = __builtin_amdgcn_workgroup_size_x();
  int start = __builtin_amdgcn_workgroup_id_x() * chunk;
  int end = start + chunk < n ? start + chunk : n;
  float s = 0.0f;
  for (int i = start + t; i < end; i += size) s += in[i];
  s = block_sum(s, scratch);
  if (t == 0) partials[__builtin_amdgcn_workgroup_id_x()] = s;
}
