// hcq's HIP device header: what kernels written for hipcc use, with no ROCm installed.
//
// hcq compiles every HIP source with this header included first (as hipcc does with its own),
// so `#include <hip/hip_runtime.h>` is optional and finds this file. It covers device code
// only: qualifiers, the thread and block builtins, barriers and fences, atomics, warp
// shuffles and votes, `__half`, integer intrinsics and the float math library. There is no
// host API (a kernel's launch is hcq's business) and no device library: the math functions are
// clang builtins the AMDGPU back end expands inline, and the ones it cannot expand are written
// out below. Waves are 32 lanes wide (hcq loads wave32 kernels).
#ifndef HCQ_HIP_RUNTIME_H
#define HCQ_HIP_RUNTIME_H

#define __HIP__ 1
#define __HIP_PLATFORM_AMD__ 1
#define __HCQ_HIP__ 1

// ---- qualifiers -------------------------------------------------------------------------
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
// __launch_bounds__(MAX_THREADS[, MIN_BLOCKS_PER_MULTIPROCESSOR]): the largest workgroup.
#define __hcq_first(first, ...) first
#define __launch_bounds__(...) \
  __attribute__((amdgpu_flat_work_group_size(1, __hcq_first(__VA_ARGS__, 0))))
#define HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[];
#define HIP_KERNEL_NAME(...) __VA_ARGS__

#define __HCQ_FN static __device__ __forceinline__

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

// ---- vector types used for coordinates ---------------------------------------------------
struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
  __host__ __device__ constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  __host__ __device__ constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---- threadIdx, blockIdx, blockDim, gridDim ----------------------------------------------
// Each is an object whose x, y and z read the hardware (or the dispatch packet) when used.
#define __HCQ_COORDINATES(type, X, Y, Z)                                       \
  struct type {                                                                \
    __declspec(property(get = get_x)) unsigned int x;                          \
    __declspec(property(get = get_y)) unsigned int y;                          \
    __declspec(property(get = get_z)) unsigned int z;                          \
    static __device__ __forceinline__ unsigned int get_x() { return X; }       \
    static __device__ __forceinline__ unsigned int get_y() { return Y; }       \
    static __device__ __forceinline__ unsigned int get_z() { return Z; }       \
    __device__ __forceinline__ operator dim3() const { return dim3(X, Y, Z); } \
    __device__ __forceinline__ operator uint3() const { return uint3{X, Y, Z}; } \
  };

__HCQ_COORDINATES(__hcq_thread_idx, __builtin_amdgcn_workitem_id_x(),
                  __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z())
__HCQ_COORDINATES(__hcq_block_idx, __builtin_amdgcn_workgroup_id_x(),
                  __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z())
__HCQ_COORDINATES(__hcq_block_dim, __builtin_amdgcn_workgroup_size_x(),
                  __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z())
// The grid in workgroups: the dispatch's work-items over the workgroup size, rounded up.
__HCQ_COORDINATES(__hcq_grid_dim,
                  (__builtin_amdgcn_grid_size_x() + __builtin_amdgcn_workgroup_size_x() - 1) /
                      __builtin_amdgcn_workgroup_size_x(),
                  (__builtin_amdgcn_grid_size_y() + __builtin_amdgcn_workgroup_size_y() - 1) /
                      __builtin_amdgcn_workgroup_size_y(),
                  (__builtin_amdgcn_grid_size_z() + __builtin_amdgcn_workgroup_size_z() - 1) /
                      __builtin_amdgcn_workgroup_size_z())
#undef __HCQ_COORDINATES

extern const __device__ __attribute__((weak)) __hcq_thread_idx threadIdx;
extern const __device__ __attribute__((weak)) __hcq_block_idx blockIdx;
extern const __device__ __attribute__((weak)) __hcq_block_dim blockDim;
extern const __device__ __attribute__((weak)) __hcq_grid_dim gridDim;

#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

// Lanes per wave: hcq runs wave32 kernels.
#define warpSize 32

// ---- barriers and fences -----------------------------------------------------------------
__HCQ_FN void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__HCQ_FN int __syncthreads_count(int predicate) {
  // Counted through LDS-free means is not possible across waves: use an atomic in LDS.
  __shared__ int count;
  if (threadIdx.x + threadIdx.y + threadIdx.z == 0) count = 0;
  __syncthreads();
  if (predicate) __hip_atomic_fetch_add(&count, 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __syncthreads();
  int total = count;
  __syncthreads();
  return total;
}
__HCQ_FN int __syncthreads_and(int predicate) {
  return __syncthreads_count(predicate) ==
         (int)(blockDim.x * blockDim.y * blockDim.z);
}
__HCQ_FN int __syncthreads_or(int predicate) { return __syncthreads_count(predicate) != 0; }
__HCQ_FN void __threadfence_block() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup"); }
__HCQ_FN void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
__HCQ_FN void __threadfence_system() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }
__HCQ_FN void __syncwarp(unsigned long long mask = 0) { (void)mask; __builtin_amdgcn_wave_barrier(); }

// ---- atomics (device scope, relaxed, as HIP's) -------------------------------------------
#define __HCQ_ATOMIC(name, builtin, T)                                              \
  __HCQ_FN T name(T* address, T value) {                                          \
    return builtin(address, value, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);     \
  }                                                                               \
  __HCQ_FN T name##_system(T* address, T value) {                                 \
    return builtin(address, value, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);    \
  }                                                                               \
  __HCQ_FN T name##_block(T* address, T value) {                                  \
    return builtin(address, value, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP); \
  }
