"""Host cost of one kernel launch from Python: ``python -m hcq.bench launch [--json]``.

Launches an empty kernel with one buffer and one int argument in batches, and reports the
best nanoseconds per launch next to the Rust figure from ``hcq bench launch --json`` measured
in the same run (its ``launch_enqueue_driver``, when an ``hcq`` binary is found: ``HCQ_CLI``,
else ``hcq`` on the PATH). On an emulated device the engines are held while the host is timed,
as the Rust figure does, so the emulator does not take the cores the figure is about.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import hcq

EMPTY_KERNEL = 'extern "C" __attribute__((global)) void empty(int* data, int n) {}'


def python_launch_ns(dev, form, rounds=20):
    """Best nanoseconds per launch over `rounds` batches, each small enough to fit the command
    ring while the engines are held. `form` is "call" (`prg(buf, 1, grid=1, block=1)`) or
    "launch" (`prg.launch(1, 1, buf, 1)`)."""
    empty = dev.program(dev.compile(EMPTY_KERNEL), "empty")
    buf = dev.alloc(64)
    empty(buf, 1, grid=1, block=1)
    dev.synchronize()
    launch = empty.launch
    per_launch, capacity = dev._ring_dwords
    # Half the ring: the batch never waits for ring space.
    batch = max(1, min(2000, capacity // max(per_launch, 1) // 2))
    emulated = dev.info.emulated
    best = float("inf")
    for _ in range(rounds):
        if emulated:
            dev._hold_engines(True)
        try:
            if form == "call":
                start = time.perf_counter_ns()
                for _ in range(batch):
                    empty(buf, 1, grid=1, block=1)
                elapsed = time.perf_counter_ns() - start
            else:
                start = time.perf_counter_ns()
                for _ in range(batch):
                    launch(1, 1, buf, 1)
                elapsed = time.perf_counter_ns() - start
        finally:
            if emulated:
                dev._hold_engines(False)
        dev.synchronize()
        best = min(best, elapsed / batch)
    return best, batch


def rust_launch_ns(device_name):
    """`hcq bench launch`'s figure (ns), or None without an `hcq` binary."""
    cli = os.environ.get("HCQ_CLI") or shutil.which("hcq")
    if not cli:
        return None
    done = subprocess.run(
        [cli, "bench", "launch", "--json"],
        env=dict(os.environ, HCQ_DEVICE=device_name),
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if record.get("name") == "launch_enqueue_driver":
            return float(record["value"])
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hcq.bench", description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["launch"])
    parser.add_argument("--json", action="store_true", help="one JSON object per figure")
    parser.add_argument("--device", default=None, help="device name (default: hcq's default)")
    args = parser.parse_args(argv)
    dev = hcq.Device(args.device)
    figures = [
        ("python_launch", "prg(buf, 1, grid=1, block=1)", *python_launch_ns(dev, "call")),
        ("python_launch_positional", "prg.launch(1, 1, buf, 1)", *python_launch_ns(dev, "launch")),
    ]
    rust_ns = rust_launch_ns(dev.name)
    for name, form, python_ns, batch in figures:
        ratio = python_ns / rust_ns if rust_ns else None
        if args.json:
            print(json.dumps({"name": name, "call": form, "value": python_ns, "unit": "ns",
                              "baseline": rust_ns, "ratio": ratio, "device": dev.name}))
        else:
            line = f"launch from Python on {dev.name}, {form}: {python_ns:.0f} ns"
            if ratio is not None:
                line += f" ({ratio:.2f}x Rust)"
            print(f"{line} (best batch of {batch})")
    if not args.json:
        if rust_ns is None:
            print("hcq bench launch: no hcq binary found (set HCQ_CLI or put hcq on the PATH)")
        else:
            print(f"launch from Rust (hcq bench launch, launch_enqueue_driver): {rust_ns:.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
