#!/bin/sh
# Rebuilds kernels.hsaco from kernels.hip (needs clang-19). With --cuda-device-only and without
# -fgpu-rdc, clang links the device code itself (via ld.lld) into a shared-object code object.
set -eu
cd "$(dirname "$0")"
clang-19 -x hip --offload-arch=gfx1100 -nogpulib -nogpuinc -O3 --cuda-device-only \
    --no-gpu-bundle-output -c kernels.hip -o kernels.hsaco