#define __HCQ_ATOMICS_INT(T)                            \
  __HCQ_ATOMIC(atomicAdd, __hip_atomic_fetch_add, T)    \
  __HCQ_ATOMIC(atomicSub, __hip_atomic_fetch_sub, T)    \
  __HCQ_ATOMIC(atomicExch, __hip_atomic_exchange, T)    \
  __HCQ_ATOMIC(atomicMin, __hip_atomic_fetch_min, T)    \
  __HCQ_ATOMIC(atomicMax, __hip_atomic_fetch_max, T)    \
  __HCQ_ATOMIC(atomicAnd, __hip_atomic_fetch_and, T)    \
  __HCQ_ATOMIC(atomicOr, __hip_atomic_fetch_or, T)      \
  __HCQ_ATOMIC(atomicXor, __hip_atomic_fetch_xor, T)
__HCQ_ATOMICS_INT(int)
__HCQ_ATOMICS_INT(unsigned int)
__HCQ_ATOMICS_INT(unsigned long long)
__HCQ_ATOMICS_INT(long long)
__HCQ_ATOMIC(atomicAdd, __hip_atomic_fetch_add, float)
__HCQ_ATOMIC(atomicAdd, __hip_atomic_fetch_add, double)
__HCQ_ATOMIC(atomicSub, __hip_atomic_fetch_sub, float)
__HCQ_ATOMIC(atomicExch, __hip_atomic_exchange, float)
__HCQ_ATOMIC(atomicExch, __hip_atomic_exchange, double)
__HCQ_ATOMIC(atomicMin, __hip_atomic_fetch_min, float)
__HCQ_ATOMIC(atomicMax, __hip_atomic_fetch_max, float)
#undef __HCQ_ATOMICS_INT
#undef __HCQ_ATOMIC

#define __HCQ_ATOMIC_CAS(T)                                                             \
  __HCQ_FN T atomicCAS(T* address, T compare, T value) {                               \
    __hip_atomic_compare_exchange_strong(address, &compare, value, __ATOMIC_RELAXED,     \
                                         __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);   \
    return compare;                                                                     \
  }                                                                                     \
  __HCQ_FN T atomicCAS_system(T* address, T compare, T value) {                        \
    __hip_atomic_compare_exchange_strong(address, &compare, value, __ATOMIC_RELAXED,     \
                                         __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);  \
    return compare;                                                                     \
  }
__HCQ_ATOMIC_CAS(int)
__HCQ_ATOMIC_CAS(unsigned int)
__HCQ_ATOMIC_CAS(unsigned long long)
__HCQ_ATOMIC_CAS(long long)
#undef __HCQ_ATOMIC_CAS

// old >= limit ? 0 : old + 1, and (old == 0 || old > limit) ? limit : old - 1.
__HCQ_FN unsigned int atomicInc(unsigned int* address, unsigned int limit) {
  unsigned int old = *address, next;
  do {
    next = old >= limit ? 0 : old + 1;
  } while (!__hip_atomic_compare_exchange_weak(address, &old, next, __ATOMIC_RELAXED,
                                               __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT));
  return old;
}
__HCQ_FN unsigned int atomicDec(unsigned int* address, unsigned int limit) {
  unsigned int old = *address, next;
  do {
    next = (old == 0 || old > limit) ? limit : old - 1;
  } while (!__hip_atomic_compare_exchange_weak(address, &old, next, __ATOMIC_RELAXED,
                                               __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT));
  return old;
}

// ---- lanes, votes and shuffles -------------------------------------------------------------
__HCQ_FN unsigned int __lane_id() { return __builtin_amdgcn_mbcnt_lo(~0u, 0u); }
// HIP returns 64-bit masks whatever the wave size; a wave32 fills the low half.
__HCQ_FN unsigned long long __ballot(int predicate) {
  return __builtin_amdgcn_ballot_w32(predicate != 0);
}
__HCQ_FN unsigned long long __activemask() { return __builtin_amdgcn_ballot_w32(true); }
__HCQ_FN int __any(int predicate) { return __ballot(predicate) != 0; }
__HCQ_FN int __all(int predicate) { return __ballot(predicate) == __activemask(); }
__HCQ_FN unsigned long long __ballot_sync(unsigned long long mask, int predicate) {
  return __ballot(predicate) & mask;
}
__HCQ_FN int __any_sync(unsigned long long mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0;
}
__HCQ_FN int __all_sync(unsigned long long mask, int predicate) {
  return __ballot_sync(mask, predicate) == (__activemask() & mask);
}

// The lane each shuffle reads, as HIP computes it within groups of `width` lanes.
__HCQ_FN int __hcq_shfl_lane(int src, int width) {
  int self = (int)__lane_id();
  return src + (self & ~(width - 1));
}
__HCQ_FN int __hcq_shfl_up_lane(unsigned int delta, int width) {
  int self = (int)__lane_id();
  int lane = self - (int)delta;
  return lane < (self & ~(width - 1)) ? self : lane;
}
__HCQ_FN int __hcq_shfl_down_lane(unsigned int delta, int width) {
  int self = (int)__lane_id();
  return (self & (width - 1)) + (int)delta >= width ? self : self + (int)delta;
}
__HCQ_FN int __hcq_shfl_xor_lane(int mask, int width) {
  int self = (int)__lane_id();
  int lane = self ^ mask;
  return lane >= ((self + width) & ~(width - 1)) ? self : lane;
}
__HCQ_FN int __hcq_bpermute(int lane, int value) {
  return __builtin_amdgcn_ds_bpermute(lane << 2, value);
}

