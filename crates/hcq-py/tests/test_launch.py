import struct

import numpy as np
import pytest

import hcq


def upload(dev, array):
    buf = dev.alloc(array.nbytes)
    buf.write(array)
    return buf


def test_saxpy_every_element(dev, kernel):
    n = 1000  # not a multiple of the block: the bounds check matters
    # Small integers and halves: every product and sum is exact in float32, so the GPU's
    # result (fused or not) equals the host's.
    x = (np.arange(n) % 997).astype(np.float32)
    y = ((np.arange(n) * 7) % 513).astype(np.float32)
    a = 2.5
    out = dev.alloc(n * 4)
    out.write(np.full(n, -1, np.float32))
    saxpy = kernel("saxpy")
    result = saxpy(out, upload(dev, x), upload(dev, y), a, n, grid=(n + 63) // 64, block=64)
    assert result is None
    np.testing.assert_array_equal(out.numpy(np.float32), np.float32(a) * x + y)


def test_numpy_scalars_and_grid_tuples(dev, kernel):
    n = 256
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    out = dev.alloc(n * 4)
    kernel("saxpy")(
        out, upload(dev, x), upload(dev, y), np.float32(-3), np.int32(n),
        grid=(4, 1, 1), block=(64, 1, 1),
    )
    np.testing.assert_array_equal(out.numpy(np.float32), -3 * x + y)


def test_views_as_arguments(dev, kernel):
    n = 64
    x = np.arange(4 * n, dtype=np.float32)
    xs = upload(dev, x)
    out = dev.alloc(4 * n * 4)
    out.write(np.zeros(4 * n, np.float32))
    # Elements 64..127 of x into elements 128..191 of out.
    kernel("saxpy")(out[128 * 4:192 * 4], xs[64 * 4:], xs.view(0, n * 4), 1.0, n, grid=1, block=64)
    expected = np.zeros(4 * n, np.float32)
    expected[128:192] = x[64:128] + x[0:64]
    np.testing.assert_array_equal(out.numpy(np.float32), expected)


def test_int64_values(dev, kernel):
    n = 128
    x = np.arange(n, dtype=np.int64) * (1 << 33)
    out = dev.alloc(x.nbytes)
    k = -(1 << 40) + 5
    kernel("add_i64")(out, upload(dev, x), k, n, grid=2, block=64)
    np.testing.assert_array_equal(out.numpy(np.int64), x + k)
    kernel("add_i64")(out, upload(dev, x), np.int64(7), np.int32(n), grid=2, block=64)
    np.testing.assert_array_equal(out.numpy(np.int64), x + 7)


def echo(dev, kernel, *args):
    out = dev.alloc(14 * 8)
    kernel("echo")(out, *args, grid=1, block=32)
    return out.numpy(np.uint64)


def bits32(value):
    return int(np.float32(value).view(np.uint32))


def u64(value):
    return value & (2**64 - 1)


def test_every_scalar_type_from_python(dev, kernel):
    pair = struct.pack("<if", -12, 0.75)
    got = echo(dev, kernel, -5, 200, -300, 60000, -70000, 3_000_000_000, -(1 << 40),
               2**64 - 3, 1.5, -2.25, True, np.float16(0.5), pair)
    expected = [u64(-5), 200, u64(-300), 60000, u64(-70000), 3_000_000_000, u64(-(1 << 40)),
                2**64 - 3, bits32(1.5), int(np.float64(-2.25).view(np.uint64)), 1,
                int(np.float16(0.5).view(np.uint16)), u64(-12), bits32(0.75)]
    assert [int(v) for v in got] == expected


def test_every_scalar_type_from_numpy(dev, kernel):
    args = [np.int8(-128), np.uint8(255), np.int16(-32768), np.uint16(65535),
            np.int32(-(2**31)), np.uint32(2**32 - 1), np.int64(-(2**63)),
            np.uint64(2**64 - 1), np.float32(3.14159), np.float64(2.718281828459045),
            np.bool_(False), np.float16(-1.5), bytearray(struct.pack("<if", 7, -0.5))]
    got = echo(dev, kernel, *args)
    expected = [u64(-128), 255, u64(-32768), 65535, u64(-(2**31)), 2**32 - 1, u64(-(2**63)),
                2**64 - 1, bits32(3.14159), int(np.float64(2.718281828459045).view(np.uint64)),
                0, int(np.float16(-1.5).view(np.uint16)), 7, bits32(-0.5)]
    assert [int(v) for v in got] == expected


def test_dynamic_lds(dev, kernel):
    blocks, lanes = 8, 64
    x = (np.arange(blocks * lanes, dtype=np.int32) * 37) % 1001 - 500
    out = dev.alloc(blocks * 4)
    kernel("block_sum")(out, upload(dev, x), grid=blocks, block=lanes, lds=lanes * 4)
    np.testing.assert_array_equal(out.numpy(np.int32), x.reshape(blocks, lanes).sum(axis=1))


def test_timed_returns_seconds_after_the_kernel(dev, kernel):
    out = dev.alloc(64 * 4)
    seconds = kernel("busy")(out, 1000, grid=1, block=64, timed=True)
    assert isinstance(seconds, float) and 0 < seconds < 60
    # Timed waits: the result is there without a synchronize.
    expected = np.arange(64, dtype=np.int64)
    for _ in range(1000):
        expected = (expected * 1103515245 + 12345) & 0xFFFFFFFF
    np.testing.assert_array_equal(out.numpy(np.uint32), expected.astype(np.uint32))


def test_argument_count(kernel, dev):
    with pytest.raises(hcq.InvalidArgumentError, match="saxpy takes 5 arguments"):
        kernel("saxpy")(dev.alloc(4), grid=1, block=1)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.int64(5), "takes 4 bytes, got int64"),
        (np.float64(5), "takes 4 bytes, got float64"),
        (np.float16(5), "takes 4 bytes, got float16"),
        (1 << 40, "does not fit the parameter's 4 bytes"),
        (-(1 << 31) - 1, "does not fit"),
        (b"\x01\x02", "takes 4 bytes, got bytes"),
        ("buffer", "TypeError"),
    ],
)
def test_value_arguments_are_checked(dev, kernel, bad, message):
    buf = dev.alloc(16)
    if message == "TypeError":
        with pytest.raises(TypeError):
            kernel("saxpy")(buf, buf, buf, 1.0, bad, grid=1, block=1)
    else:
        with pytest.raises(hcq.InvalidArgumentError, match=message):
            kernel("saxpy")(buf, buf, buf, 1.0, bad, grid=1, block=1)


