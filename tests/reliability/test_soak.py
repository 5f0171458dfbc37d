"""The soak test's short form (the long form: python -m tests.reliability.soak)."""

import pytest

from tests.reliability.soak import run_soak


@pytest.mark.slow
def test_short_soak_loses_nothing_and_leaks_nothing(text_opt_dir):
    report = run_soak(text_opt_dir, num_requests=80, seconds=120, seed=1, multiprocess=True)
    assert report.submitted > 60 and report.invalid > 0
    assert report.requests_lost == 0 and report.requests_duplicated == 0
    assert report.blocks_leaked == 0
    assert report.preemptions > 0  # the pool is far smaller than the demand
    assert report.finished.get("abort", 0) > 0 and report.finished.get("rejected", 0) > 0
    assert sum(report.finished.values()) == report.submitted
