// Kernel suite: workgroup-shared memory (LDS) with barriers and fences: tree reduction, scan,
// tiled matmul, transpose, LDS access widths, LDS histogram.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline
#define SHARED __attribute__((shared))

typedef float float4_t __attribute__((ext_vector_type(4)));

DEV void sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// Per-workgroup sum (wrapping u32) of 256 elements by a tree over 8 waves.
KERNEL void lds_reduce(unsigned* out, const unsigned* a, int n) {
  SHARED unsigned s[256];
  unsigned t = __builtin_amdgcn_workitem_id_x();
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + t;
  s[t] = i < n ? a[i] : 0u;
  sync();
  for (unsigned stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    sync();
  }
  if (t == 0) out[__builtin_amdgcn_workgroup_id_x()] = s[0];
}

// Per-workgroup inclusive prefix sum over 128 elements (Hillis-Steele, double-buffered).
KERNEL void lds_scan(int* out, const int* a, int n) {
  SHARED int buf[2][128];
  int t = __builtin_amdgcn_workitem_id_x();
  int i = __builtin_amdgcn_workgroup_id_x() * 128 + t;
  int cur = 0;
  buf[0][t] = i < n ? a[i] : 0;
  sync();
  for (int d = 1; d < 128; d <<= 1) {
    int v = buf[cur][t];
    if (t >= d) v += buf[cur][t - d];
    buf[cur ^ 1][t] = v;
    cur ^= 1;
    sync();
  }
  if (i < n) out[i] = buf[cur][t];
}

// C[m x p] = A[m x k] * B[k x p], 16x16 tiles through LDS, 2-D grid, ragged edges.
KERNEL void lds_matmul(float* c, const float* a, const float* b, int m, int k, int p) {
  SHARED float ta[16][16];
  SHARED float tb[16][17];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int col = __builtin_amdgcn_workgroup_id_x() * 16 + tx;
  int row = __builtin_amdgcn_workgroup_id_y() * 16 + ty;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += 16) {
    ta[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : 0.0f;
    tb[ty][tx] = (col < p && k0 + ty < k) ? b[(k0 + ty) * p + col] : 0.0f;
    sync();
    for (int j = 0; j < 16; j++) acc += ta[ty][j] * tb[j][tx];
    sync();
  }
  if (row < m && col < p) c[row * p + col] = acc;
}

// Transpose of a rows x cols u32 matrix through a padded 16x17 LDS tile.
KERNEL void lds_transpose(unsigned* out, const unsigned* in, int rows, int cols) {
  SHARED unsigned tile[16][17];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int bx = __builtin_amdgcn_workgroup_id_x() * 16, by = __builtin_amdgcn_workgroup_id_y() * 16;
  if (by + ty < rows && bx + tx < cols) tile[ty][tx] = in[(by + ty) * cols + bx + tx];
  sync();
  int r = bx + ty, cc = by + tx;  // output row = input column
  if (r < cols && cc < rows) out[r * rows + cc] = tile[tx][ty];
}

// LDS access widths: ds_store/load of b8 (signed and unsigned), b16, b64, b128, and the
// two-address forms (ds_load_2addr / ds_store_2addr); each lane reads its neighbours.
KERNEL void lds_widths(long* out, const long* a, int n) {
  SHARED signed char s8[64];
  SHARED unsigned short s16[64];
  SHARED long s64[64];
  SHARED float4_t s128[64];
  SHARED int pair[128];
  int t = __builtin_amdgcn_workitem_id_x();
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + t;
  long x = i < n ? a[i] : 0;
  s8[t] = (signed char)x;
  s16[t] = (unsigned short)(x >> 8);
  s64[t] = x;
  float4_t v = {(float)(x & 0xff), (float)((x >> 8) & 0xff), (float)((x >> 16) & 0xff),
                (float)((x >> 24) & 0xff)};
  s128[t] = v;
  pair[t] = (int)x;
  pair[t + 64] = (int)(x >> 32);
  sync();
  int u = (t + 1) & 63, w = (t + 63) & 63;
  if (i < n) {
    long* o = out + 6 * i;
    o[0] = s8[u];
    o[1] = s16[w];
    o[2] = s64[u] ^ s64[w];
    float4_t q = s128[u];
    o[3] = (long)(q.x + 2.0f * q.y + 4.0f * q.z + 8.0f * q.w);
    o[4] = (long)pair[u] + (long)pair[u + 64];
    o[5] = (long)pair[w] * 3 - (long)pair[w + 64];
  }
}

// Histogram of 64 bins: LDS atomics without return (ds_add_u32), then one global atomic per bin.
KERNEL void lds_histogram(unsigned* hist, const unsigned* a, int n) {
  SHARED unsigned bins[64];
  int t = __builtin_amdgcn_workitem_id_x();
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + t;
  if (t < 64) bins[t] = 0;
  sync();
  if (i < n) __hip_atomic_fetch_add(&bins[a[i] & 63], 1u, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  sync();
  if (t < 64 && bins[t] != 0)
    __hip_atomic_fetch_add(&hist[t], bins[t], __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
