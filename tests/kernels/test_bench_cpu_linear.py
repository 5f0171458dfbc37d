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

    monkeypatch.setattr(sys, "argv", ["bench_cpu_linear.py", "--rows", "9"])
    assert bench_cpu_linear.main() == 1
    assert capsys.readouterr().out.strip() == "--rows: batch sizes from 1 to 8"
