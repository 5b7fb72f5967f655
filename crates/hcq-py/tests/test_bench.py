import json

import hcq.bench


def test_python_launch_figure(dev):
    nanoseconds, batch = hcq.bench.python_launch_ns(dev, rounds=2)
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
    record = json.loads(capsys.readouterr().out)
    assert record["name"] == "python_launch" and record["unit"] == "ns"
    assert record["value"] > 0 and record["baseline"] is None and record["device"] == "amd-emu:0"
