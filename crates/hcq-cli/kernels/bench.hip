// The kernels `hcq bench emu` times on the emulated GPU. Each one fixes its floating-point
// order (explicit fma, a fixed summation order) so the host can reproduce it bit for bit.
// Compiled with clang's HIP front end and builtins only (-nogpulib -nogpuinc): no ROCm.

#define KERNEL extern "C" __attribute__((global))
#define SHARED __attribute__((shared))

static __attribute__((device)) inline void barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// y[i] = fma(alpha, x[i], y[i]); blocks of 256.
KERNEL void bench_saxpy(float* y, const float* x, float alpha, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = __builtin_fmaf(alpha, x[i], y[i]);
}

// c = a * b for n×n row-major matrices; one work-item per element, 16×16 blocks;
// acc = fma(a[row][k], b[k][col], acc) for k = 0, 1, ...
KERNEL void bench_matmul(float* c, const float* a, const float* b, int n) {
  int col = __builtin_amdgcn_workgroup_id_x() * 16 + __builtin_amdgcn_workitem_id_x();
  int row = __builtin_amdgcn_workgroup_id_y() * 16 + __builtin_amdgcn_workitem_id_y();
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc = __builtin_fmaf(a[row * n + k], b[k * n + col], acc);
  c[row * n + col] = acc;
}

// out[block] = sum of in[block*256 .. block*256+256) (missing elements are 0), summed as a
// tree in LDS: s[t] += s[t + stride] for stride = 128, 64, ..., 1.
KERNEL void bench_reduce(float* out, const float* in, int n) {
  SHARED float s[256];
  int t = __builtin_amdgcn_workitem_id_x();
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + t;
  s[t] = i < n ? in[i] : 0.0f;
  barrier();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    barrier();
  }
  if (t == 0) out[__builtin_amdgcn_workgroup_id_x()] = s[0];
}