// The _sync forms (CUDA's spelling): every lane of a hcq wave takes part, so the mask only
// documents the caller's intent.
#define __HCQ_SYNC_SHUFFLES(T)                                                                \
  __HCQ_FN T __shfl_sync(unsigned long long, T var, int src, int width = warpSize) {          \
    return __shfl(var, src, width);                                                           \
  }                                                                                           \
  __HCQ_FN T __shfl_up_sync(unsigned long long, T var, unsigned int d, int width = warpSize) { \
    return __shfl_up(var, d, width);                                                          \
  }                                                                                           \
  __HCQ_FN T __shfl_down_sync(unsigned long long, T var, unsigned int d, int width = warpSize) { \
    return __shfl_down(var, d, width);                                                        \
  }                                                                                           \
  __HCQ_FN T __shfl_xor_sync(unsigned long long, T var, int mask, int width = warpSize) {     \
    return __shfl_xor(var, mask, width);                                                      \
  }

#define __HCQ_SHUFFLES(T, TO_INT, FROM_INT)                                                 \
  __HCQ_FN T __shfl(T var, int src, int width = warpSize) {                                \
    return FROM_INT(__hcq_bpermute(__hcq_shfl_lane(src, width), TO_INT(var)));             \
  }                                                                                        \
  __HCQ_FN T __shfl_up(T var, unsigned int delta, int width = warpSize) {                  \
    return FROM_INT(__hcq_bpermute(__hcq_shfl_up_lane(delta, width), TO_INT(var)));        \
  }                                                                                        \
  __HCQ_FN T __shfl_down(T var, unsigned int delta, int width = warpSize) {                \
    return FROM_INT(__hcq_bpermute(__hcq_shfl_down_lane(delta, width), TO_INT(var)));      \
  }                                                                                        \
  __HCQ_FN T __shfl_xor(T var, int mask, int width = warpSize) {                           \
    return FROM_INT(__hcq_bpermute(__hcq_shfl_xor_lane(mask, width), TO_INT(var)));        \
  }                                                                                        \
  __HCQ_SYNC_SHUFFLES(T)
#define __HCQ_SAME(x) (x)
#define __HCQ_FLOAT_BITS(x) __builtin_bit_cast(int, x)
#define __HCQ_BITS_FLOAT(x) __builtin_bit_cast(float, x)
#define __HCQ_UINT_BITS(x) ((int)(x))
#define __HCQ_BITS_UINT(x) ((unsigned int)(x))
__HCQ_SHUFFLES(int, __HCQ_SAME, __HCQ_SAME)
__HCQ_SHUFFLES(unsigned int, __HCQ_UINT_BITS, __HCQ_BITS_UINT)
__HCQ_SHUFFLES(float, __HCQ_FLOAT_BITS, __HCQ_BITS_FLOAT)
#undef __HCQ_SHUFFLES

// 64-bit values move as two 32-bit halves.
__HCQ_FN unsigned long long __hcq_u64(int lo, int hi) {
  return (unsigned long long)(unsigned int)lo | ((unsigned long long)(unsigned int)hi << 32);
}
#define __HCQ_SHUFFLE64(name, lanefn, T, ARG)                                              \
  __HCQ_FN T name(T var, ARG, int width = warpSize) {                                     \
    unsigned long long bits = __builtin_bit_cast(unsigned long long, var);                \
    int lane = lanefn;                                                                     \
    int lo = __hcq_bpermute(lane, (int)bits), hi = __hcq_bpermute(lane, (int)(bits >> 32)); \
    return __builtin_bit_cast(T, __hcq_u64(lo, hi));                                       \
  }
#define __HCQ_SHUFFLES64(T)                                                         \
  __HCQ_SHUFFLE64(__shfl, __hcq_shfl_lane(a, width), T, int a)                      \
  __HCQ_SHUFFLE64(__shfl_up, __hcq_shfl_up_lane(a, width), T, unsigned int a)       \
  __HCQ_SHUFFLE64(__shfl_down, __hcq_shfl_down_lane(a, width), T, unsigned int a)   \
  __HCQ_SHUFFLE64(__shfl_xor, __hcq_shfl_xor_lane(a, width), T, int a)             \
  __HCQ_SYNC_SHUFFLES(T)
__HCQ_SHUFFLES64(long long)
__HCQ_SHUFFLES64(unsigned long long)
__HCQ_SHUFFLES64(double)
#undef __HCQ_SHUFFLES64
#undef __HCQ_SHUFFLE64
#undef __HCQ_SYNC_SHUFFLES

