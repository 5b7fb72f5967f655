"""Compiler flags from Python: -D, -I and -O shape the build, other flags reach clang, and
bad ones raise before clang runs; results checked against numpy."""

import numpy as np
import pytest

import hcq

SRC = "__global__ void k(int* o) { o[threadIdx.x] = threadIdx.x * SCALE; }"


def run(dev, code):
    prg = dev.program(code, "k")
    out = dev.alloc(64 * 4)
    prg(out, grid=1, block=64)
    return out.numpy(np.int32)


def test_flags_shape_the_build(dev, tmp_path):
    for scale in (3, -2):
        code = dev.compile(SRC, flags=[f"-DSCALE={scale}", "-O1"])
        np.testing.assert_array_equal(run(dev, code), np.arange(64) * scale)
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "s.h").write_text("#define SCALE 9\n")
    src = tmp_path / "k.hip"
    src.write_text('#include "s.h"\n' + SRC + "\n")
    code = dev.compile_file(src, flags=["-I", str(inc)])
    np.testing.assert_array_equal(run(dev, code), np.arange(64) * 9)
    with pytest.raises(hcq.CompileError):
        dev.compile(SRC)  # SCALE is not defined
    with pytest.raises(hcq.CompileError):
        dev.compile("__global__ void w(int* o) { int unused; o[0] = 1; }",
                    flags=["-Werror", "-Wunused-variable"])


def test_bad_flags_raise(dev):
    for flags in (["-o", "x"], ["-I/no/such/dir"], ["-D9X"], ["-O7"], ["-I"]):
        with pytest.raises(hcq.InvalidArgumentError):
            dev.compile(SRC, flags=flags)
