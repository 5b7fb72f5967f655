import numpy as np
import pytest

import hcq


def test_alloc_len_and_nbytes(dev):
    buf = dev.alloc(256)
    assert len(buf) == 256 and buf.nbytes == 256 and buf.offset == 0
    assert buf.device == dev
    assert repr(buf) == "hcq.Buffer(nbytes=256, device='amd-emu:0')"


def test_write_read_bytes_like(dev):
    buf = dev.alloc(16)
    data = bytes(range(16))
    buf.write(data)
    assert buf.read() == data
    buf.write(bytearray(b"\xff" * 4), offset=4)
    buf.write(memoryview(b"\xee\xee"), offset=14)
    expected = data[:4] + b"\xff" * 4 + data[8:14] + b"\xee\xee"
    assert buf.read() == expected
    assert buf.read(offset=4, nbytes=4) == b"\xff" * 4
    assert buf.read(offset=12) == expected[12:]


def test_write_numpy_and_read_numpy(dev):
    host = np.arange(1000, dtype=np.float32) * 0.5 - 7
    buf = dev.alloc(host.nbytes)
    buf.write(host)
    back = buf.numpy(np.float32)
    assert back.dtype == np.float32 and back.shape == (1000,)
    np.testing.assert_array_equal(back, host)
    # The array is the caller's own: writable and independent of the device memory.
    back[0] = 99
    assert buf.numpy(np.float32)[0] == host[0]
    as_i32 = buf.numpy("int32", shape=(10, 100))
    np.testing.assert_array_equal(as_i32, host.view(np.int32).reshape(10, 100))
    np.testing.assert_array_equal(buf.numpy(np.uint8), host.view(np.uint8))


def test_write_non_contiguous_numpy_writes_in_c_order(dev):
    host = np.arange(64, dtype=np.int32).reshape(8, 8)
    buf = dev.alloc(32 * 4)
    buf.write(host[:, ::2])
    np.testing.assert_array_equal(buf.numpy(np.int32, (8, 4)), host[:, ::2])
    buf.write(host.T[:4])
    np.testing.assert_array_equal(buf.numpy(np.int32, (4, 8)), host.T[:4])


def test_write_checks_the_size(dev):
    buf = dev.alloc(8)
    with pytest.raises(hcq.InvalidArgumentError, match="exceeds the 8-byte buffer"):
        buf.write(b"123456789")
    with pytest.raises(hcq.InvalidArgumentError):
        buf.write(b"1234", offset=5)
    with pytest.raises(TypeError):
        buf.write("a string")
    with pytest.raises(TypeError):
        buf.write(5)
    with pytest.raises(OverflowError):
        buf.write(b"1", offset=-1)


def test_read_checks_the_range(dev):
    buf = dev.alloc(8)
    with pytest.raises(hcq.InvalidArgumentError):
        buf.read(offset=9)
    with pytest.raises(hcq.InvalidArgumentError):
        buf.read(offset=4, nbytes=5)
    with pytest.raises(hcq.InvalidArgumentError):
        buf.read(nbytes=1 << 62)


def test_numpy_checks_itemsize(dev):
    buf = dev.alloc(10)
    with pytest.raises(hcq.InvalidArgumentError, match="not a whole number of 4-byte"):
        buf.numpy(np.float32)
    with pytest.raises(ValueError):
        buf.numpy(np.uint8, shape=(3, 3))
    with pytest.raises(TypeError):
        buf.numpy("not a dtype")


def test_views_share_memory(dev):
    host = np.arange(64, dtype=np.uint8)
    buf = dev.alloc(64)
    buf.write(host)
    view = buf.view(16, 8)
    assert (view.nbytes, view.offset) == (8, 16)
    assert view.read() == host[16:24].tobytes()
    view.write(b"\x00" * 8)
    expected = host.copy()
    expected[16:24] = 0
    assert buf.read() == expected.tobytes()
    inner = view.view(2, 4)
    assert inner.offset == 18 and inner.read() == b"\x00" * 4
    with pytest.raises(hcq.InvalidArgumentError, match="view of 9 bytes at offset 0"):
        view.view(0, 9)