// ---- integer intrinsics --------------------------------------------------------------------
__HCQ_FN int __popc(unsigned int x) { return __builtin_popcount(x); }
__HCQ_FN int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__HCQ_FN int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
__HCQ_FN int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
__HCQ_FN int __ffs(int x) { return __builtin_ffs(x); }
__HCQ_FN int __ffsll(long long x) { return __builtin_ffsll(x); }
__HCQ_FN unsigned int __brev(unsigned int x) { return __builtin_bitreverse32(x); }
__HCQ_FN unsigned long long __brevll(unsigned long long x) { return __builtin_bitreverse64(x); }
__HCQ_FN int __mul24(int x, int y) { return ((x << 8) >> 8) * ((y << 8) >> 8); }
__HCQ_FN unsigned int __umul24(unsigned int x, unsigned int y) {
  return (x & 0xffffff) * (y & 0xffffff);
}
__HCQ_FN int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
__HCQ_FN unsigned int __umulhi(unsigned int x, unsigned int y) {
  return (unsigned int)(((unsigned long long)x * y) >> 32);
}
__HCQ_FN long long __mul64hi(long long x, long long y) { return (long long)(((__int128)x * y) >> 64); }
__HCQ_FN unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
__HCQ_FN unsigned int __sad(int x, int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
__HCQ_FN unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) {
  return (x > y ? x - y : y - x) + z;
}
__HCQ_FN int abs(int x) { return x < 0 ? -x : x; }
__HCQ_FN long labs(long x) { return x < 0 ? -x : x; }
__HCQ_FN long long llabs(long long x) { return x < 0 ? -x : x; }
__HCQ_FN int min(int a, int b) { return a < b ? a : b; }
__HCQ_FN int max(int a, int b) { return a > b ? a : b; }
__HCQ_FN unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
__HCQ_FN unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
__HCQ_FN long long min(long long a, long long b) { return a < b ? a : b; }
__HCQ_FN long long max(long long a, long long b) { return a > b ? a : b; }
__HCQ_FN unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
__HCQ_FN unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
__HCQ_FN float min(float a, float b) { return __builtin_fminf(a, b); }
__HCQ_FN float max(float a, float b) { return __builtin_fmaxf(a, b); }
__HCQ_FN double min(double a, double b) { return __builtin_fmin(a, b); }
__HCQ_FN double max(double a, double b) { return __builtin_fmax(a, b); }

// ---- float math --------------------------------------------------------------------------
// What the AMDGPU back end expands inline (the exponential, logarithm, power, sine and cosine
// families, rounding, fmod, ldexp, frexp).
__HCQ_FN float sqrtf(float x) { return __builtin_sqrtf(x); }
__HCQ_FN float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
__HCQ_FN float expf(float x) { return __builtin_expf(x); }
__HCQ_FN float exp2f(float x) { return __builtin_exp2f(x); }
__HCQ_FN float exp10f(float x) { return __builtin_exp10f(x); }
__HCQ_FN float logf(float x) { return __builtin_logf(x); }
__HCQ_FN float log2f(float x) { return __builtin_log2f(x); }
__HCQ_FN float log10f(float x) { return __builtin_log10f(x); }
// The back end's exp2(y log2 x): its relative error is about |y log2 x| ulp (hipcc's
// library keeps it within 1 ulp).
__HCQ_FN float powf(float x, float y) { return __builtin_powf(x, y); }
__HCQ_FN float fabsf(float x) { return __builtin_fabsf(x); }
__HCQ_FN float floorf(float x) { return __builtin_floorf(x); }
__HCQ_FN float ceilf(float x) { return __builtin_ceilf(x); }
__HCQ_FN float truncf(float x) { return __builtin_truncf(x); }
__HCQ_FN float roundf(float x) { return __builtin_roundf(x); }
__HCQ_FN float rintf(float x) { return __builtin_rintf(x); }
__HCQ_FN float nearbyintf(float x) { return __builtin_rintf(x); }
__HCQ_FN long lroundf(float x) { return (long)__builtin_roundf(x); }
__HCQ_FN float fminf(float a, float b) { return __builtin_fminf(a, b); }
__HCQ_FN float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
__HCQ_FN float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__HCQ_FN float fdimf(float a, float b) { return a > b ? a - b : 0.0f; }
__HCQ_FN float copysignf(float x, float y) { return __builtin_copysignf(x, y); }
__HCQ_FN float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
__HCQ_FN float frexpf(float x, int* e) { return __builtin_frexpf(x, e); }
__HCQ_FN float modff(float x, float* whole) {
  *whole = __builtin_truncf(x);
  return __builtin_isinf(x) ? __builtin_copysignf(0.0f, x) : x - *whole;
}
__HCQ_FN int isnan(float x) { return __builtin_isnan(x); }
__HCQ_FN int isinf(float x) { return __builtin_isinf(x); }
__HCQ_FN int isfinite(float x) { return __builtin_isfinite(x); }
__HCQ_FN int signbit(float x) { return __builtin_signbit(x); }

