import numpy as np
import pytest

import hcq


def upload(dev, array):
    buf = dev.alloc(array.nbytes)
    buf.write(array)
    return buf


def test_replay_with_swapped_inputs_and_variables(dev, kernel):
    saxpy, add = kernel("saxpy"), kernel("add_i64")
    cap = 1024
    x0 = np.arange(cap, dtype=np.float32)
    y = np.full(cap, 10, np.float32)
    out = dev.alloc(cap * 4)
    ys = upload(dev, y)
    wide_in, wide_out = upload(dev, np.arange(cap, dtype=np.int64)), dev.alloc(cap * 8)

    g = hcq.GraphBuilder()
    n = g.var("n", 1, cap)
    x = g.input(upload(dev, x0))
    assert (x.index, x.nbytes) == (0, cap * 4)
    g.launch(saxpy, out, x, ys, 3.0, n, grid=n.ceil_div(64), block=64)
    g.launch(add, wide_out, wide_in, np.int64(-5), n, grid=(n.ceil_div(32), 1, 1), block=(32, 1, 1))
    assert len(g) == 2
    graph = g.build()
    assert graph.launch_count == 2 and graph.vars == [("n", 1, cap)]
    assert graph.device == dev

    for count, scale in ((cap, 1), (1, 2), (700, -3)):
        xs = np.arange(cap, dtype=np.float32) * scale
        out.write(np.zeros(cap, np.float32))
        wide_out.write(np.zeros(cap, np.int64))
        graph.replay([upload(dev, xs)], [count])
        expected = np.zeros(cap, np.float32)
        expected[:count] = 3 * xs[:count] + y[:count]
        np.testing.assert_array_equal(out.numpy(np.float32), expected)
        wide = np.zeros(cap, np.int64)
        wide[:count] = np.arange(count) - 5
        np.testing.assert_array_equal(wide_out.numpy(np.int64), wide)


def test_copies_and_dim_arithmetic(dev, kernel):
    src = np.arange(256, dtype=np.uint8)
    g = hcq.GraphBuilder()
    blocks = g.var("blocks", 1, 4)
    staged = dev.alloc(256)
    staged.write(np.zeros(256, np.uint8))  # the copy fills the first half only
    a = g.input(upload(dev, src))
    g.copy(a, staged, 128)
    out = dev.alloc(64 * 4 * 4)
    g.launch(kernel("block_sum"), out, staged, grid=blocks * 2 // 2 + 0, block=16, lds=64)
    graph = g.build()
    data = (np.arange(256) * 7 % 256).astype(np.uint8)
    block_sums = np.zeros(4, np.int32)
    block_sums[:2] = data[:128].view(np.int32).reshape(2, 16).sum(axis=1, dtype=np.int32)
    for count in (1, 4, 2):
        out.write(np.full(256, -1, np.int32))
        graph.replay(inputs=[upload(dev, data)], vars=[count])
        expected = np.full(256, -1, np.int32)
        expected[:count] = block_sums[:count]
        np.testing.assert_array_equal(out.numpy(np.int32), expected)
    assert (blocks * 3 + 1).eval([5]) == 16
    assert (10 // blocks).eval([3]) == 3
    assert blocks.ceil_div(2).eval([3]) == 2


def test_graph_errors(dev, dev1, kernel):
    saxpy = kernel("saxpy")
    buf = dev.alloc(64)
    g, other = hcq.GraphBuilder(), hcq.GraphBuilder()
    n = g.var("n", 1, 16)
    foreign = other.var("m", 1, 2)
    with pytest.raises(hcq.InvalidArgumentError, match="bounds 3..=1 are empty"):
        g.var("bad", 3, 1)
    with pytest.raises(hcq.InvalidArgumentError, match="another graph builder"):
        g.launch(saxpy, buf, buf, buf, 1.0, foreign, grid=1, block=1)
    with pytest.raises(hcq.InvalidArgumentError, match="another graph builder"):
        g.launch(saxpy, buf, buf, buf, 1.0, n, grid=foreign, block=1)
    with pytest.raises(hcq.InvalidArgumentError, match="another graph builder"):
        g.copy(other.input(buf), buf, 4)
    with pytest.raises(hcq.InvalidArgumentError, match="only a variable itself"):
        g.launch(saxpy, buf, buf, buf, 1.0, n + 1, grid=1, block=1)
    with pytest.raises(hcq.InvalidArgumentError, match="takes 5 arguments"):
        g.launch(saxpy, buf, grid=1)
    with pytest.raises(TypeError):
        g.launch(saxpy, buf, buf, buf, 1.0, n, grid="x")
    with pytest.raises(TypeError):
        g.copy(buf, "dst", 4)
    x = g.input(buf)
    g.launch(saxpy, buf, x, buf, 1.0, n, grid=1, block=n)
    graph = g.build()
    with pytest.raises(hcq.InvalidArgumentError, match="graph takes 1 inputs, got 0"):
        graph.replay([], [1])
    with pytest.raises(hcq.InvalidArgumentError, match="input 0 is 32 bytes"):
        graph.replay([dev.alloc(32)], [1])
    with pytest.raises(hcq.InvalidArgumentError, match="input 0 is on amd-emu:1"):
        graph.replay([dev1.alloc(64)], [1])
    with pytest.raises(hcq.InvalidArgumentError):
        graph.replay([buf], [17])
    with pytest.raises(TypeError):
        graph.replay(["not a buffer"], [1])
    graph.replay([buf], [16])
    dev.synchronize()
