# The workload of scripts/bench-exec.sh: a small MLP trained with TinyJit (forward, backward,
# SGD) and a large elementwise op, on whatever device DEV names. Prints one JSON line with the
# steady-state seconds per training step and per elementwise pass, after a warm-up that
# compiles and captures everything.
import json, time, sys
import numpy as np
from tinygrad import Tensor, TinyJit, Device
from tinygrad.nn.optim import SGD
from tinygrad.helpers import Context

rng = np.random.default_rng(0)
Tensor.manual_seed(0)
w1 = Tensor(rng.standard_normal((256, 256)).astype(np.float32) * 0.05)
w2 = Tensor(rng.standard_normal((256, 10)).astype(np.float32) * 0.05)
opt = SGD([w1, w2], lr=0.01)
xs = [Tensor(rng.standard_normal((128, 256)).astype(np.float32)).realize() for _ in range(4)]
ys = [Tensor(rng.integers(0, 10, 128).astype(np.int32)).realize() for _ in range(4)]

@TinyJit
def train(x, y):
  with Context(TRAINING=1):
    opt.zero_grad()
    loss = (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.realize()

big = Tensor(rng.standard_normal(1 << 20).astype(np.float32)).realize()
@TinyJit
def elementwise(a): return ((a * 1.5 + 2).exp2() - a.sqrt().abs()).realize()

def timed(fn, n):
  fn(0); Device[Device.DEFAULT].synchronize()
  start = time.perf_counter()
  for i in range(n): out = fn(i)
  Device[Device.DEFAULT].synchronize()
  return (time.perf_counter() - start) / n, out

for i in range(3): train(xs[i % 4], ys[i % 4]); elementwise(big)
step, loss = timed(lambda i: train(xs[i % 4], ys[i % 4]), int(sys.argv[1]) if len(sys.argv) > 1 else 20)
ew, _ = timed(lambda i: elementwise(big), 10)
print(json.dumps({"device": Device.DEFAULT, "train_step_s": step, "elementwise_1M_s": ew, "loss": float(loss.numpy())}))
