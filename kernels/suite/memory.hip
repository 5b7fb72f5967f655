// Kernel suite: memory access shapes: 64/96/128-bit vector loads and stores, 64-bit pointer
// arithmetic and pointers stored in memory, private arrays in scratch, scalar loads of
// uniform data, every kernel-argument type, 2-D and 3-D grids.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

typedef float float4_t __attribute__((ext_vector_type(4)));
typedef int int2_t __attribute__((ext_vector_type(2)));
typedef unsigned uint3_t __attribute__((ext_vector_type(3)));

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// global_load/store_b128 (float4), b64 (int2), b96 (uint3 as three consecutive dwords).
KERNEL void mem_vec(float4_t* o4, int2_t* o2, unsigned* o3, const float4_t* a,
                    const float4_t* b, const int2_t* c, const unsigned* d, int n) {
  int i = gid();
  if (i >= n) return;
  float4_t x = a[i], y = b[i];
  o4[i] = x.wzyx * 2.0f + y;
  int2_t v = c[i];
  o2[i] = (int2_t){v.y - 1, v.x ^ v.y};
  uint3_t w = *(const uint3_t*)(d + 3 * i);
  uint3_t r = {w.z, w.x + w.y, w.y << 1};
  o3[3 * i + 0] = r.x;
  o3[3 * i + 1] = r.y;
  o3[3 * i + 2] = r.z;
}

// 64-bit pointer arithmetic: 64-bit element offsets (gather), negative offsets from the end,
// byte distances between computed addresses.
KERNEL void mem_ptr64(long* out, const int* base, const unsigned long* idx, int n, long len) {
  int i = gid();
  if (i >= n) return;
  const int* end = base + len;
  const int* p = base + idx[i];
  const int* q = end - 1 - (long)idx[i];
  out[3 * i + 0] = *p;
  out[3 * i + 1] = *q;
  out[3 * i + 2] = (const char*)q - (const char*)p;
}

// Pointers in memory: stage 1 stores &data[perm[i]] into a table, stage 2 chases them
// (global_store_b64 of an address, then a load through the loaded address).
KERNEL void mem_ptr_store(const int** table, const int* data, const int* perm, int n) {
  int i = gid();
  if (i >= n) return;
  table[i] = data + perm[i];
}
KERNEL void mem_ptr_chase(int* out, const int* const* table, int n) {
  int i = gid();
  if (i >= n) return;
  const int* p = table[i];
  out[i] = p[0] * 2 + (int)(p == table[(i + 1) % n]);
}

// A private array indexed by data: lives in scratch (scratch_load/store_b32).
KERNEL void mem_scratch(int* out, const unsigned* a, int n) {
  int i = gid();
  if (i >= n) return;
  int priv[64];
  unsigned x = a[i];
  for (int k = 0; k < 64; k++) priv[k] = (int)(x * (unsigned)k) ^ k;
  for (int j = 0; j < 24; j++) {
    unsigned idx = (x >> j) & 63u;
    priv[idx] += j;
    priv[(idx * 7u + 3u) & 63u] ^= priv[idx];
  }
  out[2 * i] = priv[x & 63u] + priv[(x >> 6) & 63u];
  int s = 0;
  for (int k = 0; k < 64; k += 3) s += priv[k];
  out[2 * i + 1] = s;
}

typedef struct {
  int a[8];
  float scale;
  long offset;
} params_t;

// Scalar loads (s_load_b32..b256) of a uniform parameter block, and every kernel-argument
// type (i32, u32, i64, u64, f32, f64, pointers) in a mixed-alignment argument list.
KERNEL void mem_args(double* out, const params_t* prm, int i32, unsigned u32, long i64,
                     unsigned long u64, float f32, double f64, const int* x, int n) {
  int i = gid();
  if (i >= n) return;
  double* o = out + 8 * i;
  o[0] = (double)prm->a[i & 7] * prm->scale + (double)prm->offset;
  o[1] = (double)(prm->a[0] + prm->a[7]);
  o[2] = (double)i32 + x[i];
  o[3] = (double)u32;
  o[4] = (double)(i64 + i);
  o[5] = (double)(u64 >> 12);
  o[6] = (double)f32 * x[i];
  o[7] = f64 + i;
}

// 3-D grid of 3-D workgroups: ids, sizes (hidden arguments) and workgroup counts (from the
// implicit argument block, code object v5: block_count_x/y/z at offsets 0, 4, 8).
KERNEL void mem_grid3d(unsigned* out) {
  unsigned tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y(),
           tz = __builtin_amdgcn_workitem_id_z();
  unsigned gx = __builtin_amdgcn_workgroup_id_x(), gy = __builtin_amdgcn_workgroup_id_y(),
           gz = __builtin_amdgcn_workgroup_id_z();
  unsigned sx = __builtin_amdgcn_workgroup_size_x(), sy = __builtin_amdgcn_workgroup_size_y(),
           sz = __builtin_amdgcn_workgroup_size_z();
  const unsigned* implicit = (const unsigned*)__builtin_amdgcn_implicitarg_ptr();
  unsigned nx = implicit[0], ny = implicit[1];
  unsigned x = gx * sx + tx, y = gy * sy + ty, z = gz * sz + tz;
  unsigned w = nx * sx, h = ny * sy;
  unsigned* o = out + 2 * ((z * h + y) * w + x);
  o[0] = (x << 20) | (y << 10) | z;
  o[1] = (sx << 24) | (sy << 16) | (sz << 8) | (implicit[2] << 4) | (tx + ty + tz);
}

// 2-D 3x3 box sum with clamped borders on a w x h image, 2-D grid with ragged edges.
KERNEL void mem_grid2d(int* out, const int* img, int w, int h) {
  int x = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  int y = __builtin_amdgcn_workgroup_id_y() * __builtin_amdgcn_workgroup_size_y() +
          __builtin_amdgcn_workitem_id_y();
  if (x >= w || y >= h) return;
  int s = 0;
  for (int dy = -1; dy <= 1; dy++)
    for (int dx = -1; dx <= 1; dx++) {
      int xx = x + dx < 0 ? 0 : (x + dx >= w ? w - 1 : x + dx);
      int yy = y + dy < 0 ? 0 : (y + dy >= h ? h - 1 : y + dy);
      s += img[yy * w + xx] * (dx + 2) * (dy + 3);
    }
  out[y * w + x] = s;
}

// 16-bit halves in registers: global_load_d16_b16 / d16_hi_b16 and global_store_d16_hi_b16.
KERNEL void mem_d16(short* out, const short* a, const short* b, int n) {
  int i = gid();
  if (i >= n) return;
  typedef short short2_t __attribute__((ext_vector_type(2)));
  short2_t v = {a[i], b[n - 1 - i]};
  v = v + (short2_t){3, -5};
  out[2 * i] = v.y;
  out[2 * i + 1] = v.x;
}
