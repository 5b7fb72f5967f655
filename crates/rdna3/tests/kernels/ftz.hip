// Kernels built with -fgpu-flush-denormals-to-zero (see build.sh): their kernel descriptors
// ask for f32 denormals to be flushed (FLOAT_DENORM_MODE_32 = 0), and clang brackets the
// Newton-Raphson steps of its f32 division with s_denorm_mode 15 / s_denorm_mode 12.
#define KERNEL extern "C" __attribute__((global))

static __attribute__((device)) inline int global_index(int block) {
    return (int)__builtin_amdgcn_workgroup_id_x() * block + (int)__builtin_amdgcn_workitem_id_x();
}

// out[4i..4i+3] = a + b, a * b, a / b, v_rcp_f32(b).
KERNEL void ftz_f32(float* out, const float* a, const float* b, int n, int block) {
    int i = global_index(block);
    if (i < n) {
        out[4 * i] = a[i] + b[i];
        out[4 * i + 1] = a[i] * b[i];
        out[4 * i + 2] = a[i] / b[i];
        out[4 * i + 3] = __builtin_amdgcn_rcpf(b[i]);
    }
}
