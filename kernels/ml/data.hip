// ML kernels: data movement and integer-heavy patterns: LDS-tiled transpose, embedding gather,
// index_add scatter with float atomics, top-k by bitonic sort in LDS, prefix sums (multi-pass
// and single-pass decoupled look-back), and a two-level histogram.

#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline
#define SHARED __attribute__((shared))
#define RELAXED __ATOMIC_RELAXED
#define AGENT __HIP_MEMORY_SCOPE_AGENT
#define WORKGROUP __HIP_MEMORY_SCOPE_WORKGROUP

DEV void sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

DEV unsigned tid() { return __builtin_amdgcn_workitem_id_x(); }
DEV unsigned lane_id() { return __builtin_amdgcn_mbcnt_lo(~0u, 0u); }
DEV unsigned global_id() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + tid();
}

// out[cols x rows] = in[rows x cols]ᵀ: 32x32 tile through LDS (one pad column), 32x8
// workgroups moving 4 rows per thread, both global accesses coalesced.
KERNEL void transpose_tile32(float* out, const float* in, int rows, int cols) {
  SHARED float tile[32][33];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int c0 = __builtin_amdgcn_workgroup_id_x() * 32, r0 = __builtin_amdgcn_workgroup_id_y() * 32;
  for (int j = ty; j < 32; j += 8)
    if (r0 + j < rows && c0 + tx < cols) tile[j][tx] = in[(long)(r0 + j) * cols + c0 + tx];
  sync();
  for (int j = ty; j < 32; j += 8)
    if (c0 + j < cols && r0 + tx < rows) out[(long)(c0 + j) * rows + r0 + tx] = tile[tx][j];
}

// Embedding lookup with 64-bit token ids; ids outside the table give a zero row.
KERNEL void embedding_lookup(float* out, const float* table, const long long* ids, int tokens,
                             int dim, long long vocab) {
  unsigned i = global_id();
  if (i >= (unsigned)(tokens * dim)) return;
  long long id = ids[i / dim];
  out[i] = (id >= 0 && id < vocab) ? table[id * dim + i % dim] : 0.0f;
}

// index_add along dim 0: out[index[r]][d] += src[r][d], colliding rows resolved by float atomics.
KERNEL void index_add_rows(float* out, const float* src, const int* index, int rows, int dim) {
  unsigned i = global_id();
  if (i >= (unsigned)(rows * dim)) return;
  __hip_atomic_fetch_add(&out[index[i / dim] * dim + i % dim], src[i], RELAXED, AGENT);
}

#define SORT_SIZE 1024

DEV bool ranks_before(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

// Top-k of each row (cols <= 1024): a bitonic sort of (value, index) pairs in LDS, descending
// by value, ties by lower index, padded with -inf. 512 threads, one compare-exchange each.
KERNEL void topk_bitonic(float* top_values, int* top_indices, const float* x, int cols, int k) {
  SHARED float keys[SORT_SIZE];
  SHARED int slots[SORT_SIZE];
  unsigned t = tid();
  long base = (long)__builtin_amdgcn_workgroup_id_x() * cols;
  for (unsigned i = t; i < SORT_SIZE; i += 512) {
    keys[i] = (int)i < cols ? x[base + i] : -__builtin_inff();
    slots[i] = (int)i < cols ? (int)i : 0x7fffffff;
  }
  sync();
  for (unsigned size = 2; size <= SORT_SIZE; size <<= 1) {
    for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
      unsigned i = 2 * t - (t & (stride - 1));
      unsigned j = i + stride;
      bool forward = (i & size) == 0;
      float vi = keys[i], vj = keys[j];
      int si = slots[i], sj = slots[j];
      bool out_of_order = forward ? ranks_before(vj, sj, vi, si) : ranks_before(vi, si, vj, sj);
      if (out_of_order) {
        keys[i] = vj;
        keys[j] = vi;
        slots[i] = sj;
        slots[j] = si;
      }
      sync();
    }
  }
  if ((int)t < k) {
    top_values[__builtin_amdgcn_workgroup_id_x() * k + t] = keys[t];
    top_indices[__builtin_amdgcn_workgroup_id_x() * k + t] = slots[t];
  }
}

#define DPP_ROW_SHR(n) (0x110 + (n))

// Inclusive scan of 256 values per workgroup: DPP row_shr steps inside each row of 16, the
// row-1 lanes add lane 15, then one LDS slot per wave. Returns this lane's inclusive prefix;
// *total gets the workgroup's sum.
DEV unsigned block_inclusive_scan(unsigned v, unsigned* wave_totals, unsigned* total) {
  v += (unsigned)__builtin_amdgcn_update_dpp(0, (int)v, DPP_ROW_SHR(1), 0xf, 0xf, false);
  v += (unsigned)__builtin_amdgcn_update_dpp(0, (int)v, DPP_ROW_SHR(2), 0xf, 0xf, false);
  v += (unsigned)__builtin_amdgcn_update_dpp(0, (int)v, DPP_ROW_SHR(4), 0xf, 0xf, false);
  v += (unsigned)__builtin_amdgcn_update_dpp(0, (int)v, DPP_ROW_SHR(8), 0xf, 0xf, false);
  unsigned row0_total = (unsigned)__builtin_amdgcn_readlane((int)v, 15);
  if (lane_id() >= 16) v += row0_total;
  unsigned wave = tid() / 32;
  if (lane_id() == 31) wave_totals[wave] = v;
  sync();
  unsigned before = 0, all = 0;
  for (unsigned w = 0; w < 8; w++) {
    if (w < wave) before += wave_totals[w];
    all += wave_totals[w];
  }
  sync();
  *total = all;
  return v + before;
}