// What the back end cannot expand, written out from the functions it can. Each is within a
// few ulp of the correctly rounded result over its usual range (checked against the host by
// hcq's tests); hipcc's device library is more careful at the edges (huge arguments,
// subnormal results).
// sin and cos: x reduced by multiples of pi/2 (pi/2 split in three floats, so that
// k * pi/2 is exact enough for |x| up to 1e5), then polynomials on [-pi/4, pi/4] fitted here
// (relative error below 1e-10 in exact arithmetic). The back end's own expansion scales x by
// 1/(2 pi) in one rounding, which costs 10 ulp and more once |x| is large. Past 1e5 the
// hardware's reduction is used.
__HCQ_FN float __hcq_sin_poly(float r) {
  float z = r * r;
  float p = 2.71996865e-06f;
  p = p * z - 0.0001983950942f;
  p = p * z + 0.008333329928f;
  p = p * z - 0.1666666665f;
  return r + r * z * p;
}
__HCQ_FN float __hcq_cos_poly(float r) {
  float z = r * r;
  float p = -2.721868985e-07f;
  p = p * z + 2.479961906e-05f;
  p = p * z - 0.001388888411f;
  p = p * z + 0.04166666663f;
  return 1.0f - 0.5f * z + z * z * p;
}
// x - k pi/2 for the nearest whole k; the quadrant (k mod 4) goes to *quadrant.
__HCQ_FN float __hcq_reduce_half_pi(float x, int* quadrant) {
  float k = __builtin_rintf(x * 0.636619772368f);
  float r = __builtin_fmaf(-k, 1.57079637050628662109375f, x);
  r = __builtin_fmaf(-k, -4.371138828673793e-08f, r);
  r = __builtin_fmaf(-k, -1.7151245100058819e-15f, r);
  *quadrant = (int)k & 3;
  return r;
}
__HCQ_FN void sincosf(float x, float* s, float* c) {
  if (!(__builtin_fabsf(x) <= 1e5f)) {
    *s = __builtin_sinf(x);
    *c = __builtin_cosf(x);
    return;
  }
  int q;
  float r = __hcq_reduce_half_pi(x, &q);
  float sr = __hcq_sin_poly(r), cr = __hcq_cos_poly(r);
  *s = q == 0 ? sr : q == 1 ? cr : q == 2 ? -sr : -cr;
  *c = q == 0 ? cr : q == 1 ? -sr : q == 2 ? -cr : sr;
}
__HCQ_FN float sinf(float x) {
  float s, c;
  sincosf(x, &s, &c);
  return s;
}
__HCQ_FN float cosf(float x) {
  float s, c;
  sincosf(x, &s, &c);
  return c;
}
__HCQ_FN float tanf(float x) {
  float s, c;
  sincosf(x, &s, &c);
  return s / c;
}
__HCQ_FN float expm1f(float x) {
  // Near zero exp(x) - 1 cancels: (u - 1) x / log(u), with u = exp(x) rounded, cancels the
  // rounding of u instead (the log1p trick run backwards).
  if (__builtin_fabsf(x) > 1.0f) return __builtin_expf(x) - 1.0f;
  float u = __builtin_expf(x);
  if (u == 1.0f) return x;
  float um1 = u - 1.0f;
  return um1 * (x / __builtin_logf(u));
}
__HCQ_FN float log1pf(float x) {
  // log(u) * x / (u - 1), with u = 1 + x rounded: exact to the rounding of u.
  float u = 1.0f + x;
  if (u == 1.0f) return x;
  if (__builtin_isinf(u)) return u;
  return __builtin_logf(u) * (x / (u - 1.0f));
}
// exp(a) / 2 for a >= 0, finite as long as the result is (exp alone overflows first).
__HCQ_FN float __hcq_half_exp(float a) {
  if (a < 88.0f) return 0.5f * __builtin_expf(a);
  float e = __builtin_expf(0.5f * a);
  return (0.5f * e) * e;
}
__HCQ_FN float sinhf(float x) {
  float a = __builtin_fabsf(x), r;
  if (a < 0.5f) {
    // Its series: the first dropped term is below 1e-10 of the sum.
    float z = a * a;
    r = a + a * z * (1.0f / 6.0f + z * (1.0f / 120.0f + z * (1.0f / 5040.0f + z * (1.0f / 362880.0f))));
  } else if (a < 9.0f) {
    float e = __builtin_expf(a);
    r = 0.5f * (e - 1.0f / e);
  } else {
    r = __hcq_half_exp(a);
  }
  return __builtin_copysignf(r, x);
}
__HCQ_FN float coshf(float x) {
  float a = __builtin_fabsf(x);
  if (a >= 9.0f) return __hcq_half_exp(a);
  float e = __builtin_expf(a);
  return 0.5f * (e + 1.0f / e);
}
__HCQ_FN float tanhf(float x) {
  float a = __builtin_fabsf(x);
  float r;
  if (a > 9.0f) {
    r = 1.0f;
  } else {
    float e = expm1f(2.0f * a);
    r = e / (e + 2.0f);
  }
  return __builtin_copysignf(r, x);
}
// atan on [0, 1] as x + x s P(s), s = x^2, with P fitted here to atan's relative error
// (1.3 ulp at most in float arithmetic), extended by atan(x) = pi/2 - atan(1/x).
__HCQ_FN float __hcq_atan01(float x) {
  float s = x * x;
  float p = 0.002920649783f;
  p = p * s - 0.01636776393f;
  p = p * s + 0.04321160546f;
  p = p * s - 0.0755219386f;
  p = p * s + 0.1066599577f;
  p = p * s - 0.1421105329f;
  p = p * s + 0.1999377262f;
  p = p * s - 0.3333315273f;
  return x + x * s * p;
}
__HCQ_FN float atanf(float x) {
  float a = __builtin_fabsf(x);
  float r = a <= 1.0f ? __hcq_atan01(a) : 1.57079632679f - __hcq_atan01(1.0f / a);
  return __builtin_copysignf(r, x);
}
__HCQ_FN float atan2f(float y, float x) {
  const float pi = 3.14159265359f;
  if (__builtin_isnan(x) || __builtin_isnan(y)) return x + y;
  float ax = __builtin_fabsf(x), ay = __builtin_fabsf(y);
  float r;
  if (ax == 0.0f && ay == 0.0f) {
    r = __builtin_signbit(x) ? pi : 0.0f;
  } else if (__builtin_isinf(ax) && __builtin_isinf(ay)) {
    r = __builtin_signbit(x) ? 0.75f * pi : 0.25f * pi;
  } else {
    r = ay <= ax ? __hcq_atan01(ay / ax) : 0.5f * pi - __hcq_atan01(ax / ay);
    if (__builtin_signbit(x)) r = pi - r;
  }
  return __builtin_copysignf(r, y);
}
__HCQ_FN float asinf(float x) {
  float a = __builtin_fabsf(x);
  if (a > 1.0f) return __builtin_nanf("");
  // asin(a) = atan(a / sqrt(1 - a^2)), with 1 - a^2 as (1 - a)(1 + a) for accuracy near 1.
  float r = atan2f(a, __builtin_sqrtf((1.0f - a) * (1.0f + a)));
  return __builtin_copysignf(r, x);
}
__HCQ_FN float acosf(float x) {
  if (__builtin_fabsf(x) > 1.0f) return __builtin_nanf("");
  return atan2f(__builtin_sqrtf((1.0f - x) * (1.0f + x)), x);
}
__HCQ_FN float asinhf(float x) {
  float a = __builtin_fabsf(x);
  float r = a > 1e4f ? __builtin_logf(a) + 0.693147180560f
                     : log1pf(a + a * a / (1.0f + __builtin_sqrtf(1.0f + a * a)));
  return __builtin_copysignf(r, x);
}
__HCQ_FN float acoshf(float x) {
  if (x < 1.0f) return __builtin_nanf("");
  if (x > 1e4f) return __builtin_logf(x) + 0.693147180560f;
  float t = x - 1.0f;
  return log1pf(t + __builtin_sqrtf(2.0f * t + t * t));
}
__HCQ_FN float atanhf(float x) {
  float a = __builtin_fabsf(x);
  if (a > 1.0f) return __builtin_nanf("");
  return __builtin_copysignf(0.5f * log1pf(2.0f * a / (1.0f - a)), x);
}
__HCQ_FN float cbrtf(float x) {
  if (x == 0.0f || __builtin_isinf(x) || __builtin_isnan(x)) return x;
  float a = __builtin_fabsf(x);
  float r = __builtin_exp2f(__builtin_log2f(a) * (1.0f / 3.0f));
  r = r - (r * r * r - a) / (3.0f * r * r);  // one Newton step
  return __builtin_copysignf(r, x);
}
__HCQ_FN float hypotf(float x, float y) {
  float a = __builtin_fabsf(x), b = __builtin_fabsf(y);
  if (__builtin_isinf(a) || __builtin_isinf(b)) return __builtin_inff();
  float hi = __builtin_fmaxf(a, b), lo = __builtin_fminf(a, b);
  if (hi == 0.0f) return 0.0f;
  float q = lo / hi;
  return hi * __builtin_sqrtf(1.0f + q * q);
}
// erf: below 0.5 as x P(x^2); above, 1 - erfc with erfc(x) = t exp(-x^2 + Q(t)),
// t = 1 / (1 + x / 2). P and Q are least-squares fits made for this header (errors below
// 1e-9 in exact arithmetic, so float rounding dominates).
__HCQ_FN float erff(float x) {
  float a = __builtin_fabsf(x);
  float r;
  if (a < 0.5f) {
    float s = a * a;
    float p = -0.0007730117519f;
    p = p * s + 0.005202466186f;
    p = p * s - 0.02686355315f;
    p = p * s + 0.1128377731f;
    p = p * s - 0.3761263862f;
    p = p * s + 1.128379167f;
    r = a * p;
  } else if (a >= 10.0f) {
    r = 1.0f;
  } else {
    float t = 1.0f / (1.0f + 0.5f * a);
    float q = 0.2579018028f;
    q = q * t - 1.211861637f;
    q = q * t + 2.234537714f;
    q = q * t - 1.932325717f;
    q = q * t + 0.7997348167f;
    q = q * t - 0.4008021927f;
    q = q * t + 0.1521340482f;
    q = q * t + 0.3655017888f;
    q = q * t + 1.000751055f;
    q = q * t - 1.265538008f;
    r = 1.0f - t * __builtin_expf(-a * a + q);
  }
  return __builtin_copysignf(r, x);
}
__HCQ_FN float erfcf(float x) { return 1.0f - erff(x); }
// |x| mod |y| exactly, by binary long division (each subtraction is exact: the remainder
// is between the scaled divisor and twice it); *odd gets the quotient's lowest bit. The back
// end's x - trunc(x / y) y is off whenever x / y rounds to a whole number.
__HCQ_FN float __hcq_fmod_abs(float ax, float ay, int* odd) {
  *odd = 0;
  if (ax < ay) return ax;
  int ex, ey;
  __builtin_frexpf(ax, &ex);
  __builtin_frexpf(ay, &ey);
  float r = ax;
  for (int e = ex - ey; e >= 0; e--) {
    float t = __builtin_ldexpf(ay, e);
    int take = r >= t;
    if (take) r -= t;
    if (e == 0) *odd = take;
  }
  return r;
}
__HCQ_FN float fmodf(float x, float y) {
  if (y == 0.0f || __builtin_isinf(x) || __builtin_isnan(x) || __builtin_isnan(y)) {
    return __builtin_nanf("");
  }
  int odd;
  return __builtin_copysignf(__hcq_fmod_abs(__builtin_fabsf(x), __builtin_fabsf(y), &odd), x);
}
__HCQ_FN float remainderf(float x, float y) {
  if (y == 0.0f || __builtin_isinf(x) || __builtin_isnan(x) || __builtin_isnan(y)) {
    return __builtin_nanf("");
  }
  float ay = __builtin_fabsf(y);
  int odd;
  float r = __hcq_fmod_abs(__builtin_fabsf(x), ay, &odd);
  // To the nearest multiple, ties to the even quotient.
  if (r > ay - r || (r == ay - r && odd)) r -= ay;
  return __builtin_copysignf(1.0f, x) * r;
}

