"""RUST_LOG from Python: the package installs hcq's log (devices, compiles, allocations, each
kernel's GPU time) on stderr when it is set, and prints nothing when it is not."""

import os
import subprocess
import sys

CODE = """
import hcq
dev = hcq.Device("amd-emu:0")
prg = dev.program(dev.compile("__global__ void k(int* o) { o[threadIdx.x] = 1; }"), "k")
buf = dev.alloc(256)
prg(buf, grid=1, block=64)
assert buf.read() == b"\\x01\\x00\\x00\\x00" * 64
"""


def stderr_of(env):
    done = subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_rust_log_prints_hcqs_log(tmp_path):
    env = dict(os.environ, HCQ_CACHE_DIR=str(tmp_path))
    env.pop("RUST_LOG", None)
    log = stderr_of(dict(env, RUST_LOG="hcq=debug"))
    for needle in ("hcq::device", "amd-emu:0: opened", "hcq::compile", "(compiled)",
                   "hcq::memory", "k grid 1x1x1 block 64x1x1", " us"):
        assert needle in log, f"{needle!r} is not in the log:\n{log}"
    quiet = stderr_of(env)
    assert "hcq::" not in quiet, quiet