// Pass 1 (and 2, over the block sums) of a multi-pass scan: per-block inclusive scan and the
// block's total.
KERNEL void scan_blocks(unsigned* out, unsigned* block_totals, const unsigned* in, int n) {
  SHARED unsigned wave_totals[8];
  unsigned i = global_id();
  unsigned total;
  unsigned v = block_inclusive_scan(i < (unsigned)n ? in[i] : 0u, wave_totals, &total);
  if (i < (unsigned)n) out[i] = v;
  if (tid() == 0) block_totals[__builtin_amdgcn_workgroup_id_x()] = total;
}

// Pass 3: every block after the first adds the scanned totals of the blocks before it.
KERNEL void scan_add_offsets(unsigned* out, const unsigned* scanned_totals, int n) {
  unsigned i = global_id();
  unsigned block = __builtin_amdgcn_workgroup_id_x();
  if (block > 0 && i < (unsigned)n) out[i] += scanned_totals[block - 1];
}

#define TILE_AGGREGATE 1ull
#define TILE_INCLUSIVE 2ull

// Single-pass scan with decoupled look-back: tiles take ids from a counter in launch order,
// publish (status << 32 | value) words, and the first lane of each tile walks back over its
// predecessors until it meets an inclusive prefix.
KERNEL void scan_decoupled(unsigned* out, unsigned long long* tile_states, unsigned* tile_counter,
                           const unsigned* in, int n) {
  SHARED unsigned wave_totals[8];
  SHARED unsigned tile_id_shared, exclusive_shared;
  unsigned t = tid();
  if (t == 0) tile_id_shared = __hip_atomic_fetch_add(tile_counter, 1u, RELAXED, AGENT);
  sync();
  unsigned tile = tile_id_shared;
  unsigned i = tile * 256 + t;
  unsigned aggregate;
  unsigned v = block_inclusive_scan(i < (unsigned)n ? in[i] : 0u, wave_totals, &aggregate);
  if (t == 0) {
    unsigned exclusive = 0;
    if (tile == 0) {
      __hip_atomic_store(&tile_states[0], (TILE_INCLUSIVE << 32) | aggregate, __ATOMIC_RELEASE, AGENT);
    } else {
      __hip_atomic_store(&tile_states[tile], (TILE_AGGREGATE << 32) | aggregate, __ATOMIC_RELEASE, AGENT);
      int j = (int)tile - 1;
      while (true) {
        unsigned long long state = __hip_atomic_load(&tile_states[j], __ATOMIC_ACQUIRE, AGENT);
        unsigned long long status = state >> 32;
        if (status == 0) {
          __builtin_amdgcn_s_sleep(1);
          continue;
        }
        exclusive += (unsigned)state;
        if (status == TILE_INCLUSIVE) break;
        j--;
      }
      __hip_atomic_store(&tile_states[tile], (TILE_INCLUSIVE << 32) | (exclusive + aggregate),
                         __ATOMIC_RELEASE, AGENT);
    }
    exclusive_shared = exclusive;
  }
  sync();
  if (i < (unsigned)n) out[i] = v + exclusive_shared;
}

// What the look-back scan relies on: a 64-bit atomic store is seen whole. Workgroup 0 stores
// words whose halves are each other's complement, alternating two of them; every other
// workgroup loads the word as often and adds up the loads whose halves do not belong to one
// stored word.
KERNEL void u64_store_load_halves(unsigned long long* word, unsigned* torn, int rounds) {
  if (tid() != 0) return;
  if (__builtin_amdgcn_workgroup_id_x() == 0) {
    for (int i = 0; i < rounds; i++)
      __hip_atomic_store(word, (i & 1) ? 0xaaaaaaaa55555555ull : 0x55555555aaaaaaaaull, RELAXED,
                         AGENT);
  } else {
    unsigned bad = 0;
    for (int i = 0; i < rounds; i++) {
      unsigned long long v = __hip_atomic_load(word, RELAXED, AGENT);
      if ((unsigned)v != ~(unsigned)(v >> 32)) bad++;
    }
    __hip_atomic_fetch_add(torn, bad, RELAXED, AGENT);
  }
}

// 256-bin histogram of bytes: per-workgroup bins in LDS (ds_add), then one global atomic per
// non-empty bin. Grid-stride over the input.
KERNEL void histogram256(unsigned* bins, const unsigned char* data, int n) {
  SHARED unsigned local_bins[256];
  unsigned t = tid();
  unsigned size = __builtin_amdgcn_workgroup_size_x();
  for (unsigned b = t; b < 256; b += size) local_bins[b] = 0;
  sync();
  unsigned stride = __builtin_amdgcn_grid_size_x();  // work-items in the dispatch
  for (unsigned i = global_id(); i < (unsigned)n; i += stride)
    __hip_atomic_fetch_add(&local_bins[data[i]], 1u, RELAXED, WORKGROUP);
  sync();
  for (unsigned b = t; b < 256; b += size)
    if (local_bins[b] != 0) __hip_atomic_fetch_add(&bins[b], local_bins[b], RELAXED, AGENT);
}