def test_buffer_and_value_mixups(dev, kernel):
    buf = dev.alloc(16)
    with pytest.raises(hcq.InvalidArgumentError, match="takes an hcq.Buffer, got int"):
        kernel("saxpy")(buf, 5, buf, 1.0, 4, grid=1, block=1)
    with pytest.raises(hcq.InvalidArgumentError, match="takes a 4-byte value, got an hcq.Buffer"):
        kernel("saxpy")(buf, buf, buf, buf, 4, grid=1, block=1)
    with pytest.raises(hcq.InvalidArgumentError, match="Python float"):
        kernel("echo")(buf, 1, 2, 3, 4, 5, 6, 7, 8, 1.0, 2.0, True, 0.5, b"\0" * 8,
                       grid=1, block=1)
    with pytest.raises(TypeError, match="numpy array is not a kernel argument"):
        kernel("saxpy")(buf, buf, buf, np.float32(1), np.arange(2), grid=1, block=1)
    with pytest.raises(TypeError):
        kernel("saxpy")(buf, buf, buf, 1.0, None, grid=1, block=1)
    with pytest.raises(hcq.InvalidArgumentError, match="at most 128"):
        kernel("saxpy")(buf, buf, buf, 1.0, b"\0" * 200, grid=1, block=1)


def test_buffer_from_another_device(dev, dev1, kernel):
    here, there = dev.alloc(16), dev1.alloc(16)
    with pytest.raises(hcq.InvalidArgumentError, match="is a buffer on amd-emu:1"):
        kernel("saxpy")(here, there, here, 1.0, 4, grid=1, block=4)


