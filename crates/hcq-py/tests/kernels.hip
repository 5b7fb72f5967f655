// Kernels for the Python package's tests. Builtins only (hcq compiles with -nogpulib
// -nogpuinc): no ROCm headers.

#define KERNEL extern "C" __attribute__((global))
#define SHARED __attribute__((shared))

static __attribute__((device)) inline int global_id() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

static __attribute__((device)) inline void barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

KERNEL void saxpy(float* out, const float* x, const float* y, float a, int n) {
  int i = global_id();
  if (i < n) out[i] = a * x[i] + y[i];
}

KERNEL void add_i64(long long* out, const long long* x, long long k, int n) {
  int i = global_id();
  if (i < n) out[i] = x[i] + k;
}

struct Pair {
  int count;
  float scale;
};

// Writes every argument back, widened to 64 bits (floats as their bits), so the host can
// check how each Python value was passed.
KERNEL void echo(unsigned long long* out, signed char i8, unsigned char u8, short i16,
                 unsigned short u16, int i32, unsigned u32, long long i64,
                 unsigned long long u64, float f32, double f64, bool flag, _Float16 half,
                 Pair pair) {
  if (global_id() != 0) return;
  out[0] = (long long)i8;
  out[1] = u8;
  out[2] = (long long)i16;
  out[3] = u16;
  out[4] = (long long)i32;
  out[5] = u32;
  out[6] = (unsigned long long)i64;
  out[7] = u64;
  out[8] = __builtin_bit_cast(unsigned, f32);
  out[9] = __builtin_bit_cast(unsigned long long, f64);
  out[10] = flag ? 1 : 0;
  out[11] = __builtin_bit_cast(unsigned short, half);
  out[12] = (long long)pair.count;
  out[13] = __builtin_bit_cast(unsigned, pair.scale);
}

// Sums each block of x into out[block] through the dynamic LDS array (one float per lane).
KERNEL void block_sum(int* out, const int* x) {
  extern SHARED int lane_values[];
  int lane = __builtin_amdgcn_workitem_id_x();
  lane_values[lane] = x[global_id()];
  barrier();
  if (lane == 0) {
    int total = 0;
    for (int i = 0; i < (int)__builtin_amdgcn_workgroup_size_x(); i++) total += lane_values[i];
    out[__builtin_amdgcn_workgroup_id_x()] = total;
  }
}

// Loops `rounds` times per lane, for a kernel that takes a while.
KERNEL void busy(int* out, int rounds) {
  int acc = global_id();
  for (int r = 0; r < rounds; r++) acc = acc * 1103515245 + 12345;
  out[global_id()] = acc;
}

// Spins until *flag is set (never, in the tests): for timeouts.
KERNEL void spin(volatile int* flag) {
  while (flag[0] == 0) {
  }
}

// Writes through a pointer it is given (an unmapped address, in the tests): a GPU fault.
KERNEL void poke(unsigned long long address) {
  *(volatile int*)address = 1;
}
