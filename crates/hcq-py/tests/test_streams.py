"""Streams and events from Python: launches and copies on streams, an event ordering one
stream after another, the host waiting for events and timing the GPU, two streams overlapping;
results checked element by element against numpy."""

import numpy as np
import pytest

import hcq

ROUNDS = 200_000
LANES = 64


def busy_reference(rounds):
    """What the `busy` kernel writes: `rounds` steps of a 32-bit LCG from each lane's id."""
    acc = np.arange(LANES, dtype=np.uint32)
    for _ in range(rounds):
        acc = acc * np.uint32(1103515245) + np.uint32(12345)
    return acc.view(np.int32)


@pytest.fixture(scope="module")
def slow_result():
    return busy_reference(ROUNDS)


def test_an_event_orders_one_stream_after_another(dev, kernel, slow_result):
    busy = kernel("busy")
    s1, s2 = dev.stream(), dev.stream()
    out = dev.alloc_zeros(LANES * 4)
    dev.synchronize()
    busy(out, np.int32(ROUNDS), grid=1, block=LANES, stream=s1)
    done = s1.record_event()
    assert not done.done, "the slow kernel cannot have finished already"
    s2.wait_event(done)
    # Read on s2: without the wait it would see the zeros `out` holds meanwhile.
    got = np.frombuffer(out.read(stream=s2), dtype=np.int32)
    assert done.done
    np.testing.assert_array_equal(got, slow_result)


def test_two_streams_overlap_and_events_time_the_gpu(dev, kernel, slow_result):
    busy = kernel("busy")
    s1, s2 = dev.stream(), dev.stream()
    a, b = dev.alloc(LANES * 4), dev.alloc(LANES * 4)
    dev.synchronize()
    a0 = s1.record_event()
    busy(a, np.int32(ROUNDS), grid=1, block=LANES, stream=s1)
    a1 = s1.record_event()
    b0 = s2.record_event()
    busy(b, np.int32(ROUNDS), grid=1, block=LANES, stream=s2)
    b1 = s2.record_event()
    with pytest.raises(hcq.InvalidArgumentError):
        a1.elapsed_since(a0)  # not reached yet
    a1.synchronize()
    b1.synchronize()
    assert a0.done and b0.done and a1.done and b1.done
    np.testing.assert_array_equal(a.numpy(np.int32, stream=s1), slow_result)
    np.testing.assert_array_equal(b.numpy(np.int32), slow_result)
    a_end = a1.elapsed_since(a0)
    b_end = b1.elapsed_since(a0)
    try:
        b_start = b0.elapsed_since(a0)
    except hcq.InvalidArgumentError:
        b_start = 0.0  # b started first
    assert a_end > 0.001
    assert b_start < a_end and b_end > 0, (a_end, b_start, b_end)
    with pytest.raises(hcq.InvalidArgumentError):
        a0.elapsed_since(a1)  # backwards
    assert a1.stream.device == dev and not a1.stream.is_default


def test_copies_and_fills_on_a_stream(dev, dev1):
    s = dev.stream()
    xs = np.arange(10_001, dtype=np.int32) * 7 - 5000
    buf = dev.alloc(xs.nbytes)
    buf.write(xs, stream=s)
    np.testing.assert_array_equal(np.frombuffer(buf.read(stream=s), np.int32), xs)
    other = dev.alloc(xs.nbytes)
    buf.copy_to(other, stream=s)
    buf[8:16].fill(np.int16(-2), stream=s)
    got = other.numpy(np.int32, stream=s)
    np.testing.assert_array_equal(got, xs)
    filled = buf.numpy(np.int16, stream=s)
    expect = xs.copy().view(np.int16)
    expect[4:8] = -2
    np.testing.assert_array_equal(filled, expect)
    # To another GPU from a stream, then read there.
    far = dev1.alloc(xs.nbytes)
    buf.copy_to(far, stream=s)
    np.testing.assert_array_equal(far.numpy(np.int16), expect)
    # A buffer of another device on this device's stream.
    with pytest.raises(hcq.InvalidArgumentError):
        far.write(xs, stream=s)


def test_device_waits_for_streams_and_events_cross_gpus(dev, dev1, kernel, slow_result):
    busy = kernel("busy")
    s = dev.stream()
    out = dev.alloc(LANES * 4)
    busy(out, np.int32(ROUNDS), grid=1, block=LANES, stream=s)
    done = s.record_event()
    # The other GPU's own queue waits for this GPU's stream.
    dev1.wait_event(done)
    after = dev1.record_event()
    after.synchronize()
    assert done.done
    with pytest.raises(hcq.InvalidArgumentError):
        after.elapsed_since(done)  # two GPUs' clocks
    busy(out, np.int32(ROUNDS), grid=1, block=LANES, stream=s)
    done = s.record_event()
    dev.synchronize()  # every stream
    assert done.done
    np.testing.assert_array_equal(out.numpy(np.int32), slow_result)
    assert dev.default_stream.is_default
    e = dev.record_event()
    e.synchronize()
    assert e.done and "Event" in repr(e) and "Stream" in repr(s)


def test_graphs_replay_on_streams(dev, kernel, slow_result):
    saxpy, busy = kernel("saxpy"), kernel("busy")
    s = dev.stream()
    n = LANES
    x_buf = dev.alloc(n * 4)
    y = np.full(n, 10, np.float32)
    ys, out = dev.alloc(n * 4), dev.alloc(n * 4)
    ys.write(y)
    g = hcq.GraphBuilder()
    x = g.input(x_buf)
    # a = 1: x + y rounds once whether or not the kernel fuses it.
    g.launch(saxpy, out, x, ys, 1.0, n, grid=1, block=LANES)
    graph = g.build()
    # busy writes ints into `src` on s; the graph, replayed on s, reads them after it.
    src = dev.alloc_zeros(n * 4)
    dev.synchronize()
    busy(src, np.int32(ROUNDS), grid=1, block=LANES, stream=s)
    graph.replay([src], stream=s)
    s.synchronize()
    expected = slow_result.view(np.float32) + y
    np.testing.assert_array_equal(out.numpy(np.float32), expected)
    # And back on the device's own queue.
    xs = np.arange(n, dtype=np.float32)
    x_buf.write(xs)
    graph.replay([x_buf])
    np.testing.assert_array_equal(out.numpy(np.float32), xs + y)
