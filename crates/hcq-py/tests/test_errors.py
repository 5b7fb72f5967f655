"""Every exception class, raised by its cause, with the Rust message."""

import builtins

import pytest

import hcq
from conftest import KERNELS, run_python

ALL = [
    "OutOfMemoryError", "TimeoutError", "DeviceFaultError", "DeviceLostError", "CompileError",
    "InvalidCodeObjectError", "InvalidArgumentError", "NoDeviceError", "UnsupportedError",
    "DriverError", "IoError",
]


def test_hierarchy():
    for name in ALL:
        cls = getattr(hcq, name)
        assert issubclass(cls, hcq.Error) and cls.__module__ == "hcq", name
    assert issubclass(hcq.Error, Exception)
    assert issubclass(hcq.OutOfMemoryError, MemoryError)
    assert issubclass(hcq.TimeoutError, builtins.TimeoutError)
    assert issubclass(hcq.InvalidArgumentError, ValueError)


def test_out_of_memory(dev):
    with pytest.raises(MemoryError) as caught:
        dev.alloc(1 << 50)
    assert type(caught.value) is hcq.OutOfMemoryError
    assert str(caught.value).startswith(
        "out of device memory allocating 1125899906842624 bytes on amd-emu:0")


def test_compile_error(dev):
    with pytest.raises(hcq.CompileError) as caught:
        dev.compile("int x = ;")
    message = str(caught.value)
    assert message.startswith("compile error: ") and "expected expression" in message


def test_invalid_code_object(dev, code_object):
    with pytest.raises(hcq.InvalidCodeObjectError, match="^invalid code object: "):
        dev.program(b"not an ELF file", "saxpy")
    with pytest.raises(hcq.InvalidCodeObjectError, match='no kernel named "nope"'):
        dev.program(code_object, "nope")


def test_invalid_argument(dev):
    with pytest.raises(ValueError) as caught:
        dev.alloc(8).view(4, 8)
    assert type(caught.value) is hcq.InvalidArgumentError
    assert str(caught.value) == "invalid argument: view of 8 bytes at offset 4 exceeds the 8-byte buffer"


def test_no_device():
    with pytest.raises(hcq.NoDeviceError, match=r"^no such device: amd-emu:9 "):
        hcq.Device("amd-emu:9")
    with pytest.raises(hcq.NoDeviceError, match="unknown device kind"):
        hcq.Device("bogus:0")


def test_io_error_carries_errno(dev, tmp_path):
    missing = tmp_path / "missing.hip"
    with pytest.raises(hcq.IoError) as caught:
        dev.compile_file(missing)
    assert caught.value.errno == 2
    assert str(caught.value) == f"reading {missing}: No such file or directory (os error 2)"


def test_unsupported_without_resizable_bar():
    lines = run_python(
        """
        import hcq
        dev = hcq.Device("amd-emu:0")
        try:
            dev.alloc(4096)
        except hcq.UnsupportedError as e:
            print(type(e).__name__)
            print(str(e).startswith("unsupported: amd-emu:0: KFD refused host-visible VRAM"))
        """,
        HCQ_EMU_SMALL_BAR="1",
    )
    assert lines == ["UnsupportedError", "True"]


def test_device_fault_then_device_lost():
    lines = run_python(
        f"""
        import os, hcq
        dev = hcq.Device("amd-emu:0")
        poke = dev.program(dev.compile_file({str(KERNELS)!r}), "poke")
        poke(0x1000, grid=1, block=1)
        for step in ("synchronize", "launch"):
            try:
                dev.synchronize() if step == "synchronize" else poke(0x1000, grid=1, block=1)
                print("no error")
            except hcq.Error as e:
                print(type(e).__name__)
                print(str(e).splitlines()[0])
                if isinstance(e, hcq.DeviceFaultError):
                    print(e.kind, hex(e.address), e.pc is not None, e.instruction.split()[0])
        os._exit(0)
        """,
    )
    assert lines[0] == "DeviceFaultError"
    # The same facts as data.
    assert lines.pop(2) == "memory_fault 0x1000 True flat_store_b32"
    assert lines[1].startswith("device fault on amd-emu:0: ")
    # The faulting address, instruction and PC, as hcq words them.
    assert "write of unmapped address 0x1000 at pc 0x" in lines[1]
    assert "(flat_store_b32 " in lines[1]
    assert lines[2] == "DeviceLostError"
    assert lines[3].startswith("amd-emu:0 can run no more work: ")


def test_timeout():
    lines = run_python(
        f"""
        import os, builtins, hcq
        dev = hcq.Device("amd-emu:0")
        spin = dev.program(dev.compile_file({str(KERNELS)!r}), "spin")
        flag = dev.alloc(4)
        flag.write(b"\\0" * 4)
        spin(flag, grid=1, block=1)
        try:
            dev.synchronize()
            print("no error")
        except builtins.TimeoutError as e:
            print(type(e).__name__)
            print(str(e))
        os._exit(0)
        """,
        HCQ_WAIT_TIMEOUT_MS="200",
    )
    assert lines[0] == "TimeoutError"
    assert lines[1].startswith("timed out after 200 ms waiting for ")


def test_driver_error_class():
    # Nothing reachable from Python makes a driver call fail on the emulator; the class is
    # there, with its errno slot.
    assert hcq.DriverError("x").errno is None
