#!/usr/bin/env bash
# The project's test command: installs what the tests need, then checks formatting, lints and
# runs every test. Used by CI (.ci/run) and by developers alike.
set -euo pipefail
cd "$(dirname "$0")/.."

# A CI machine builds once from a clean clone and may have little disk: incremental state (about
# as large as the build itself) buys it nothing, and the build directories made only for the
# package and rust-version checks go once those have run.
ci=${CI:-}
if [ -n "$ci" ]; then export CARGO_INCREMENTAL=0; fi

need_llvm=()
for tool in clang-19 ld.lld-19 llvm-objdump-19 llvm-mc-19; do
  command -v "$tool" >/dev/null 2>&1 || need_llvm+=("$tool")
done
# The hcq exec tests build a C and a C++ client with the system's compilers.
command -v c++ >/dev/null 2>&1 || need_llvm+=(c++)
if [ ${#need_llvm[@]} -gt 0 ]; then
  echo "== installing clang-19, lld-19, llvm-19, g++ (missing: ${need_llvm[*]})"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-19 lld-19 llvm-19 g++ >/dev/null
fi

# tinygrad for the `hcq exec` tests: 0.14.0 and 0.9.0, each in a virtualenv of its own, made once.
make_venv() { # DIR PACKAGES...
  local dir=$1
  shift
  if [ ! -x "$dir/bin/python" ] || ! "$dir/bin/python" -c "import tinygrad, numpy" 2>/dev/null; then
    echo "== making $dir ($*)"
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
  fi
}
make_venv target/tinygrad-venv tinygrad==0.14.0 numpy==2.4.6
make_venv target/tinygrad-0.9-venv tinygrad==0.9.0 numpy==1.26.4
# Chrome DevTools' trace engine (from npm), the independent reader the trace test checks hcq's
# traces with; Node runs it (Debian's, installed when the machine has none).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing nodejs, npm"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
trace_engine=target/trace-engine/node_modules/@paulirish/trace_engine
if [ ! -f "$trace_engine/models/trace/trace.js" ]; then
  echo "== installing Chrome DevTools' trace engine (npm @paulirish/trace_engine)"
  npm install --prefix target/trace-engine --silent --no-audit --no-fund \
    @paulirish/trace_engine@0.0.65 >/dev/null
fi
export HCQ_TEST_TRACE_ENGINE="$PWD/$trace_engine"
export HCQ_TEST_TINYGRAD_PYTHON="$PWD/target/tinygrad-venv/bin/python"
export HCQ_TEST_TINYGRAD09_PYTHON="$PWD/target/tinygrad-0.9-venv/bin/python"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The API docs as docs.rs would build them: every public item documented (the library crates
# deny `missing_docs`), no broken or private intra-doc link.
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# Every code object the suite builds is disassembled at the end, by hcq and by llvm-objdump:
# the suite compiles into a cache of its own, fresh each run, and the tests that build objects
# outside the compile cache keep them in HCQ_TEST_OBJECTS (crates/hcq-cli/tests/disasm.rs).
suite_objects=$PWD/target/suite-objects
rm -rf "$suite_objects"
export HCQ_CACHE_DIR=$suite_objects/cache HCQ_TEST_OBJECTS=$suite_objects/built
echo "== cargo test"
cargo test --workspace 2>&1
# The interpreter's, the emulated GPU's and the runtime's suites again with every block
# compiled the first time it is reached (by default only hot blocks are), so each
# host-checked kernel also runs as compiled code.
echo "== cargo test, every block compiled (HCQ_EMU_JIT=eager)"
HCQ_EMU_JIT=eager cargo test -p rdna3 -p hcq-emu -p hcq --quiet 2>&1
# The driver alone: hcq without its `emulator` feature links neither the emulated GPU nor the
# interpreter, and still builds and passes its own unit tests.
echo "== hcq without the emulator"
tree=$(cargo tree -p hcq --no-default-features -e normal --prefix none)
if grep -E '^(hcq-emu|rdna3) ' <<<"$tree"; then
  echo "hcq --no-default-features still depends on the emulator" >&2
  exit 1
fi
cargo test -p hcq --no-default-features --lib --quiet
# The Rust examples, each checking its results (the test profile's build is already there).
for example in saxpy reduction graph_symbolic two_devices two_streams; do
  echo "== example $example"
  HCQ_DEVICE=amd-emu:0 cargo run --quiet --profile test -p hcq --example "$example"
done
bash crates/hcq-py/run-tests.sh
# The same package selection as `cargo test --workspace`, so nothing is rebuilt.
echo "== every code object the suite built, listed by hcq disasm and by llvm-objdump"
cargo test --workspace --quiet --test disasm -- --ignored --exact --nocapture \
  suite_objects::every_object_the_suite_built_disassembles_as_llvm_objdump_does

# Publishable crates: each library crate (and the CLI) packages, and each package builds on its
# own from the packaged files alone, against the packages of its dependencies.
echo "== cargo package"
# Cargo treats the packages it verifies as published versions, which never change: it unpacks
# each into its home's registry/src once (one directory per local registry, named `-<hash>`)
# and never rebuilds a compiled one. A second run would verify against the first run's sources,
# so both go first: our crates' unpacked copies, and the verification's build directory.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rm -rf "$cargo_home"/registry/src/-*/hcq-[0-9]* "$cargo_home"/registry/src/-*/hcq-*-[0-9]* \
  "$cargo_home"/registry/src/-*/rdna3-[0-9]* target/package-check
cargo package --workspace --exclude hcq-py --quiet --allow-dirty --target-dir target/package-check
rm -rf target/package-check

# The CLI installs as the README says (`cargo install --path crates/hcq-cli`), here as a debug
# build reusing the test run's, and the installed binary names its commit.
echo "== cargo install --path crates/hcq-cli"
rm -rf target/install-check
cargo install --quiet --debug --path crates/hcq-cli --root target/install-check --target-dir target
installed=$(target/install-check/bin/hcq --version)
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || true)
if [ -n "$commit" ] && [[ $installed != *"$commit"* ]]; then
  echo "the installed hcq says \"$installed\", not commit $commit" >&2
  exit 1
fi
echo "$installed"
rm -rf target/install-check

# The oldest toolchain the crates declare (`rust-version`) must build them all.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[[ $msrv =~ ^[0-9]+\.[0-9]+$ ]] && msrv=$msrv.0 # `1.87` means 1.87.0
echo "== cargo +$msrv check (rust-version)"
cargo "+$msrv" --version >/dev/null 2>&1 || rustup toolchain install "$msrv" --profile minimal --no-self-update
cargo "+$msrv" check --workspace --all-targets --quiet --target-dir target/msrv
if [ -n "$ci" ]; then rm -rf target/msrv; fi
echo "== done; the build directory holds $(du -sh -H target | cut -f1)"
