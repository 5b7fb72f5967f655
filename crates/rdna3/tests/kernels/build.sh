#!/bin/sh
# Rebuilds the test code object(s) from their HIP sources (needs clang-19).
# With --cuda-device-only and without -fgpu-rdc, clang already links the device code
# into a shared-object code object (ET_DYN), so no separate ld.lld step is needed.
set -eu
cd "$(dirname "$0")"
for src in *.hip; do
    name="${src%.hip}"
    # ftz.hip is the code a flush-denormals build produces (FLOAT_DENORM_MODE_32 = 0).
    case "$name" in
    ftz) extra=-fgpu-flush-denormals-to-zero ;;
    *) extra= ;;
    esac
    clang-19 -x hip --offload-arch=gfx1100 -nogpulib -nogpuinc -O3 --cuda-device-only \
        --no-gpu-bundle-output $extra -c "$src" -o "$name.hsaco"
done
# Reference disassemblies for the decoder test (tests/disassembly.rs).
for obj in *.hsaco; do
    llvm-objdump-19 -d --triple=amdgcn-amd-amdhsa --mcpu=gfx1100 "$obj" | sed 's/ <[^>]*>$//' > "${obj%.hsaco}.dis"
done
