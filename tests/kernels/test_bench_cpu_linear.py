"""tools/bench_cpu_linear.py: a decode step's GEMMs in its order, timed through each path."""

import sys

import pytest
import torch

from enginetui.kernels import cpu_kernels
from tools import bench_cpu_linear
from tools.bench_cpu_linear import model_weights


def test_the_weights_are_a_steps_gemms_in_order():
    weights = model_weights(layers=2, hidden=8, ffn=32, vocab=50, dtype=torch.bfloat16)
    assert [tuple(w.shape) for w in weights] == [(24, 8), (8, 8), (32, 8), (8, 32)] * 2 + [(50, 8)]
    assert {w.dtype for w in weights} == {torch.bfloat16}


@pytest.mark.skipif(not cpu_kernels.available(), reason="the C++ kernels are not built here")
def test_every_path_is_timed_and_printed_per_batch_size(monkeypatch, capsys):
    args = ["--layers", "1", "--hidden", "16", "--ffn", "32", "--vocab", "40", "--rows", "1", "8", "--repeats", "1"]
    monkeypatch.setattr(sys, "argv", ["bench_cpu_linear.py", *args])
    assert bench_cpu_linear.main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["rows", "kernel", "ms", "GB/s", "oneDNN", "ms", "GB/s", "MKL", "ms", "GB/s"]
    assert [line.split()[0] for line in lines[2:]] == ["1", "8"]
    assert all(float(value) >= 0 for line in lines[2:] for value in line.split()[1:])

    monkeypatch.setattr(sys, "argv", ["bench_cpu_linear.py", "--rows", "0"])
    assert bench_cpu_linear.main() == 1
    assert capsys.readouterr().out.strip() == "--rows: batch sizes of 1 or more"


@pytest.mark.skipif(not cpu_kernels.available(), reason="the C++ kernels are not built here")
def test_past_8_rows_the_kernel_is_not_timed(monkeypatch, capsys):
    args = ["--layers", "1", "--hidden", "16", "--ffn", "32", "--vocab", "40", "--rows", "9", "--repeats", "1"]
    monkeypatch.setattr(sys, "argv", ["bench_cpu_linear.py", *args, "--between-mib", "1", "--between-us", "5"])
    assert bench_cpu_linear.main() == 0
    row = capsys.readouterr().out.splitlines()[2].split()
    assert row[:3] == ["9", "-", "-"] and float(row[3]) > 0 and float(row[5]) > 0

    monkeypatch.setattr(sys, "argv", ["bench_cpu_linear.py", "--between-us", "-1"])
    assert bench_cpu_linear.main() == 1
    assert capsys.readouterr().out.strip() == "--between-us, --between-mib: 0 or more"


def test_the_work_between_gemms_is_not_counted():
    assert bench_cpu_linear.between_gemms(0, 0) is None
    weights = model_weights(layers=1, hidden=8, ffn=16, vocab=20, dtype=torch.float32)
    plain = bench_cpu_linear.time_paths(weights, 9, repeats=1)
    waited = bench_cpu_linear.time_paths(weights, 9, repeats=1, between=bench_cpu_linear.between_gemms(20_000, 1))
    assert set(plain) == set(waited) == {"oneDNN", "MKL"}
    assert all(s < 0.05 for s in waited.values())  # 5 GEMMs, each after 20 ms of waiting: 0.1 s if counted