// The fast forms: the hardware's own instructions, as hipcc's with -ffast-math.
__HCQ_FN float __expf(float x) { return __builtin_amdgcn_exp2f(x * 1.44269504089f); }
__HCQ_FN float __exp10f(float x) { return __builtin_amdgcn_exp2f(x * 3.32192809489f); }
__HCQ_FN float __logf(float x) { return __builtin_amdgcn_logf(x) * 0.693147180560f; }
__HCQ_FN float __log2f(float x) { return __builtin_amdgcn_logf(x); }
__HCQ_FN float __log10f(float x) { return __builtin_amdgcn_logf(x) * 0.301029995664f; }
__HCQ_FN float __powf(float x, float y) { return __builtin_amdgcn_exp2f(y * __builtin_amdgcn_logf(x)); }
__HCQ_FN float __sinf(float x) { return __builtin_amdgcn_sinf(x * 0.159154943092f); }
__HCQ_FN float __cosf(float x) { return __builtin_amdgcn_cosf(x * 0.159154943092f); }
__HCQ_FN float __tanf(float x) { return __sinf(x) / __cosf(x); }
__HCQ_FN void __sincosf(float x, float* s, float* c) {
  *s = __sinf(x);
  *c = __cosf(x);
}
__HCQ_FN float __fdividef(float x, float y) { return x * __builtin_amdgcn_rcpf(y); }
__HCQ_FN float __frcp_rn(float x) { return 1.0f / x; }
__HCQ_FN float __fsqrt_rn(float x) { return __builtin_sqrtf(x); }
__HCQ_FN float __frsqrt_rn(float x) { return 1.0f / __builtin_sqrtf(x); }
__HCQ_FN float __saturatef(float x) { return __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f); }
__HCQ_FN float __fadd_rn(float x, float y) { return x + y; }
__HCQ_FN float __fsub_rn(float x, float y) { return x - y; }
__HCQ_FN float __fmul_rn(float x, float y) { return x * y; }
__HCQ_FN float __fdiv_rn(float x, float y) { return x / y; }
__HCQ_FN float __fmaf_rn(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
__HCQ_FN int __float2int_rn(float x) { return (int)__builtin_rintf(x); }
__HCQ_FN int __float2int_rz(float x) { return (int)x; }
__HCQ_FN int __float2int_rd(float x) { return (int)__builtin_floorf(x); }
__HCQ_FN int __float2int_ru(float x) { return (int)__builtin_ceilf(x); }
__HCQ_FN float __int2float_rn(int x) { return (float)x; }
__HCQ_FN int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
__HCQ_FN unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
__HCQ_FN float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__HCQ_FN float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
__HCQ_FN long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
__HCQ_FN double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }

