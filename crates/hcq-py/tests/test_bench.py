import json

import pytest

import hcq.bench


@pytest.mark.parametrize("form", ["call", "launch"])
def test_python_launch_figure(dev, form):
    nanoseconds, batch = hcq.bench.python_launch_ns(dev, form, rounds=2)
    assert 0 < nanoseconds < 1e7 and batch >= 1
    # The engines are released again: work runs.
    out = dev.alloc(4)
    out.write(b"\0\0\0\0")
    dev.synchronize()


def test_json_output(capsys, monkeypatch):
    # Without an hcq binary the Rust baseline is null.
    monkeypatch.setenv("HCQ_CLI", "")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert hcq.bench.main(["launch", "--json", "--device", "amd-emu:0"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in records] == ["python_launch", "python_launch_positional"]
    for record in records:
        assert record["unit"] == "ns" and record["value"] > 0
        assert record["baseline"] is None and record["device"] == "amd-emu:0"
