// Test kernels for the rdna3 interpreter. Rebuild the code object with ./build.sh.
// Kernels avoid hidden arguments: the block size is passed explicitly.
#define KERNEL extern "C" __attribute__((global))

static __attribute__((device, always_inline)) inline void sync_workgroup() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

static __attribute__((device)) inline int global_index(int block) {
    return (int)__builtin_amdgcn_workgroup_id_x() * block + (int)__builtin_amdgcn_workitem_id_x();
}

KERNEL void empty_kernel() {}

KERNEL void add_f32(float* c, const float* a, const float* b, int n, int block) {
    int i = global_index(block);
    if (i < n) c[i] = a[i] + b[i];
}

KERNEL void mul_f32(float* c, const float* a, const float* b, int n, int block) {
    int i = global_index(block);
    if (i < n) c[i] = a[i] * b[i];
}

KERNEL void fma_f32(float* d, const float* a, const float* b, const float* c, int n, int block) {
    int i = global_index(block);
    if (i < n) d[i] = __builtin_fmaf(a[i], b[i], c[i]);
}

KERNEL void add_i32(int* c, const int* a, const int* b, int n, int block) {
    int i = global_index(block);
    if (i < n) c[i] = a[i] + b[i];
}

KERNEL void mul_i32(int* c, const int* a, const int* b, int n, int block) {
    int i = global_index(block);
    if (i < n) c[i] = a[i] * b[i];
}

KERNEL void xor_i32(int* c, const int* a, const int* b, int n, int block) {
    int i = global_index(block);
    if (i < n) c[i] = a[i] ^ b[i];
}

KERNEL void shift_i32(int* c, const int* a, const unsigned* b, int n, int block) {
    int i = global_index(block);
    if (i < n) c[i] = (a[i] << (b[i] & 31)) ^ (a[i] >> (b[i] & 7)) ^ (int)((unsigned)a[i] >> 3);
}

KERNEL void saxpy(float* y, const float* x, float alpha, int n, int block) {
    int i = global_index(block);
    if (i < n) y[i] = alpha * x[i] + y[i];
}

// Stores to the address it is given (the fault test passes an unmapped one).
KERNEL void store_to(int* p, int value) {
    p[__builtin_amdgcn_workitem_id_x()] = value;
}

// Never terminates for flag != 0 (volatile read each iteration); used for the step budget test.
KERNEL void spin(volatile int* flag) {
    while (*flag) {
    }
}

// Workgroup sum through LDS with barriers; one atomic add per workgroup into *total.
KERNEL void reduce_sum(unsigned* total, const unsigned* in, int n, int block) {
    __attribute__((shared)) unsigned partial[256];
    int tid = __builtin_amdgcn_workitem_id_x();
    int i = global_index(block);
    partial[tid] = i < n ? in[i] : 0;
    sync_workgroup();
    for (int stride = block / 2; stride > 0; stride >>= 1) {
        if (tid < stride) partial[tid] += partial[tid + stride];
        sync_workgroup();
    }
    if (tid == 0) __hip_atomic_fetch_add(total, partial[0], __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

// Per-element histogram with global atomics (returns unused).
KERNEL void histogram(unsigned* bins, const unsigned* in, int n, int block) {
    int i = global_index(block);
    if (i < n) __hip_atomic_fetch_add(&bins[in[i] % 16], 1u, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

// IEEE division and square root (expands to div_scale/div_fmas/div_fixup and friends).
KERNEL void div_sqrt_f32(float* out, const float* a, const float* b, int n, int block) {
    int i = global_index(block);
    if (i < n) out[i] = a[i] / b[i] + __builtin_sqrtf(__builtin_fabsf(a[i]));
}

// Integer division and remainder (expands to a reciprocal-based sequence).
KERNEL void divmod_i32(int* q, int* r, const int* a, const int* b, int n, int block) {
    int i = global_index(block);
    if (i < n) { q[i] = a[i] / b[i]; r[i] = a[i] % b[i]; }
}

// Double precision and conversions.
KERNEL void f64_math(double* out, const float* a, const int* b, int n, int block) {
    int i = global_index(block);
    if (i < n) {
        double x = (double)a[i] * 1.5 + (double)b[i];
        out[i] = __builtin_fma(x, x, -2.0) + (double)(unsigned)b[i];
    }
}

KERNEL void convert(int* to_int, unsigned* to_uint, float* to_float, const float* a, const int* b, int n, int block) {
    int i = global_index(block);
    if (i < n) {
        to_int[i] = (int)a[i];
        to_uint[i] = (unsigned)__builtin_fabsf(a[i]);
        to_float[i] = (float)b[i] + (float)(unsigned)b[i];
    }
}

// A loop with a data-dependent trip count, selects and min/max.
KERNEL void loop_minmax(int* out, const int* a, int n, int block) {
    int i = global_index(block);
    if (i >= n) return;
    int acc = 0;
    int count = a[i] & 15;
    for (int k = 0; k < count; ++k) {
        int v = a[(i + k) % n];
        acc = (k & 1) ? __builtin_elementwise_max(acc, v) : __builtin_elementwise_min(acc ^ v, v);
    }
    out[i] = acc > 0 ? acc : -acc;
}

// 2D indexing with workitem_id_y.
KERNEL void transpose(float* out, const float* in, int width, int height) {
    int x = __builtin_amdgcn_workgroup_id_x() * 16 + __builtin_amdgcn_workitem_id_x();
    int y = __builtin_amdgcn_workgroup_id_y() * 16 + __builtin_amdgcn_workitem_id_y();
    if (x < width && y < height) out[x * height + y] = in[y * width + x];
}

// 64-bit integer arithmetic and unsigned long shifts.
KERNEL void mix_u64(unsigned long long* out, const unsigned long long* a, int n, int block) {
    int i = global_index(block);
    if (i < n) {
        unsigned long long x = a[i];
        out[i] = (x * 0x9E3779B97F4A7C15ull) ^ (x >> 17) ^ (x << 5) ^ (x + 12345);
    }
}

// A real call: the callee spills to the private segment (scratch) and returns via s_setpc.
static __attribute__((device, noinline)) int mix_call(int x, int y) {
    volatile int local[4] = {x, y, x ^ y, x + y};
    return local[(x & 3)] * 3 + local[(y & 3)];
}

KERNEL void call_scratch(int* out, const int* a, int n, int block) {
    int i = global_index(block);
    if (i < n) out[i] = mix_call(a[i], i);
}