// C++ overloads of the float functions, as hipcc's headers give them.
#define __HCQ_OVERLOAD1(name, f) \
  __HCQ_FN float name(float x) { return f(x); }
#define __HCQ_OVERLOAD2(name, f) \
  __HCQ_FN float name(float x, float y) { return f(x, y); }
__HCQ_OVERLOAD1(sqrt, sqrtf)
__HCQ_OVERLOAD1(rsqrt, rsqrtf)
__HCQ_OVERLOAD1(exp, expf)
__HCQ_OVERLOAD1(exp2, exp2f)
__HCQ_OVERLOAD1(expm1, expm1f)
__HCQ_OVERLOAD1(log, logf)
__HCQ_OVERLOAD1(log2, log2f)
__HCQ_OVERLOAD1(log10, log10f)
__HCQ_OVERLOAD1(log1p, log1pf)
__HCQ_OVERLOAD2(pow, powf)
__HCQ_OVERLOAD1(sin, sinf)
__HCQ_OVERLOAD1(cos, cosf)
__HCQ_OVERLOAD1(tan, tanf)
__HCQ_OVERLOAD1(asin, asinf)
__HCQ_OVERLOAD1(acos, acosf)
__HCQ_OVERLOAD1(atan, atanf)
__HCQ_OVERLOAD2(atan2, atan2f)
__HCQ_OVERLOAD1(sinh, sinhf)
__HCQ_OVERLOAD1(cosh, coshf)
__HCQ_OVERLOAD1(tanh, tanhf)
__HCQ_OVERLOAD1(cbrt, cbrtf)
__HCQ_OVERLOAD1(erf, erff)
__HCQ_OVERLOAD1(fabs, fabsf)
__HCQ_OVERLOAD1(floor, floorf)
__HCQ_OVERLOAD1(ceil, ceilf)
__HCQ_OVERLOAD1(trunc, truncf)
__HCQ_OVERLOAD1(round, roundf)
__HCQ_OVERLOAD1(rint, rintf)
__HCQ_OVERLOAD2(fmin, fminf)
__HCQ_OVERLOAD2(fmax, fmaxf)
__HCQ_OVERLOAD2(fmod, fmodf)
__HCQ_OVERLOAD2(hypot, hypotf)
__HCQ_OVERLOAD2(copysign, copysignf)
__HCQ_FN float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__HCQ_FN float abs(float x) { return __builtin_fabsf(x); }
#undef __HCQ_OVERLOAD1
#undef __HCQ_OVERLOAD2

