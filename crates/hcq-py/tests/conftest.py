"""Shared fixtures: the emulated GPUs and the test kernels, compiled once per session."""

import os
import pathlib
import subprocess
import sys
import textwrap

# Two emulated GPUs (for copies between devices and buffers from another device). Read when
# the first device opens, so it must be set before any test opens one.
os.environ.setdefault("HCQ_EMU_GPUS", "2")

import pytest  # noqa: E402

import hcq  # noqa: E402

KERNELS = pathlib.Path(__file__).with_name("kernels.hip")


@pytest.fixture(scope="session")
def dev():
    return hcq.Device("amd-emu:0")


@pytest.fixture(scope="session")
def dev1():
    return hcq.Device("amd-emu:1")


@pytest.fixture(scope="session")
def code_object(dev):
    return dev.compile_file(KERNELS)


@pytest.fixture(scope="session")
def kernel(dev, code_object):
    """kernel("saxpy") -> hcq.Program, loaded once."""
    loaded = {}

    def load(name):
        if name not in loaded:
            loaded[name] = dev.program(code_object, name)
        return loaded[name]

    return load


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (for what ends or breaks a device for the rest of
    the process: faults, timeouts), with `env` added; returns its stdout lines."""
    full_env = dict(os.environ, **env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