def test_grid_and_block_are_checked(dev, kernel):
    prg = kernel("spin")
    buf = dev.alloc(4)
    with pytest.raises(TypeError):
        prg(buf)  # grid is required
    with pytest.raises(TypeError):
        prg(buf, grid="x")
    with pytest.raises(TypeError):
        prg(buf, grid=-1)
    with pytest.raises(hcq.InvalidArgumentError, match="dimensions"):
        prg(buf, grid=(1, 1, 1, 1))
    with pytest.raises(hcq.InvalidArgumentError, match="dimensions"):
        prg(buf, grid=())
    with pytest.raises(hcq.InvalidArgumentError):
        prg(buf, grid=1, block=(2048, 1, 1))
    with pytest.raises(OverflowError):
        prg(buf, grid=1, lds=-1)



def test_launch_keywords(dev, kernel):
    """Keyword names built at run time (not interned) and None for the defaults."""
    n = 64
    out = dev.alloc(n * 4)
    x = upload(dev, np.arange(n, dtype=np.float32))
    y = upload(dev, np.ones(n, np.float32))
    saxpy = kernel("saxpy")
    keywords = {"".join(["gr", "id"]): 1, "".join(["blo", "ck"]): n, "stream": None,
                "lds": 0, "timed": False}
    assert saxpy(out, x, y, 2.0, n, **keywords) is None
    dev.synchronize()
    np.testing.assert_array_equal(out.numpy(np.float32), 2 * np.arange(n) + 1)
    out.write(np.zeros(n, np.float32))
    saxpy(out, x, y, 3.0, n, grid=(1,), block=None)  # block=None is one work-item
    expected = np.zeros(n, np.float32)
    expected[0] = 1
    np.testing.assert_array_equal(out.numpy(np.float32), expected)
    with pytest.raises(TypeError, match="unexpected keyword argument 'gird'"):
        saxpy(out, x, y, 2.0, n, gird=1)
    with pytest.raises(TypeError, match="grid"):
        saxpy(out, x, y, 2.0, n, block=1)
    with pytest.raises(TypeError, match="stream"):
        saxpy(out, x, y, 2.0, n, grid=1, stream=dev)


def test_launch_method_is_the_call_with_grid_and_block_first(dev, kernel):
    n = 1000
    x = (np.arange(n) % 97).astype(np.float32)
    y = ((np.arange(n) * 3) % 31).astype(np.float32)
    out = dev.alloc(n * 4)
    out.write(np.full(n, -1, np.float32))
    saxpy = kernel("saxpy")
    assert saxpy.launch((n + 63) // 64, 64, out, upload(dev, x), upload(dev, y), 1.5, n) is None
    np.testing.assert_array_equal(out.numpy(np.float32), np.float32(1.5) * x + y)
    seconds = saxpy.launch((16, 1, 1), (64, 1, 1), out, upload(dev, y), upload(dev, x), 2.0, n,
                           timed=True, stream=dev.stream())
    assert isinstance(seconds, float) and seconds > 0
    np.testing.assert_array_equal(out.numpy(np.float32), np.float32(2.0) * y + x)
    with pytest.raises(hcq.InvalidArgumentError, match="saxpy takes 5 arguments"):
        saxpy.launch(1, 1, out)
    with pytest.raises(TypeError):
        saxpy.launch(1)  # no block
    with pytest.raises(hcq.InvalidArgumentError, match="dimensions"):
        saxpy.launch((), 1, out, out, out, 1.0, n)
