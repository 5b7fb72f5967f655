#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer: builds one target and runs it for SECONDS.
#
#   bash scripts/fuzz.sh TARGET SECONDS      # TARGET: code_object ioctl streams decode interpreter
#   bash scripts/fuzz.sh all SECONDS         # each target in turn, SECONDS each
#
# Targets (their bodies are plain functions in the crates, `#[doc(hidden)] pub mod fuzzing`):
#   code_object  hcq_amd::fuzzing::load_code_object: ELF code-object loader, metadata parser,
#                descriptor and argument checks, relocations (seeds: crates/hcq-cli/kernels/prebuilt)
#   ioctl        hcq_emu::fuzzing::run_syscalls: sequences of open/close/ioctl/mmap/munmap and
#                doorbell writes on a fresh emulated KFD (any request number, any argument bytes)
#   streams      hcq_emu::fuzzing::run_stream: PM4 and SDMA streams through the packet parsers
#                of hcq-amd-sys and the emulator's command processor and SDMA engine
#   decode       rdna3::fuzzing::decode_stream: the RDNA3 decoder, and decode -> display
#   interpreter  rdna3::fuzzing::run_program: random wave programs, small step budget and memory
#
# How it works, on stable Rust only: no nightly toolchain can be installed, so cargo-fuzz's
# sanitizer builds are out of reach. libFuzzer needs only the SanitizerCoverage
# instrumentation, which stable rustc gives through plain codegen flags (`-Cpasses=sancov-module`
# and `-Cllvm-args=-sanitizer-coverage-*`, the same flags cargo-fuzz passes), and the
# `libfuzzer-sys` crate (from crates.io) compiles libFuzzer itself with the system C++
# compiler. So the `fuzz/` cargo project (outside the workspace) is built with those flags by
# plain `cargo build`; nothing else is installed. Without AddressSanitizer there is no
# LeakSanitizer: leaks are caught by the harnesses' own checks (e.g. queue registrations) and
# by libFuzzer's `-rss_limit_mb`/`-malloc_limit_mb`; Rust's own checks (bounds, overflow,
# debug assertions, all enabled here) catch what ASan would in safe code.
# HCQ_FUZZ_ASAN=1 adds AddressSanitizer (and LeakSanitizer) through RUSTC_BOOTSTRAP=1 and
# -Zsanitizer=address, which works with the sanitizer runtimes stable rustup ships for
# x86_64 Linux (tried on decode: it builds and runs); it is several times slower and uses far
# more memory, hence not the default. Its build goes to fuzz/target-asan.
#
# Files: fuzz/seeds/TARGET (seeds made from our own kernels and packet builders, in git;
# `HCQ_FUZZ_WRITE_SEEDS=1 cargo test --test fuzz_smoke` rewrites them from the smoke tests'
# seeds), fuzz/corpus/TARGET (grown corpus, not in git), fuzz/artifacts/TARGET (crashes,
# hangs, out-of-memory inputs), fuzz/logs/TARGET.log. An input that ever failed goes to
# fuzz/regressions/TARGET/NAME (in git): `cargo test` replays those forever (the
# `fuzz_smoke` tests of rdna3, hcq-emu and hcq-amd), together with a few seconds of seeded
# random and mutated inputs, which is the CI smoke.
#
# Extra libFuzzer flags may follow SECONDS (e.g. `-seed=1`, `-runs=10000000` instead of a time).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(code_object ioctl streams decode interpreter)
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET|all SECONDS [libFuzzer flags]   (targets: ${targets[*]})" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "SECONDS must be a whole number, not '$seconds'" >&2
  exit 2
fi
if [ "$target" = all ]; then
  for t in "${targets[@]}"; do
    "$0" "$t" "$seconds" "$@"
  done
  exit 0
fi
case " ${targets[*]} " in
  *" $target "*) ;;
  *) echo "unknown target '$target' (targets: ${targets[*]})" >&2; exit 2 ;;
esac

command -v c++ >/dev/null 2>&1 || {
  echo "libFuzzer is compiled from source: a C++ compiler (c++, e.g. Debian's g++) is needed" >&2
  exit 1
}

host=$(rustc -vV | sed -n 's/^host: //p')
flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
flags+=" -Cllvm-args=-sanitizer-coverage-pc-table"
flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares"
flags+=" --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
target_dir=fuzz/target
if [ "${HCQ_FUZZ_ASAN:-0}" = 1 ]; then
  export RUSTC_BOOTSTRAP=1
  flags+=" -Zsanitizer=address"
  target_dir=fuzz/target-asan
fi

echo "== building $target (libFuzzer, $host)"
# --target keeps RUSTFLAGS off build scripts; the binaries go to $target_dir/$host/release.
RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target_dir" \
  cargo build --quiet --release --manifest-path fuzz/Cargo.toml --target "$host" --bin "$target"
bin="$target_dir/$host/release/$target"

case "$target" in
  code_object) max_len=65536; seeds=(crates/hcq-cli/kernels/prebuilt) ;;
  decode) max_len=64; seeds=(crates/hcq-cli/kernels/prebuilt) ;;
  interpreter) max_len=256; seeds=() ;;
  streams) max_len=1024; seeds=() ;;
  ioctl) max_len=512; seeds=() ;;
esac
corpus=fuzz/corpus/$target
mkdir -p "$corpus" "fuzz/artifacts/$target" fuzz/logs
for dir in "fuzz/seeds/$target" "fuzz/regressions/$target"; do
  [ -d "$dir" ] && seeds+=("$dir")
done
log=fuzz/logs/$target.log

echo "== fuzzing $target for ${seconds}s (log: $log)"
status=0
"$bin" "$corpus" "${seeds[@]}" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -max_len="$max_len" -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$target/" \
  "$@" >"$log" 2>&1 || status=$?

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
echo "$target: ${runs:-?} executions, ${rate:-?} exec/s, coverage ${cov:-?} edges, peak RSS ${rss:-?} MB"
if [ "$status" -ne 0 ]; then
  echo "$target: libFuzzer exited with $status; the failing input is in fuzz/artifacts/$target/:" >&2
  grep -E "ERROR|panicked|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
  echo "Keep it as fuzz/regressions/$target/NAME (cargo test replays it), then fix the defect." >&2
  exit "$status"
fi