// Double precision: what the back end expands inline. (Its exponentials, logarithms and
// trigonometric functions need a device library hcq does not have.)
__HCQ_FN double sqrt(double x) { return __builtin_sqrt(x); }
__HCQ_FN double fabs(double x) { return __builtin_fabs(x); }
__HCQ_FN double abs(double x) { return __builtin_fabs(x); }
__HCQ_FN double floor(double x) { return __builtin_floor(x); }
__HCQ_FN double ceil(double x) { return __builtin_ceil(x); }
__HCQ_FN double trunc(double x) { return __builtin_trunc(x); }
__HCQ_FN double round(double x) { return __builtin_round(x); }
__HCQ_FN double rint(double x) { return __builtin_rint(x); }
__HCQ_FN double fmin(double a, double b) { return __builtin_fmin(a, b); }
__HCQ_FN double fmax(double a, double b) { return __builtin_fmax(a, b); }
__HCQ_FN double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__HCQ_FN double copysign(double x, double y) { return __builtin_copysign(x, y); }
__HCQ_FN double ldexp(double x, int e) { return __builtin_ldexp(x, e); }

// ---- half precision ------------------------------------------------------------------------
typedef _Float16 __half;
typedef _Float16 half;
typedef _Float16 __half2 __attribute__((ext_vector_type(2)));
typedef __half2 half2;
__HCQ_FN float __half2float(__half h) { return (float)h; }
__HCQ_FN __half __float2half(float f) { return (__half)f; }
__HCQ_FN __half __float2half_rn(float f) { return (__half)f; }
__HCQ_FN __half2 __floats2half2_rn(float a, float b) { return __half2{(__half)a, (__half)b}; }
__HCQ_FN __half2 __float2half2_rn(float a) { return __half2{(__half)a, (__half)a}; }
__HCQ_FN __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
__HCQ_FN float __low2float(__half2 h) { return (float)h.x; }
__HCQ_FN float __high2float(__half2 h) { return (float)h.y; }
__HCQ_FN __half __low2half(__half2 h) { return h.x; }
__HCQ_FN __half __high2half(__half2 h) { return h.y; }
__HCQ_FN __half __hadd(__half a, __half b) { return a + b; }
__HCQ_FN __half __hsub(__half a, __half b) { return a - b; }
__HCQ_FN __half __hmul(__half a, __half b) { return a * b; }
__HCQ_FN __half __hdiv(__half a, __half b) { return a / b; }
__HCQ_FN __half __hneg(__half a) { return -a; }
__HCQ_FN __half __hfma(__half a, __half b, __half c) { return __builtin_fmaf16(a, b, c); }
__HCQ_FN __half2 __hadd2(__half2 a, __half2 b) { return a + b; }
__HCQ_FN __half2 __hsub2(__half2 a, __half2 b) { return a - b; }
__HCQ_FN __half2 __hmul2(__half2 a, __half2 b) { return a * b; }
__HCQ_FN __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return a * b + c; }
__HCQ_FN bool __heq(__half a, __half b) { return a == b; }
__HCQ_FN bool __hne(__half a, __half b) { return a != b; }
__HCQ_FN bool __hlt(__half a, __half b) { return a < b; }
__HCQ_FN bool __hle(__half a, __half b) { return a <= b; }
__HCQ_FN bool __hgt(__half a, __half b) { return a > b; }
__HCQ_FN bool __hge(__half a, __half b) { return a >= b; }
__HCQ_FN __half __hmax(__half a, __half b) { return a > b ? a : b; }
__HCQ_FN __half __hmin(__half a, __half b) { return a < b ? a : b; }
__HCQ_FN __half hsqrt(__half a) { return (__half)__builtin_sqrtf((float)a); }
__HCQ_FN __half hexp(__half a) { return (__half)__builtin_expf((float)a); }
__HCQ_FN __half hlog(__half a) { return (__half)__builtin_logf((float)a); }
__HCQ_FN __half habs(__half a) { return __builtin_fabsf16(a); }
__HCQ_FN unsigned short __half_as_ushort(__half h) { return __builtin_bit_cast(unsigned short, h); }
__HCQ_FN __half __ushort_as_half(unsigned short u) { return __builtin_bit_cast(__half, u); }
__HCQ_FN __half __shfl(__half var, int src, int width = warpSize) {
  return __ushort_as_half((unsigned short)__shfl((int)__half_as_ushort(var), src, width));
}
__HCQ_FN __half __shfl_xor(__half var, int mask, int width = warpSize) {
  return __ushort_as_half((unsigned short)__shfl_xor((int)__half_as_ushort(var), mask, width));
}
__HCQ_FN __half __shfl_down(__half var, unsigned int d, int width = warpSize) {
  return __ushort_as_half((unsigned short)__shfl_down((int)__half_as_ushort(var), d, width));
}
__HCQ_FN __half __shfl_up(__half var, unsigned int d, int width = warpSize) {
  return __ushort_as_half((unsigned short)__shfl_up((int)__half_as_ushort(var), d, width));
}

#undef __HCQ_FN
#endif  // HCQ_HIP_RUNTIME_H
