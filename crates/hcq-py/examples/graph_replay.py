"""Records `y = a * x + y` followed by a copy of y into a result buffer as a graph once, then
replays it with a different input buffer and element count each time; every result checked
against numpy."""

import numpy as np

import hcq

SOURCE = r"""
extern "C" __attribute__((global))
void axpy(float* y, const float* x, float a, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x()
        + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

capacity = 1 << 16
dev = hcq.Device()
axpy = dev.program(dev.compile(SOURCE), "axpy")
y, result = dev.alloc(capacity * 4), dev.alloc(capacity * 4)

g = hcq.GraphBuilder()
n = g.var("n", 1, capacity)
x = g.input(dev.alloc(capacity * 4))
g.launch(axpy, y, x, 0.5, n, grid=n.ceil_div(256), block=256)
g.copy(y, result, capacity * 4)
graph = g.build()

rng = np.random.default_rng(2)
failures = 0
for replay, count in enumerate((capacity, 1, 1000, 40_000)):
    # Small integers: every a * x + y is exact in float32, on the GPU and on the host.
    xs = rng.integers(-100, 100, capacity).astype(np.float32)
    ys = rng.integers(-100, 100, capacity).astype(np.float32)
    x_buf = dev.alloc(capacity * 4)
    x_buf.write(xs)
    y.write(ys)
    graph.replay([x_buf], [count])
    expected = ys.copy()
    expected[:count] = np.float32(0.5) * xs[:count] + ys[:count]
    bad = int(np.count_nonzero(result.numpy(np.float32) != expected))
    failures += bad
    print(f"replay {replay}: n = {count}, {bad} mismatches against numpy")
print(f"graph replay on {dev.name}: {graph.launch_count} launch and a copy per replay, "
      f"{failures} mismatches in all")
if failures:
    raise SystemExit(1)
