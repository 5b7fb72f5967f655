"""out = a * x + y over a million floats on the default device (HCQ_DEVICE, else a real AMD
GPU, else the emulated one), checked element by element against numpy."""

import numpy as np

import hcq

SOURCE = r"""
extern "C" __attribute__((global))
void saxpy(float* out, const float* x, const float* y, float a, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x()
        + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a * x[i] + y[i];
}
"""

n = 1 << 20
a = 2.0
rng = np.random.default_rng(0)
x = rng.standard_normal(n, dtype=np.float32)
y = rng.standard_normal(n, dtype=np.float32)

dev = hcq.Device()
saxpy = dev.program(dev.compile(SOURCE), "saxpy")
x_buf, y_buf, out = dev.alloc(x.nbytes), dev.alloc(y.nbytes), dev.alloc(x.nbytes)
x_buf.write(x)
y_buf.write(y)

block = 256
seconds = saxpy(out, x_buf, y_buf, a, n, grid=(n + block - 1) // block, block=block, timed=True)
result = out.numpy(np.float32)

# a * x is exact for a = 2, so the sum rounds once on the GPU (fused or not) and on the host.
expected = np.float32(a) * x + y
mismatches = int(np.count_nonzero(result != expected))
print(f"saxpy on {dev.name}: {n} elements in {seconds * 1e3:.3f} ms of GPU time, "
      f"{mismatches} mismatches against numpy")
if mismatches:
    raise SystemExit(1)
