#!/usr/bin/env bash
# The project's test command: installs what the tests need, then checks formatting, lints and
# runs every test. Used by CI (.ci/run) and by developers alike.
set -euo pipefail
cd "$(dirname "$0")/.."

need_llvm=()
for tool in clang-19 ld.lld-19 llvm-objdump-19 llvm-mc-19; do
  command -v "$tool" >/dev/null 2>&1 || need_llvm+=("$tool")
done
if [ ${#need_llvm[@]} -gt 0 ]; then
  echo "== installing clang-19, lld-19, llvm-19 (missing: ${need_llvm[*]})"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-19 lld-19 llvm-19 >/dev/null
fi

# tinygrad for the `hcq exec` tests: a virtualenv of its own, made once.
venv=target/tinygrad-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import tinygrad, numpy" 2>/dev/null; then
  echo "== making $venv (tinygrad 0.14.0, numpy)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check tinygrad==0.14.0 numpy==2.4.6
fi
export HCQ_TEST_TINYGRAD_PYTHON="$PWD/$venv/bin/python"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace 2>&1
