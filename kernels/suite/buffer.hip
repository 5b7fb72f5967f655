// Kernel suite: raw buffer loads and stores through buffer resource descriptors
// (__builtin_amdgcn_make_buffer_rsrc → buffer_load/store_b8..b128). Offsets reach past each
// descriptor's num_records: out-of-range loads read 0 and out-of-range stores are dropped,
// per dword for the wide forms.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline

typedef __amdgpu_buffer_rsrc_t rsrc_t;
typedef int int4 __attribute__((ext_vector_type(4)));
typedef int int2 __attribute__((ext_vector_type(2)));

// gfx11 V# word 3: OOB_SELECT = 3 (raw: offset + size > num_records is out of range).
#define RAW_FLAGS 0x30000000

DEV int gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

// in_bytes / out_bytes are the descriptors' num_records; offsets[i] is lane i's byte offset
// into `in` (multiples of 4, some past in_bytes, some straddling it for the wide loads).
//   load32[i]     = b32 at offsets[i]
//   load128[4i+k] = dword k of the b128 at offsets[i]
//   load8[i]      = b8 at offsets[i] + (i & 3), zero-extended
//   load64[2i+k]  = dword k of the b64 at offsets[i] + 4 (instruction offset)
//   store32: out[i] = i * 3 + 1 through a descriptor of out_bytes bytes
//   store64: out64[2i..2i+2] = {i, ~i} through a descriptor of out_bytes bytes
//   store16: out16[i] = i ^ 0x5a5a through a descriptor of out_bytes bytes
KERNEL void buffer_raw(const int* in, const int* offsets, int* load32, int* load128, int* load8,
                       int* load64, int* out, int* out64, short* out16, int in_bytes,
                       int out_bytes, int n) {
  int i = gid();
  if (i >= n) return;
  rsrc_t src = __builtin_amdgcn_make_buffer_rsrc((void*)in, (short)0, in_bytes, RAW_FLAGS);
  int off = offsets[i];
  load32[i] = __builtin_amdgcn_raw_buffer_load_b32(src, off, 0, 0);
  int4 wide = __builtin_amdgcn_raw_buffer_load_b128(src, off, 0, 0);
  for (int k = 0; k < 4; ++k) load128[4 * i + k] = wide[k];
  load8[i] = __builtin_amdgcn_raw_buffer_load_b8(src, off + (i & 3), 0, 0);
  int2 pair = __builtin_amdgcn_raw_buffer_load_b64(src, off + 4, 0, 0);
  load64[2 * i] = pair.x;
  load64[2 * i + 1] = pair.y;

  rsrc_t dst = __builtin_amdgcn_make_buffer_rsrc(out, (short)0, out_bytes, RAW_FLAGS);
  __builtin_amdgcn_raw_buffer_store_b32(i * 3 + 1, dst, i * 4, 0, 0);
  rsrc_t dst64 = __builtin_amdgcn_make_buffer_rsrc(out64, (short)0, out_bytes, RAW_FLAGS);
  int2 value = {i, ~i};
  __builtin_amdgcn_raw_buffer_store_b64(value, dst64, i * 8, 0, 0);
  rsrc_t dst16 = __builtin_amdgcn_make_buffer_rsrc(out16, (short)0, out_bytes, RAW_FLAGS);
  __builtin_amdgcn_raw_buffer_store_b16((short)(i ^ 0x5a5a), dst16, i * 2, 0, 0);
}
