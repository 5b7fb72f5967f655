#!/usr/bin/env bash
# tinygrad on the emulated GPU against tinygrad's own CPU device, in one run: the same workload
# (scripts/bench_tinygrad.py: an MLP trained with TinyJit, and an elementwise pass over 1M
# floats) with DEV=CPU, then under `hcq exec` with DEV=AMD:LLVM. Prints both and the ratios
# (emulated / CPU: how many times slower the emulated GPU is).
#
#   bash scripts/bench-exec.sh [STEPS]      # training steps timed (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
venv=target/tinygrad-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import tinygrad, numpy" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check tinygrad==0.14.0 numpy==2.4.6
fi
command -v clang-19 >/dev/null || { echo "clang-19 is needed (bash scripts/test.sh installs it)" >&2; exit 1; }
cargo build --release --quiet -p hcq-cli -p hcq-exec
cpu=$(CC=clang-19 DEV=CPU "$venv/bin/python" scripts/bench_tinygrad.py "$steps" | tail -1)
emu=$(target/release/hcq exec -- env DEV=AMD:LLVM "$venv/bin/python" scripts/bench_tinygrad.py "$steps" | tail -1)
echo "tinygrad CPU device:      $cpu"
echo "tinygrad under hcq exec:  $emu"
python3 - "$cpu" "$emu" <<'PY'
import json, sys
cpu, emu = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for key, what in [("train_step_s", "MLP train step"), ("elementwise_1M_s", "elementwise over 1M floats")]:
  print(f"{what}: CPU {cpu[key]*1e3:.2f} ms, emulated GPU {emu[key]*1e3:.2f} ms, ratio {emu[key]/cpu[key]:.1f}x")
PY
