// Test kernels for the emulated GPU. Rebuild the code object with ./build.sh (needs clang-19
// and ld.lld-19). Kernels avoid hidden arguments: block sizes are passed explicitly.
#define KERNEL extern "C" __attribute__((global))

// out[i] = in[i] * 3 + i for i < n (1-D).
KERNEL void scale_add(int* out, const int* in, int n, int block) {
    int i = (int)__builtin_amdgcn_workgroup_id_x() * block + (int)__builtin_amdgcn_workitem_id_x();
    if (i < n) out[i] = in[i] * 3 + i;
}

// out[y * width + x] = (y << 16) | x over a 2-D grid of 2-D workgroups.
KERNEL void index2d(unsigned* out, int width, int bx, int by) {
    unsigned x = __builtin_amdgcn_workgroup_id_x() * bx + __builtin_amdgcn_workitem_id_x();
    unsigned y = __builtin_amdgcn_workgroup_id_y() * by + __builtin_amdgcn_workitem_id_y();
    out[y * width + x] = (y << 16) | x;
}

// Stores through whatever pointer it is given.
KERNEL void poke(int* p, int value) {
    *p = value;
}

// Spins until *flag becomes non-zero: with a flag that stays 0 it exhausts the step budget.
KERNEL void spin(volatile int* flag) {
    while (*flag == 0) {}
}
