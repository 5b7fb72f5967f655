// Kernel suite: bit manipulation (counting, reversal, bit fields, funnel shifts, byte
// permutes and the three-operand logic/shift combinations).

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// v_bcnt_u32_b32, v_clz_i32_u32 (ffbh), v_ctz_i32_b32 (ffbl), v_cls_i32, and their 64-bit forms.
KERNEL void bits_count(int* out, const unsigned* a, const unsigned long* b, int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i];
  unsigned long y = b[i];
  int* o = out + 8 * i;
  o[0] = __builtin_popcount(x);
  o[1] = x ? __builtin_clz(x) : 32;
  o[2] = x ? __builtin_ctz(x) : 32;
  o[3] = __builtin_clrsb((int)x);
  o[4] = __builtin_popcountl(y);
  o[5] = y ? __builtin_clzl(y) : 64;
  o[6] = y ? __builtin_ctzl(y) : 64;
  o[7] = __builtin_popcount(x & (x - 1)) + __builtin_popcountl(y ^ (y >> 1));
}

// v_bfrev_b32 (32 and 64 bit), v_bfe_u32 / v_bfe_i32 with data-dependent offset and width,
// v_bfi_b32, and a field insert at a data-dependent position.
KERNEL void bits_field(unsigned* out, const unsigned* a, const unsigned* b, const unsigned* c,
                       int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i], y = b[i], z = c[i];
  unsigned* o = out + 8 * i;
  o[0] = __builtin_bitreverse32(x);
  unsigned long r = __builtin_bitreverse64(((unsigned long)x << 32) | y);
  o[1] = (unsigned)r;
  o[2] = (unsigned)(r >> 32);
  o[3] = __builtin_amdgcn_ubfe(x, y & 31, (y >> 8) & 31);
  o[4] = (unsigned)__builtin_amdgcn_sbfe((int)x, y & 31, (y >> 8) & 31);
  o[5] = (x & z) | (y & ~z);
  unsigned off = y & 15, width = 1 + ((y >> 4) & 15);
  unsigned mask = ((1u << width) - 1) << off;
  o[6] = (x & ~mask) | ((z << off) & mask);
  o[7] = (x >> off) & ((1u << width) - 1);
}

// Funnel shifts: v_alignbit_b32, v_alignbyte_b32, rotates, and 64-bit shifts by data
// (v_lshlrev_b64, v_lshrrev_b64, v_ashrrev_i64).
KERNEL void bits_funnel(unsigned* out, const unsigned* a, const unsigned* b, const unsigned* c,
                        int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i], y = b[i], s = c[i];
  unsigned* o = out + 12 * i;
  o[0] = __builtin_amdgcn_alignbit(x, y, s);
  o[1] = __builtin_amdgcn_alignbyte(x, y, s);
  o[2] = __builtin_rotateleft32(x, s);
  o[3] = __builtin_rotateright32(y, s);
  unsigned long v = ((unsigned long)x << 32) | y;
  unsigned sh = s & 63;
  unsigned long l = v << sh, r = v >> sh;
  long ar = (long)v >> sh;
  o[4] = (unsigned)l;
  o[5] = (unsigned)(l >> 32);
  o[6] = (unsigned)r;
  o[7] = (unsigned)(r >> 32);
  o[8] = (unsigned)ar;
  o[9] = (unsigned)((unsigned long)ar >> 32);
  unsigned long rot = __builtin_rotateleft64(v, s);
  o[10] = (unsigned)rot;
  o[11] = (unsigned)(rot >> 32);
}

// Byte permutes and three-operand integer ops: v_perm_b32 (bswap and explicit selectors),
// v_lshl_add_u32, v_add_lshl_u32, v_xor3_b32, v_and_or_b32, v_or3_b32, v_xad_u32,
// v_min3/max3/med3 (signed and unsigned), v_sad_u8, v_lerp_u8, v_not_b32.
KERNEL void bits_logic(unsigned* out, const unsigned* a, const unsigned* b, const unsigned* c,
                       int n) {
  int i = gid();
  if (i >= n) return;
  unsigned x = a[i], y = b[i], z = c[i];
  unsigned* o = out + 16 * i;
  o[0] = __builtin_bswap32(x);
  o[1] = __builtin_amdgcn_perm(x, y, z);
  o[2] = (x << (z & 7)) + y;
  o[3] = (x + y) << (z & 7);
  o[4] = x ^ y ^ z;
  o[5] = (x & y) | z;
  o[6] = x | y | z;
  o[7] = (x ^ y) + z;
  int sx = (int)x, sy = (int)y, sz = (int)z;
  int mn = sx < sy ? sx : sy;
  o[8] = (unsigned)(mn < sz ? mn : sz);
  unsigned umx = x > y ? x : y;
  o[9] = umx > z ? umx : z;
  int lo = sy < sz ? sy : sz, hi = sy < sz ? sz : sy;
  o[10] = (unsigned)(sx < lo ? lo : (sx > hi ? hi : sx));
  o[11] = __builtin_amdgcn_sad_u8(x, y, z & 0xffff);
  o[12] = __builtin_amdgcn_lerp(x, y, z);
  o[13] = ~(x & y);
  o[14] = (x & 0xff00ff00u) | ((y >> 8) & 0x00ff00ffu);
  o[15] = x * 0x01010101u >> 24;
}
