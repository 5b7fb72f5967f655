#!/usr/bin/env bash
# The Python package's tests: builds and installs `hcq` (crates/hcq-py, with maturin) into a
# virtualenv under the repository's target/ (made once, reused), then runs its pytest suite
# and the examples on the emulated GPU. Needs Rust, Python 3 (with venv) and clang-19.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$repo/target/hcq-py-venv"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import maturin, numpy, pytest" 2>/dev/null; then
  echo "== making $venv (maturin, numpy, pytest)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "maturin==1.16.0" "numpy==2.4.6" "pytest==9.2.0"
fi

echo "== pip install crates/hcq-py"
# Without build isolation the venv's maturin builds it, instead of pip fetching one into a
# fresh temporary environment on every run; the shared target directory keeps the workspace's
# compiled crates between runs.
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}" \
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation \
  --force-reinstall --no-deps "$here"

echo "== pytest crates/hcq-py/tests"
cd "$here"
# The tests name their devices; the examples use the default one, the emulated GPU here.
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests
for example in examples/*.py; do
  echo "== $example"
  HCQ_DEVICE="${HCQ_DEVICE:-amd-emu:0}" "$venv/bin/python" "$example"
done
