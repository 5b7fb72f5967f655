#!/usr/bin/env bash
# Rebuilds the prebuilt code objects from the kernel sources and rewrites the manifest.
# Needs clang-19 and lld-19 (apt-get install -y clang-19 lld-19).
set -euo pipefail
cd "$(dirname "$0")/../../.."
kernels=crates/hcq-cli/kernels
manifest=$kernels/prebuilt/MANIFEST
: > "$manifest.tmp"
for src in demo.hip; do
  for arch in gfx1100; do
    obj="${src%.hip}.$arch.hsaco"
    HCQ_CACHE_DIR=off cargo run -q -p hcq-cli -- compile "$kernels/$src" --arch "$arch" -o "$kernels/prebuilt/$obj"
    echo "$src $arch $(sha256sum "$kernels/$src" | cut -d' ' -f1) $obj" >> "$manifest.tmp"
  done
done
mv "$manifest.tmp" "$manifest"
echo "rebuilt: $(cut -d' ' -f4 "$manifest" | tr '\n' ' ')"
