"""Sums a million ints on the default device: each workgroup adds its 256 values through
dynamic LDS (a tree reduction), the host adds the per-workgroup sums; checked against numpy."""

import numpy as np

import hcq

SOURCE = r"""
extern "C" __attribute__((global)) void block_sums(int* sums, const int* x) {
  extern __attribute__((shared)) int part[];
  unsigned lane = __builtin_amdgcn_workitem_id_x();
  unsigned width = __builtin_amdgcn_workgroup_size_x();
  part[lane] = x[__builtin_amdgcn_workgroup_id_x() * width + lane];
  for (unsigned half = width / 2; half > 0; half /= 2) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    if (lane < half) part[lane] += part[lane + half];
  }
  if (lane == 0) sums[__builtin_amdgcn_workgroup_id_x()] = part[0];
}
"""

block = 256
n = 1 << 20
x = np.random.default_rng(1).integers(-1000, 1000, n, dtype=np.int32)

dev = hcq.Device()
block_sums = dev.program(dev.compile(SOURCE), "block_sums")
x_buf, sums = dev.alloc(x.nbytes), dev.alloc(n // block * 4)
x_buf.write(x)
seconds = block_sums(sums, x_buf, grid=n // block, block=block, lds=block * 4, timed=True)

per_block = sums.numpy(np.int32)
expected = x.reshape(-1, block).sum(axis=1, dtype=np.int32)
mismatches = int(np.count_nonzero(per_block != expected))
total, reference = int(per_block.sum(dtype=np.int64)), int(x.sum(dtype=np.int64))
print(f"reduction on {dev.name}: {n} ints in {seconds * 1e3:.3f} ms of GPU time; "
      f"sum {total} (numpy: {reference}), {mismatches} of {n // block} block sums differ")
if mismatches or total != reference:
    raise SystemExit(1)
