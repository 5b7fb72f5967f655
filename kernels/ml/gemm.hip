// ML kernels: GEMM in the shapes BLAS libraries and code generators emit: naive, LDS-tiled with
// padded tiles, register-blocked (4x4 per thread), f16 inputs with f32 accumulation, WMMA, and
// a register-starved variant that spills to scratch. C[M x N] = A[M x K] * B[K x N], row-major,
// any sizes (bounds checks everywhere). Accumulation is one fma per k in increasing k order.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline
#define SHARED __attribute__((shared))

DEV void sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

DEV int tid_x() { return __builtin_amdgcn_workitem_id_x(); }
DEV int tid_y() { return __builtin_amdgcn_workitem_id_y(); }
DEV int group_x() { return __builtin_amdgcn_workgroup_id_x(); }
DEV int group_y() { return __builtin_amdgcn_workgroup_id_y(); }

// One output per work-item, 2-D grid.
KERNEL void gemm_naive(float* c, const float* a, const float* b, int m, int n, int k) {
  int col = group_x() * __builtin_amdgcn_workgroup_size_x() + tid_x();
  int row = group_y() * __builtin_amdgcn_workgroup_size_y() + tid_y();
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; i++) acc = __builtin_fmaf(a[row * k + i], b[i * n + col], acc);
  c[row * n + col] = acc;
}

#define T32 32
#define TK8 8

// 32x32 output tile per 32x8 workgroup (4 rows per thread), K in steps of 8 through LDS. The A
// tile is stored k-major with one pad column so the column reads hit different banks.
KERNEL void gemm_lds_tiled(float* c, const float* a, const float* b, int m, int n, int k) {
  SHARED float a_tile[TK8][T32 + 1];
  SHARED float b_tile[TK8][T32 + 1];
  int tx = tid_x(), ty = tid_y();
  int row0 = group_y() * T32, col0 = group_x() * T32;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < k; k0 += TK8) {
    // 256 threads load the 32x8 A tile (thread -> row tx, k ty) and the 8x32 B tile.
    int ar = row0 + tx, ak = k0 + ty;
    a_tile[ty][tx] = (ar < m && ak < k) ? a[ar * k + ak] : 0.0f;
    int bk = k0 + ty, bc = col0 + tx;
    b_tile[ty][tx] = (bk < k && bc < n) ? b[bk * n + bc] : 0.0f;
    sync();
    for (int kk = 0; kk < TK8; kk++) {
      float bv = b_tile[kk][tx];
      for (int r = 0; r < 4; r++) acc[r] = __builtin_fmaf(a_tile[kk][ty + 8 * r], bv, acc[r]);
    }
    sync();
  }
  for (int r = 0; r < 4; r++) {
    int row = row0 + ty + 8 * r, col = col0 + tx;
    if (row < m && col < n) c[row * n + col] = acc[r];
  }
}

#define T64 64
#define TK16 16

// 64x64 tile per 16x16 workgroup, each thread a 4x4 block of outputs held in registers
// (rows ty + 16 i, columns tx + 16 j), epilogue c = alpha * acc + beta * c_in.
KERNEL void gemm_register_blocked(float* c, const float* c_in, const float* a, const float* b,
                                  int m, int n, int k, float alpha, float beta) {
  SHARED float a_tile[TK16][T64 + 4];
  SHARED float b_tile[TK16][T64 + 4];
  int tx = tid_x(), ty = tid_y(), t = ty * 16 + tx;
  int row0 = group_y() * T64, col0 = group_x() * T64;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TK16) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      int e = t + 256 * l;
      int ar = e / TK16, ak = e % TK16;  // A tile: 64 rows x 16 k, stored k-major
      a_tile[ak][ar] = (row0 + ar < m && k0 + ak < k) ? a[(row0 + ar) * k + k0 + ak] : 0.0f;
      int bk = e / T64, bc = e % T64;
      b_tile[bk][bc] = (k0 + bk < k && col0 + bc < n) ? b[(k0 + bk) * n + col0 + bc] : 0.0f;
    }
    sync();
#pragma unroll
    for (int kk = 0; kk < TK16; kk++) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) av[i] = a_tile[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; j++) bv[j] = b_tile[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = __builtin_fmaf(av[i], bv[j], acc[i][j]);
    }
    sync();
  }
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
      if (row < m && col < n) c[row * n + col] = __builtin_fmaf(alpha, acc[i][j], beta * c_in[row * n + col]);
    }
}

// f16 operands staged through LDS as f16, widened to f32 for an f32 accumulation (AMP style).
KERNEL void gemm_f16_acc_f32(float* c, const _Float16* a, const _Float16* b, int m, int n, int k) {
  SHARED _Float16 a_tile[16][17];
  SHARED _Float16 b_tile[16][17];
  int tx = tid_x(), ty = tid_y();
  int row = group_y() * 16 + ty, col = group_x() * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += 16) {
    a_tile[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : (_Float16)0.0f;
    b_tile[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : (_Float16)0.0f;
    sync();
    for (int kk = 0; kk < 16; kk++) acc = __builtin_fmaf((float)a_tile[ty][kk], (float)b_tile[kk][tx], acc);
    sync();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

typedef _Float16 half16 __attribute__((ext_vector_type(16)));
typedef float float8 __attribute__((ext_vector_type(8)));

// WMMA: a 64-lane workgroup (2 waves) computes a 16x32 block of C, one 16x16 tile per wave,
// K in steps of 16 with zero fill past the edges. Lane l holds row l % 16 of the A fragment
// and column l % 16 of the B fragment; result element v of lane l is (2v + l / 16, l % 16).
KERNEL void gemm_wmma(float* c, const _Float16* a, const _Float16* b, int m, int n, int k) {
  int lane = tid_x() % 32, wave = tid_x() / 32;
  int row0 = group_y() * 16, col0 = (group_x() * 2 + wave) * 16;
  int a_row = row0 + lane % 16, b_col = col0 + lane % 16;
  float8 acc = {};
  for (int k0 = 0; k0 < k; k0 += 16) {
    half16 af, bf;
#pragma unroll
    for (int i = 0; i < 16; i++) {
      int kk = k0 + i;
      af[i] = (a_row < m && kk < k) ? a[a_row * k + kk] : (_Float16)0.0f;
      bf[i] = (kk < k && b_col < n) ? b[kk * n + b_col] : (_Float16)0.0f;
    }
    acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(af, bf, acc);
  }
#pragma unroll
  for (int v = 0; v < 8; v++) {
    int row = row0 + 2 * v + lane / 16, col = col0 + lane % 16;
    if (row < m && col < n) c[row * n + col] = acc[v];
  }
}

// An 8x8 block per thread under a 32-VGPR budget (what __launch_bounds__ with a large
// workgroup forces): the accumulators spill to scratch and come back every k step.
KERNEL void __attribute__((amdgpu_num_vgpr(32))) gemm_spilling(float* c, const float* a, const float* b,
                                                              int m, int n, int k) {
  int row0 = (group_y() * 8 + tid_y()) * 8, col0 = (group_x() * 8 + tid_x()) * 8;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  for (int kk = 0; kk < k; kk++) {
    float av[8], bv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) av[i] = row0 + i < m ? a[(row0 + i) * k + kk] : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) bv[j] = col0 + j < n ? b[kk * n + col0 + j] : 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) acc[i][j] = __builtin_fmaf(av[i], bv[j], acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (row0 + i < m && col0 + j < n) c[(row0 + i) * n + col0 + j] = acc[i][j];
}
