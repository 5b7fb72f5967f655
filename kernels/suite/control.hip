// Kernel suite: compares, selects and control flow (divergent branches, early returns,
// data-dependent loops, uniform branches on scalars).

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// f32 compares (ordered and unordered, with NaN, infinities and signed zeros), the class
// test, and selects on their results (v_cmp_*_f32, v_cndmask_b32).
KERNEL void cmp_f32(unsigned* flags, float* sel, const float* a, const float* b, int n) {
  int i = gid();
  if (i >= n) return;
  float x = a[i], y = b[i];
  unsigned f = 0;
  f |= (unsigned)(x < y) << 0;
  f |= (unsigned)(x <= y) << 1;
  f |= (unsigned)(x > y) << 2;
  f |= (unsigned)(x >= y) << 3;
  f |= (unsigned)(x == y) << 4;
  f |= (unsigned)(x != y) << 5;
  f |= (unsigned)__builtin_isnan(x) << 6;
  f |= (unsigned)__builtin_isinf(x) << 7;
  f |= (unsigned)__builtin_isunordered(x, y) << 8;
  f |= (unsigned)!(x < y) << 9;
  f |= (unsigned)__builtin_isfinite(y) << 10;
  f |= (unsigned)__builtin_signbit(x) << 11;
  flags[i] = f;
  sel[3 * i + 0] = x < y ? x : y;
  sel[3 * i + 1] = !(x >= y) ? y * 2.0f : x;
  sel[3 * i + 2] = x == y ? 1.0f : (x != x ? -1.0f : 0.5f);
}

// Signed/unsigned 32- and 64-bit compares and selects (v_cmp_*_i32/u32/i64/u64).
KERNEL void cmp_int(unsigned* flags, long* sel, const long* a, const long* b, int n) {
  int i = gid();
  if (i >= n) return;
  long x = a[i], y = b[i];
  unsigned long ux = x, uy = y;
  int x32 = (int)x, y32 = (int)y;
  unsigned u32 = (unsigned)x, v32 = (unsigned)y;
  unsigned f = 0;
  f |= (unsigned)(x < y) << 0;
  f |= (unsigned)(x <= y) << 1;
  f |= (unsigned)(x == y) << 2;
  f |= (unsigned)(ux < uy) << 3;
  f |= (unsigned)(ux >= uy) << 4;
  f |= (unsigned)(x32 < y32) << 5;
  f |= (unsigned)(x32 >= y32) << 6;
  f |= (unsigned)(u32 < v32) << 7;
  f |= (unsigned)(u32 > v32) << 8;
  f |= (unsigned)(x32 != y32) << 9;
  f |= (unsigned)(x > 0) << 10;
  f |= (unsigned)(ux > 0xffffffffu) << 11;
  flags[i] = f;
  sel[2 * i + 0] = x < y ? (long)(ux - uy) : (long)(uy * 3u);
  sel[2 * i + 1] = u32 < v32 ? (long)x32 : (long)v32;
}

// Nested divergent if/else: every lane of a wave takes a different path.
KERNEL void divergent_branches(int* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  unsigned ux = (unsigned)x;
  int r;
  if (x & 1) {
    if (x & 2) {
      r = (int)(ux * 3u + 1u);
    } else {
      r = x ^ 0x5555;
    }
  } else if (x & 4) {
    r = (int)(ux >> 3);
    if (r & 8) r = -r;
  } else if (x & 8) {
    r = (int)(ux * ux);
  } else {
    r = x < 0 ? 1 : 2;
  }
  out[i] = r;
}

// Early returns at several depths; untouched outputs keep their sentinel.
KERNEL void early_return(int* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  if ((x & 3) == 0) return;
  out[2 * i] = x;
  for (int k = 0; k < 8; k++) {
    if (((x >> k) & 15) == 15) return;
  }
  out[2 * i + 1] = x & 0xffff;
}

// Data-dependent loops: Collatz step count (bounded), with break and continue.
KERNEL void data_loops(int* out, const unsigned* a, int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i] % 100000u + 1u;
  int steps = 0;
  while (x != 1u && steps < 500) {
    x = (x & 1u) ? 3u * x + 1u : x >> 1;
    steps++;
  }
  int acc = 0;
  unsigned m = a[i];
  for (int k = 0; k < 32; k++) {
    if (((m >> k) & 1u) == 0u) continue;
    acc += k;
    if (acc > 100) break;
  }
  out[2 * i] = steps;
  out[2 * i + 1] = acc;
}

// A data-dependent loop of correctly rounded f32 divisions and adds (order fixed per lane).
KERNEL void loop_float(float* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int count = a[i] & 63;
  float s = 0.0f;
  for (int k = 0; k < count; k++) s += 1.0f / (float)(k + 1 + (a[i] >> 6 & 7));
  out[i] = s;
}

// A switch on data (lowered to a compare chain) with fall-through.
KERNEL void switch_cases(int* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  int r = 0;
  switch ((unsigned)x % 7u) {
    case 0: r = x * 5; break;
    case 1: r = x + 1000;  // fall through
    case 2: r ^= 0x3c3c; break;
    case 3: r = x >> 4; break;
    case 5: r = -x; break;
    default: r = 42;
  }
  out[i] = r;
}

// Uniform (scalar) control flow on kernel arguments: s_cmp/s_cbranch, scalar loop.
KERNEL void uniform_branch(int* out, const int* a, int mode, int reps, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  if (mode == 1) {
    for (int k = 0; k < reps; k++) x = x * 3 + k;
  } else if (mode == 2) {
    for (int k = 0; k < reps; k++) x ^= x << 1;
  } else {
    x = -x;
  }
  out[i] = x;
}
