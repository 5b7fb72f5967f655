// The kernels `hcq demo` runs: elementwise f32 and i32 work with a bounds check.
// Compiled with clang's HIP front end and builtins only (-nogpulib -nogpuinc): no ROCm.

#define KERNEL extern "C" __attribute__((global))

static __attribute__((device)) inline int global_id() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

KERNEL void add_f32(float* c, const float* a, const float* b, int n) {
  int i = global_id();
  if (i < n) c[i] = a[i] + b[i];
}

KERNEL void mul_f32(float* c, const float* a, const float* b, int n) {
  int i = global_id();
  if (i < n) c[i] = a[i] * b[i];
}

KERNEL void saxpy_f32(float* y, const float* x, float alpha, int n) {
  int i = global_id();
  if (i < n) y[i] = alpha * x[i] + y[i];
}

KERNEL void add_i32(int* c, const int* a, const int* b, int n) {
  int i = global_id();
  if (i < n) c[i] = a[i] + b[i];
}

KERNEL void mul_i32(int* c, const int* a, const int* b, int n) {
  int i = global_id();
  if (i < n) c[i] = a[i] * b[i];
}

KERNEL void mix_i32(int* c, const int* a, const int* b, int n) {
  int i = global_id();
  if (i < n) c[i] = (a[i] ^ (b[i] << 3)) - (a[i] >> 2);
}

KERNEL void empty() {}
