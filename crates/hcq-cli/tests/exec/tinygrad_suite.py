# tinygrad's own AMD backend on the emulated GPUs, under `hcq exec --gpus 2`: tinygrad 0.14.0
# with DEV=AMD:LLVM, or tinygrad 0.9.0 with AMD=1 through run_tinygrad_0_9.py.
# Every result is checked against numpy, element by element; the script prints one line per
# check and "all ok" at the end, and exits 1 at the first mismatch.
import sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device, dtypes

rng = np.random.default_rng(7)

def check(name, got, want, tol=None):
  got, want = np.asarray(got), np.asarray(want)
  same = got.shape == want.shape and got.dtype == want.dtype
  if same: same = np.array_equal(got, want) if tol is None else np.allclose(got, want, rtol=tol, atol=tol)
  if not same:
    bad = np.argwhere(~np.isclose(got, want, rtol=tol or 0, atol=tol or 0)) if got.shape == want.shape else "shape"
    print(f"{name}: MISMATCH {got.dtype}{got.shape} vs {want.dtype}{want.shape}, first bad {bad[:4] if not isinstance(bad, str) else bad}")
    sys.exit(1)
  print(f"{name}: ok", flush=True)

print("device", Device.DEFAULT, type(Device[Device.DEFAULT]).__name__)
a = rng.standard_normal((96, 80)).astype(np.float32)
b = rng.standard_normal((80, 72)).astype(np.float32)
c = rng.standard_normal((96, 80)).astype(np.float32)
A, B, C = Tensor(a), Tensor(b), Tensor(c)
check("roundtrip", A.numpy(), a)
check("add_mul", (A * C + 2).numpy(), a * c + np.float32(2), 1e-6)
check("exp_log", (A.exp() + 1).log().numpy(), np.log(np.exp(a) + 1), 1e-4)
check("sum_axis", A.sum(axis=1).numpy(), a.sum(axis=1), 1e-4)
check("max_all", A.max().numpy(), a.max())
check("mean", A.mean(axis=0).numpy(), a.mean(axis=0), 1e-5)
check("matmul", (A @ B).numpy(), a @ b, 1e-3)
e = np.exp(a - a.max(axis=1, keepdims=True))
check("softmax", A.softmax(axis=1).numpy(), e / e.sum(axis=1, keepdims=True), 1e-5)

x = rng.standard_normal((2, 3, 12, 10)).astype(np.float32)
w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
ref = np.zeros((2, 5, 10, 8), np.float32)
for n in range(2):
  for o in range(5):
    for i in range(10):
      for j in range(8): ref[n, o, i, j] = (x[n, :, i:i+3, j:j+3] * w[o]).sum()
check("conv2d", Tensor(x).conv2d(Tensor(w)).numpy(), ref, 1e-4)

ia = rng.integers(-2**20, 2**20, 5000).astype(np.int32)
ib = rng.integers(1, 1000, 5000).astype(np.int32)
check("int32", (Tensor(ia) * 3 - Tensor(ib)).maximum(-5000).numpy(), np.maximum(ia * 3 - ib, -5000))
check("int32_sum", Tensor(ia).sum().numpy(), ia.sum(dtype=np.int32))
h = rng.standard_normal(4096).astype(np.float16)
check("half", (Tensor(h) * 2 + 1).numpy(), h * np.float16(2) + np.float16(1), 1e-3)
check("cast", Tensor(a).cast(dtypes.half).numpy(), a.astype(np.float16))

big = rng.integers(0, 256, 64 << 20, dtype=np.uint8)
check("copy_64MiB", Tensor(big).numpy(), big)

@TinyJit
def step(x, y):
  h = (x @ y).relu()
  return h.realize(), (h.sum(axis=0) * 2).realize(), (x.exp().sum() + 1).realize()
for i in range(5):
  xa = rng.standard_normal((32, 48)).astype(np.float32)
  ya = rng.standard_normal((48, 16)).astype(np.float32)
  h, s, e = step(Tensor(xa), Tensor(ya))
  hr = np.maximum(xa @ ya, 0)
  check(f"jit_{i}", h.numpy(), hr, 1e-4)
  check(f"jit_{i}_sum", s.numpy(), hr.sum(axis=0) * 2, 1e-3)
  check(f"jit_{i}_exp", e.numpy(), np.float32(np.exp(xa).sum() + 1), 1e-3)
if hasattr(step, "captured") and hasattr(step.captured, "linear"):  # tinygrad 0.14
  from tinygrad.engine.realize import graph_cache
  from tinygrad.uop.ops import Ops
  runners = [type(graph_cache[c.src[0]]).__name__ for c in step.captured.linear.src
             if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph" and c.src[0] in graph_cache]
else:  # tinygrad 0.9.0
  runners = [type(ei.prg).__name__ for ei in step.jit_cache if "Graph" in type(ei.prg).__name__]
print("jit graphs", runners)
if not runners: print("the JIT did not replay through a graph"); sys.exit(1)

second = f"{Device.DEFAULT}:1"
print("second", second, type(Device[second]).__name__)
m = Tensor(a).to(second)
check("to_gpu1", m.numpy(), a)
check("gpu1_math", (m * 2 - 1).sum(axis=0).to(Device.DEFAULT).numpy(), (a * 2 - 1).sum(axis=0), 1e-4)
print("all ok")
