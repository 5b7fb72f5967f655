"""hcq.jit: the function runs on the first call, runs while capturing on the second, and later
calls replay the graph with their own buffers and variable values."""

import threading

import numpy as np
import pytest

import hcq


def upload(dev, array):
    buf = dev.alloc(array.nbytes)
    buf.write(array)
    return buf


CAP = 1024


def make_step(kernel, scratch, ran):
    """out = 3*x + y over n elements, then a copy of out into out2 through scratch."""
    saxpy = kernel("saxpy")

    @hcq.jit(vars=[("n", 1, CAP)])
    def step(r):
        ran.append(1)
        n = r.var(0)
        r.launch(saxpy, r.output(0), r.input(0), r.input(1), 3.0, n, grid=n.ceil_div(64), block=64)
        r.copy(r.output(0), scratch, CAP * 4)
        r.copy(scratch, r.output(1), CAP * 4)

    return step


def test_captures_on_the_second_call_and_replays_with_each_calls_buffers_and_values(dev, kernel):
    ran = []
    step = make_step(kernel, dev.alloc(CAP * 4), ran)
    assert isinstance(step, hcq.Jit) and not step.is_captured
    rng = np.random.default_rng(7)
    for call, count in enumerate((CAP, 5, 700, 1, 333, CAP)):
        # Small integers: 3*x + y is exact whether the kernel fuses it or not.
        x = rng.integers(-1000, 1000, CAP).astype(np.float32)
        y = rng.integers(-1000, 1000, CAP).astype(np.float32)
        out, out2 = upload(dev, np.zeros(CAP, np.float32)), dev.alloc(CAP * 4)
        step([upload(dev, x), upload(dev, y)], [out, out2], [count])
        expected = np.zeros(CAP, np.float32)
        expected[:count] = np.float32(3) * x[:count] + y[:count]
        np.testing.assert_array_equal(out.numpy(np.float32), expected)
        np.testing.assert_array_equal(out2.numpy(np.float32), expected)
        # The function ran on the first two calls only; the rest were replays.
        assert len(ran) == min(call + 1, 2)
        assert step.is_captured == (call >= 1)
    assert step.fallback_reason is None


def test_the_functions_exception_comes_back_unchanged(dev, kernel):
    class Boom(Exception):
        pass

    @hcq.jit
    def fails(r):
        raise Boom("from the function")

    with pytest.raises(Boom, match="from the function"):
        fails([dev.alloc(4)])
    # hcq's own errors raised inside the function come back as hcq errors.
    saxpy = kernel("saxpy")

    @hcq.jit
    def wrong(r):
        r.launch(saxpy, r.output(0), grid=1, block=1)

    with pytest.raises(hcq.InvalidArgumentError, match="takes 5 arguments"):
        wrong([], [dev.alloc(4)])


def test_calls_are_checked(dev, kernel):
    step = make_step(kernel, dev.alloc(CAP * 4), [])
    bufs = [dev.alloc(CAP * 4) for _ in range(4)]
    with pytest.raises(hcq.InvalidArgumentError, match="takes 1 variables, got 0"):
        step(bufs[:2], bufs[2:], [])
    with pytest.raises(hcq.InvalidArgumentError, match="outside its bounds"):
        step(bufs[:2], bufs[2:], [CAP + 1])
    # A placeholder the call does not have.
    with pytest.raises(hcq.InvalidArgumentError, match="no input 1"):
        step(bufs[:1], bufs[2:], [4])
    with pytest.raises(hcq.InvalidArgumentError, match="JIT with 1 variables"):

        @hcq.jit(vars=[("n", 1, 4)])
        def bad_var(r):
            r.var(1)

        bad_var([], [], [1])
    with pytest.raises(hcq.InvalidArgumentError, match="empty"):
        hcq.jit(lambda r: None, vars=[("n", 5, 1)])
    with pytest.raises(TypeError):
        hcq.Jit(42)


def test_the_recorder_is_valid_only_during_its_call(dev):
    kept = []

    @hcq.jit
    def keep(r):
        kept.append(r)

    keep([])
    with pytest.raises(RuntimeError, match="call that has returned"):
        kept[0].copy(dev.alloc(4), dev.alloc(4), 4)


def test_placeholders_and_variables_belong_to_their_jit(dev, kernel):
    saxpy = kernel("saxpy")
    others = []

    @hcq.jit(vars=[("n", 1, 8)])
    def first(r):
        others.append((r.input(0), r.var(0)))

    first([dev.alloc(16)], [], [1])
    foreign_input, foreign_var = others[0]

    @hcq.jit(vars=[("n", 1, 8)])
    def second(r):
        r.launch(saxpy, r.output(0), foreign_input, r.input(0), 1.0, r.var(0), grid=1, block=8)

    with pytest.raises(hcq.InvalidArgumentError, match="another JIT"):
        second([dev.alloc(32)], [dev.alloc(32)], [1])

    @hcq.jit(vars=[("n", 1, 8)])
    def third(r):
        r.launch(saxpy, r.output(0), r.input(0), r.input(0), 1.0, foreign_var, grid=1, block=8)

    with pytest.raises(hcq.InvalidArgumentError, match="only a variable of this JIT"):
        third([dev.alloc(32)], [dev.alloc(32)], [1])


def test_a_function_that_launches_nothing_stays_eager(dev):
    ran = []

    @hcq.jit
    def nothing(r):
        ran.append(1)

    for _ in range(3):
        nothing([])
    assert ran == [1, 1, 1]
    assert not nothing.is_captured
    assert "launches nothing" in nothing.fallback_reason


def test_a_call_from_inside_its_own_function_is_refused(dev):
    @hcq.jit
    def recursive(r):
        recursive([])

    with pytest.raises(RuntimeError, match="inside its own function"):
        recursive([])


def test_threads_share_a_jit(dev, kernel):
    step = make_step(kernel, dev.alloc(CAP * 4), [])
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(10):
                count = int(rng.integers(1, CAP + 1))
                x = rng.integers(-1000, 1000, CAP).astype(np.float32)
                out, out2 = upload(dev, np.zeros(CAP, np.float32)), dev.alloc(CAP * 4)
                # Buffers of this thread only; the JIT serializes the calls.
                step([upload(dev, x), upload(dev, x)], [out, out2], [count])
                expected = np.zeros(CAP, np.float32)
                expected[:count] = np.float32(3) * x[:count] + x[:count]
                np.testing.assert_array_equal(out2.numpy(np.float32), expected)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert step.is_captured
