import threading
import time

import numpy as np

import hcq


def test_two_threads_share_a_device(dev, kernel):
    saxpy = kernel("saxpy")
    n = 512
    failures = []

    def worker(seed):
        try:
            x = np.arange(n, dtype=np.float32) + seed
            y = np.full(n, seed, np.float32)
            xs, ys, out = dev.alloc(n * 4), dev.alloc(n * 4), dev.alloc(n * 4)
            xs.write(x)
            ys.write(y)
            for round_ in range(20):
                a = float(round_ - 10)
                saxpy(out, xs, ys, a, n, grid=n // 64, block=64)
                got = out.numpy(np.float32)
                if not np.array_equal(got, np.float32(a) * x + y):
                    failures.append((seed, round_))
            dev.synchronize()
        except Exception as e:  # reported below, with the thread's seed
            failures.append((seed, repr(e)))

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_timed_launch_releases_the_gil(dev, kernel):
    out = dev.alloc(64 * 4)
    busy = kernel("busy")
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        started = ticks
        seconds = busy(out, 200_000, grid=1, block=64, timed=True)
        progressed = ticks - started
    finally:
        stop.set()
        counter.join()
    assert seconds > 0
    assert progressed > 10, f"the other thread ran {progressed} times during the launch"


def test_objects_are_shared_across_threads(dev):
    buf = dev.alloc(4096)
    results = []

    def write_part(index):
        buf[index * 1024:(index + 1) * 1024].write(np.full(1024, index, np.uint8))
        results.append(hcq.Device("amd-emu:0") == buf.device)

    threads = [threading.Thread(target=write_part, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4
    np.testing.assert_array_equal(buf.numpy(np.uint8), np.repeat(np.arange(4, dtype=np.uint8), 1024))


def test_dropping_a_program_waits_without_the_gil(dev, code_object):
    # The last reference to a program waits for the launches that may still run its code.
    busy = dev.program(code_object, "busy")
    out = dev.alloc(64 * 4)
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        busy(out, 200_000, grid=1, block=64)
        started = ticks
        del busy
        progressed = ticks - started
    finally:
        stop.set()
        counter.join()
    assert progressed > 10, f"the other thread ran {progressed} times during the drop"
