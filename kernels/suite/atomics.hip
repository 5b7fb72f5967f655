// Kernel suite: global and LDS atomics, integer and float, with and without a returned value.
// Every check on the host is independent of the order the lanes ran in.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline
#define SHARED __attribute__((shared))
#define AGENT __HIP_MEMORY_SCOPE_AGENT
#define WG __HIP_MEMORY_SCOPE_WORKGROUP
#define RLX __ATOMIC_RELAXED

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// 32-bit global atomics on counters c[0..11]. old[i] gets the value fetch_add returned
// (the set of returned values is 0..n-1). The others are used without their result.
KERNEL void atomic_global_i32(int* c, int* old, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  old[i] = __hip_atomic_fetch_add(&c[0], 1, RLX, AGENT);
  __hip_atomic_fetch_add(&c[1], x, RLX, AGENT);
  __hip_atomic_fetch_sub(&c[2], x, RLX, AGENT);
  __hip_atomic_fetch_max(&c[3], x, RLX, AGENT);
  __hip_atomic_fetch_min(&c[4], x, RLX, AGENT);
  __hip_atomic_fetch_max((unsigned*)&c[5], (unsigned)x, RLX, AGENT);
  __hip_atomic_fetch_min((unsigned*)&c[6], (unsigned)x, RLX, AGENT);
  __hip_atomic_fetch_or(&c[7], 1 << (i & 31), RLX, AGENT);
  __hip_atomic_fetch_and(&c[8], ~(1 << (x & 31)), RLX, AGENT);
  __hip_atomic_fetch_xor(&c[9], x, RLX, AGENT);
  // Compare-and-swap loop: add x * 3 (global_atomic_cmpswap_b32 with return).
  int cur = __hip_atomic_load(&c[10], RLX, AGENT);
  while (!__hip_atomic_compare_exchange_weak(&c[10], &cur, cur + x * 3, RLX, RLX, AGENT)) {
  }
  // Exchange: every lane swaps in its index; the final value plus all returned values
  // are the initial value plus all indices.
  old[n + i] = __hip_atomic_exchange(&c[11], i, RLX, AGENT);
}

// 64-bit global atomics: add (with and without return), signed/unsigned min/max, and a
// 64-bit compare-and-swap loop.
KERNEL void atomic_global_i64(long* c, long* old, const long* a, int n) {
  int i = gid();
  if (i >= n) return;
  long x = a[i];
  __hip_atomic_fetch_add(&c[0], x, RLX, AGENT);
  __hip_atomic_fetch_max(&c[1], x, RLX, AGENT);
  __hip_atomic_fetch_min(&c[2], x, RLX, AGENT);
  __hip_atomic_fetch_max((unsigned long*)&c[3], (unsigned long)x, RLX, AGENT);
  __hip_atomic_fetch_min((unsigned long*)&c[4], (unsigned long)x, RLX, AGENT);
  long cur = __hip_atomic_load(&c[5], RLX, AGENT);
  while (!__hip_atomic_compare_exchange_weak(&c[5], &cur, cur ^ (x * 7), RLX, RLX, AGENT)) {
  }
  old[i] = __hip_atomic_fetch_add(&c[6], 1L << 33, RLX, AGENT);
}

typedef __attribute__((address_space(1))) float global_float;

// Float atomics: the native global_atomic_add_f32 without and with return (through the
// builtin), and the compiler's compare-and-swap loops for f32 add/min/max and f64 add.
// Values are multiples of 1/4 whose sums are exact in any order.
KERNEL void atomic_global_float(float* cf, double* cd, float* old, const float* a, int n) {
  int i = gid();
  if (i >= n) return;
  float x = a[i];
  __builtin_amdgcn_global_atomic_fadd_f32((global_float*)&cf[0], x);
  old[i] = __builtin_amdgcn_global_atomic_fadd_f32((global_float*)&cf[1], 1.0f);
  __hip_atomic_fetch_add(&cf[2], x, RLX, AGENT);
  __hip_atomic_fetch_max(&cf[3], x, RLX, AGENT);
  __hip_atomic_fetch_min(&cf[4], x, RLX, AGENT);
  __hip_atomic_fetch_add(&cd[0], (double)x * 0.5, RLX, AGENT);
}

// LDS atomics per workgroup, then copied out: ds_add_rtn_u32 (returned values), ds_add_u32,
// ds_min/max (signed, unsigned), ds_and/or/xor, ds_add_f32, ds_cmpstore_rtn_b32 loop,
// ds_storexchg_rtn_b32.
KERNEL void atomic_lds(int* out, int* old, const int* a, int n) {
  SHARED int s[12];
  SHARED float sf[1];
  int t = __builtin_amdgcn_workitem_id_x();
  int g = __builtin_amdgcn_workgroup_id_x();
  int i = g * __builtin_amdgcn_workgroup_size_x() + t;
  if (t < 12) s[t] = t == 4 ? 0x7fffffff : (t == 6 ? -1 : (t == 8 ? -1 : 0));
  if (t == 0) sf[0] = 0.0f;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  if (i < n) {
    int x = a[i];
    old[i] = __hip_atomic_fetch_add(&s[0], 1, RLX, WG);
    __hip_atomic_fetch_add(&s[1], x, RLX, WG);
    __hip_atomic_fetch_sub(&s[2], x, RLX, WG);
    __hip_atomic_fetch_max(&s[3], x, RLX, WG);
    __hip_atomic_fetch_min(&s[4], x, RLX, WG);
    __hip_atomic_fetch_max((unsigned*)&s[5], (unsigned)x, RLX, WG);
    __hip_atomic_fetch_min((unsigned*)&s[6], (unsigned)x, RLX, WG);
    __hip_atomic_fetch_or(&s[7], 1 << (x & 31), RLX, WG);
    __hip_atomic_fetch_and(&s[8], ~(1 << ((x >> 5) & 31)), RLX, WG);
    __hip_atomic_fetch_xor(&s[9], x, RLX, WG);
    int cur = __hip_atomic_load(&s[10], RLX, WG);
    while (!__hip_atomic_compare_exchange_weak(&s[10], &cur, cur + (x & 0xff), RLX, RLX, WG)) {
    }
    old[n + i] = __hip_atomic_exchange(&s[11], i, RLX, WG);
    __hip_atomic_fetch_add(&sf[0], (float)(x & 0xff) * 0.25f, RLX, WG);
  }
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  if (t < 12) out[g * 13 + t] = s[t];
  if (t == 12) out[g * 13 + 12] = __builtin_bit_cast(int, sf[0]);
}

// Stream compaction: lanes whose value passes a test claim an output slot with a global
// atomic counter; the output is checked as a multiset.
KERNEL void atomic_compact(unsigned* out, unsigned* count, const unsigned* a, int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i];
  if (x % 3u == 0u) {
    unsigned slot = __hip_atomic_fetch_add(count, 1u, RLX, AGENT);
    out[slot] = x;
  }
}
