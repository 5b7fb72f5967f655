// Kernel suite: cross-lane operations in a wave32: readfirstlane/readlane, ballot and mbcnt,
// ds_swizzle, ds_bpermute/ds_permute, permlane16/permlanex16, DPP (mov_dpp, update_dpp,
// dpp8), and butterfly reductions built from them. Launched with whole waves (n a multiple
// of 32) in workgroups of 64 (two waves each).

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}
DEV unsigned lane_id() { return __builtin_amdgcn_mbcnt_lo(~0u, 0u); }

// v_readfirstlane_b32, v_readlane_b32 (constant and uniform-variable lane), ballot (v_cmp to
// an SGPR mask), mbcnt, and the same under divergence (only active lanes take part).
KERNEL void wave_lanes(int* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  unsigned lane = lane_id();
  int* o = out + 8 * i;
  o[0] = (int)lane;
  o[1] = __builtin_amdgcn_readfirstlane(x);
  o[2] = __builtin_amdgcn_readlane(x, 5);
  int sel = __builtin_amdgcn_readfirstlane(a[i - lane] & 31);
  o[3] = __builtin_amdgcn_readlane(x, sel);
  unsigned b = __builtin_amdgcn_ballot_w32(x & 1);
  o[4] = (int)b;
  o[5] = (int)__builtin_amdgcn_mbcnt_lo(b, 0u);
  int r = -1;
  if (x & 2) r = __builtin_amdgcn_readfirstlane(x);
  o[6] = r;
  int q = 0;
  if (x & 4) q = (int)__builtin_amdgcn_ballot_w32((x & 8) != 0);
  o[7] = q;
}

// ds_swizzle_b32 (quad-permute and bit-mask modes), ds_bpermute_b32 (pull from a data-chosen
// lane), ds_permute_b32 (push to a lane), v_permlane16_b32 and v_permlanex16_b32.
KERNEL void wave_shuffle(int* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  unsigned lane = lane_id();
  int* o = out + 8 * i;
  o[0] = __builtin_amdgcn_ds_swizzle(x, 0x8000 | 0x1B);
  o[1] = __builtin_amdgcn_ds_swizzle(x, 0x1F | (0 << 5) | (1 << 10));
  o[2] = __builtin_amdgcn_ds_swizzle(x, 0x10 | (3 << 5) | (8 << 10));
  o[3] = __builtin_amdgcn_ds_swizzle(x, 0x1F | (0 << 5) | (16 << 10));
  o[4] = __builtin_amdgcn_ds_bpermute((int)(((unsigned)x >> 8) & 31u) * 4, x);
  o[5] = __builtin_amdgcn_ds_permute((int)((lane * 7u + 3u) & 31u) * 4, x);
  o[6] = (int)__builtin_amdgcn_permlane16(0u, (unsigned)x, 0x1234abcdu, 0x0f5e6789u, false, false);
  o[7] = (int)__builtin_amdgcn_permlanex16(0u, (unsigned)x, 0x76543210u, 0xfedcba98u, false, false);
}

// DPP16 controls (quad_perm, row_shl, row_shr, row_ror, row_mirror, row_half_mirror,
// row_share, row_xmask) with bound_ctrl (invalid source -> 0) and without (keeps old), DPP8.
KERNEL void wave_dpp(int* out, const int* a, int n) {
  int i = gid();
  if (i >= n) return;
  int x = a[i];
  int* o = out + 10 * i;
  o[0] = __builtin_amdgcn_mov_dpp(x, 0x1B, 0xf, 0xf, true);
  o[1] = __builtin_amdgcn_update_dpp(-7, x, 0x111, 0xf, 0xf, false);
  o[2] = __builtin_amdgcn_mov_dpp(x, 0x103, 0xf, 0xf, true);
  o[3] = __builtin_amdgcn_update_dpp(-7, x, 0x125, 0xf, 0xf, false);
  o[4] = __builtin_amdgcn_mov_dpp(x, 0x140, 0xf, 0xf, true);
  o[5] = __builtin_amdgcn_mov_dpp(x, 0x141, 0xf, 0xf, true);
  o[6] = __builtin_amdgcn_mov_dpp(x, 0x153, 0xf, 0xf, true);
  o[7] = __builtin_amdgcn_mov_dpp(x, 0x165, 0xf, 0xf, true);
  // dpp8: lane j of each group of 8 reads lane sel[j]; sel = 7,6,5,4,3,2,1,0 reversed pairs.
  o[8] = __builtin_amdgcn_mov_dpp8(x, (1 << 0) | (0 << 3) | (3 << 6) | (2 << 9) | (7 << 12) |
                                         (7 << 15) | (4 << 18) | (5 << 21));
  o[9] = __builtin_amdgcn_update_dpp(100, x, 0x118, 0xf, 0xf, false) + x;
}

// Wave reductions: integer sum by DPP row_xmask butterflies plus permlanex16, integer max by
// ds_swizzle xor butterflies, f32 sum by the same DPP butterfly (exact order reproduced on
// the host). Every lane ends with the reduction of its whole wave.
KERNEL void wave_reduce(int* oi, float* of, const int* a, const float* f, int n) {
  int i = gid();
  if (i >= n) return;
  int s = a[i];
  s += __builtin_amdgcn_mov_dpp(s, 0x161, 0xf, 0xf, true);
  s += __builtin_amdgcn_mov_dpp(s, 0x162, 0xf, 0xf, true);
  s += __builtin_amdgcn_mov_dpp(s, 0x164, 0xf, 0xf, true);
  s += __builtin_amdgcn_mov_dpp(s, 0x168, 0xf, 0xf, true);
  s += (int)__builtin_amdgcn_permlanex16(0u, (unsigned)s, 0x76543210u, 0xfedcba98u, false, false);
  int m = a[i];
  int t;
  t = __builtin_amdgcn_ds_swizzle(m, 0x1F | (1 << 10)); m = m > t ? m : t;
  t = __builtin_amdgcn_ds_swizzle(m, 0x1F | (2 << 10)); m = m > t ? m : t;
  t = __builtin_amdgcn_ds_swizzle(m, 0x1F | (4 << 10)); m = m > t ? m : t;
  t = __builtin_amdgcn_ds_swizzle(m, 0x1F | (8 << 10)); m = m > t ? m : t;
  t = __builtin_amdgcn_ds_swizzle(m, 0x1F | (16 << 10)); m = m > t ? m : t;
  float v = f[i];
  v += __builtin_bit_cast(float, __builtin_amdgcn_mov_dpp(__builtin_bit_cast(int, v), 0x161, 0xf, 0xf, true));
  v += __builtin_bit_cast(float, __builtin_amdgcn_mov_dpp(__builtin_bit_cast(int, v), 0x162, 0xf, 0xf, true));
  v += __builtin_bit_cast(float, __builtin_amdgcn_mov_dpp(__builtin_bit_cast(int, v), 0x164, 0xf, 0xf, true));
  v += __builtin_bit_cast(float, __builtin_amdgcn_mov_dpp(__builtin_bit_cast(int, v), 0x168, 0xf, 0xf, true));
  v += __builtin_bit_cast(float, (int)__builtin_amdgcn_permlanex16(0u, __builtin_bit_cast(unsigned, v), 0x76543210u, 0xfedcba98u, false, false));
  oi[2 * i] = s;
  oi[2 * i + 1] = m;
  of[i] = v;
}
