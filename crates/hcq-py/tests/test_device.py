import os
import pathlib

import pytest

import hcq
from conftest import KERNELS, run_python


def test_devices_lists_the_emulated_gpus():
    names = hcq.devices()
    assert "amd-emu:0" in names and "amd-emu:1" in names
    assert all(isinstance(n, str) for n in names)


def test_device_by_name_and_info(dev):
    assert dev.name == "amd-emu:0"
    info = dev.info
    assert isinstance(info, hcq.DeviceInfo)
    assert info.name == "amd-emu:0"
    assert info.arch == "gfx1100"
    assert info.emulated is True
    assert isinstance(info.memory, int) and info.memory > 0
    assert "gfx1100" in info.description
    # The emulated RX 7900 XTX's shape, as its topology publishes it.
    c = info.compute
    assert isinstance(c, hcq.ComputeInfo)
    assert (c.compute_units, c.shader_engines, c.simds_per_cu, c.wave_size) == (96, 6, 2, 32)
    assert (c.max_waves_per_cu, c.lds_per_workgroup) == (32, 65536)
    assert c.render_minor >= 128 and c.driver_version.startswith("KFD 1.")
    assert 0 < c.free_memory <= info.memory
    assert c.copy_engine_missing is None
    # The RX 7900 XTX's caches as KFD lists them: 206 instances, 6 MiB of L2.
    assert sum(k.instances for k in c.caches) == 206
    l2 = [k for k in c.caches if k.level == 2]
    assert len(l2) == 1 and l2[0].nbytes == 6 << 20 and l2[0].shared_by_cus == 96
    assert isinstance(c.caches[0], hcq.CacheInfo) and "level=1" in repr(c.caches[0])
    assert "amd-emu:0" in repr(info) and "amd-emu:0" in repr(dev)


def test_same_name_is_the_same_device(dev, dev1):
    assert hcq.Device("amd-emu:0") == dev
    assert hash(hcq.Device("amd-emu:0")) == hash(dev)
    assert dev != dev1
    assert dev != "amd-emu:0"


def test_default_device_honours_hcq_device():
    lines = run_python("import hcq; print(hcq.Device().name)", HCQ_DEVICE="amd-emu:1")
    assert lines == ["amd-emu:1"]


def test_synchronize(dev):
    assert dev.synchronize() is None


def test_compile_returns_a_code_object(dev):
    source = 'extern "C" __attribute__((global)) void nothing() {}'
    code = dev.compile(source)
    assert isinstance(code, bytes) and code[:4] == b"\x7fELF"
    # The cache gives the same object back.
    assert dev.compile(source) == code
    program = dev.program(code, "nothing")
    assert program.name == "nothing"
    assert program.device == dev
    # hcq reports no metadata (None) for a kernel without arguments, as for one without
    # argument metadata: both look the same in the code object.
    assert program.arguments in ([], None)
    assert program(grid=1, block=1) is None
    dev.synchronize()


def test_compile_file_accepts_str_and_pathlike(dev, code_object):
    assert code_object[:4] == b"\x7fELF"
    assert dev.compile_file(str(KERNELS)) == dev.compile_file(pathlib.Path(KERNELS))


def test_compile_file_resolves_includes_next_to_the_file(dev, tmp_path):
    (tmp_path / "value.h").write_text("#define VALUE 7\n")
    (tmp_path / "k.hip").write_text(
        '#include "value.h"\n'
        'extern "C" __attribute__((global)) void seven(int* out) { *out = VALUE; }\n'
    )
    here = os.getcwd()
    os.chdir("/")
    try:
        code = dev.compile_file(tmp_path / "k.hip")
    finally:
        os.chdir(here)
    out = dev.alloc(4)
    dev.program(code, "seven")(out, grid=1, block=1)
    assert int.from_bytes(out.read(), "little") == 7


def test_program_from_any_bytes_like(dev, code_object):
    for form in (bytearray(code_object), memoryview(code_object)):
        assert dev.program(form, "saxpy").name == "saxpy"
    with pytest.raises(TypeError):
        dev.program(12, "saxpy")


def test_program_repr(kernel):
    assert repr(kernel("saxpy")) == "hcq.Program('saxpy', device='amd-emu:0')"