def test_slicing(dev):
    host = np.arange(100, dtype=np.uint8)
    buf = dev.alloc(100)
    buf.write(host)
    for key in (slice(10, 20), slice(None, 5), slice(90, None), slice(-10, -2), slice(None)):
        part = buf[key]
        assert part.read() == host[key].tobytes(), key
        assert part.nbytes == len(host[key])
    assert buf[50:40].nbytes == 0
    assert buf[200:300].nbytes == 0
    with pytest.raises(hcq.InvalidArgumentError, match="step"):
        buf[::2]
    with pytest.raises(TypeError):
        buf[3]
    with pytest.raises(TypeError):
        buf["a"]


def test_copy_to(dev):
    src_host = np.arange(256, dtype=np.uint8)
    src = dev.alloc(256)
    src.write(src_host)
    dst = dev.alloc(256)
    dst.write(np.zeros(256, np.uint8))
    src.copy_to(dst)
    assert dst.read() == src_host.tobytes()
    dst.write(np.zeros(256, np.uint8))
    src.copy_to(dst, 16, src_offset=8, dst_offset=100)
    expected = np.zeros(256, np.uint8)
    expected[100:116] = src_host[8:24]
    np.testing.assert_array_equal(dst.numpy(np.uint8), expected)
    src[32:64].copy_to(dst[0:32])
    expected[0:32] = src_host[32:64]
    np.testing.assert_array_equal(dst.numpy(np.uint8), expected)
    with pytest.raises(hcq.InvalidArgumentError):
        src.copy_to(dst[0:10])
    with pytest.raises(TypeError):
        src.copy_to(b"not a buffer")


def test_copy_between_devices(dev, dev1):
    host = np.arange(1024, dtype=np.int32) * 3
    a = dev.alloc(host.nbytes)
    a.write(host)
    b = dev1.alloc(host.nbytes)
    a.copy_to(b)
    assert b.device == dev1
    np.testing.assert_array_equal(b.numpy(np.int32), host)


def test_buffer_keeps_its_device_and_memory_alive(dev):
    buf = hcq.Device("amd-emu:0").alloc(64)
    buf.write(bytes(range(64)))
    view = buf[8:16]
    del buf
    assert view.read() == bytes(range(8, 16))
    assert view.device.name == "amd-emu:0"


def test_alloc_rejects_bad_sizes(dev):
    with pytest.raises(OverflowError):
        dev.alloc(-1)
    with pytest.raises(TypeError):
        dev.alloc("12")


def test_fill_and_alloc_zeros(dev):
    buf = dev.alloc(4000)
    buf.write(np.full(1000, -1, dtype=np.int32))
    buf[8:3992].fill(np.float32(1.5))
    got = buf.numpy(np.float32)
    assert got[2:998].tolist() == [1.5] * 996
    assert buf.numpy(np.int32)[:2].tolist() == [-1, -1] and buf.numpy(np.int32)[998:].tolist() == [-1, -1]
    buf[1:7].fill(np.uint16(0xABCD))
    assert buf.read(offset=1, nbytes=6) == bytes.fromhex("cdab") * 3
    buf.fill(0x5A)
    assert buf.read() == b"\x5a" * 4000
    with pytest.raises(hcq.InvalidArgumentError, match="0 to 255"):
        buf.fill(300)
    with pytest.raises(hcq.InvalidArgumentError, match="1, 2 or 4"):
        buf.fill(np.float64(1.0))
    with pytest.raises(hcq.InvalidArgumentError, match="whole number"):
        buf[0:6].fill(np.int32(1))
    with pytest.raises(hcq.InvalidArgumentError):
        buf.fill(1.5)
    del buf
    z = dev.alloc_zeros(4000)
    assert z.read() == bytes(4000)


def test_alloc_host_is_reached_by_kernels_and_copies(dev):
    host = dev.alloc_host(4096)
    assert host.is_host and not dev.alloc(16).is_host
    data = np.arange(1024, dtype=np.int32) * 3 - 77
    host.write(data)
    device = dev.alloc(4096)
    host.copy_to(device)
    assert device.numpy(np.int32).tolist() == data.tolist()
