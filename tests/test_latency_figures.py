"""enginetui/latency_figures.py: the percentile summary, the --goodput parser and goodput that bench and simulate
share."""

import math

import numpy as np
import pytest

from enginetui.latency_figures import Latency, goodput, parse_slos


def test_a_latency_summary_is_numpys_percentiles_with_samples_only_when_kept():
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    d = Latency.of(values)
    p50, p90, p99 = np.percentile(values, (50, 90, 99))
    assert (d.mean, d.p50, d.p90, d.p99, d.count, d.samples) == (3.0, p50, p90, p99, 5, [])
    assert Latency.of(values, keep_samples=True).samples == [1.0, 2.0, 3.0, 4.0, 5.0]
    empty = Latency.of([])
    assert empty.count == 0 and all(math.isnan(x) for x in (empty.mean, empty.p50, empty.p90, empty.p99))


def test_slos_take_vllms_names_as_one_string_or_the_flags_words():
    assert parse_slos("ttft:500 tpot:50 e2el:9000") == {"ttft": 500.0, "tpot": 50.0, "e2e": 9000.0}
    assert parse_slos(["TTFT:1.5,itl:20"]) == parse_slos("ttft:1.5 tpot:20") == {"ttft": 1.5, "tpot": 20.0}
    assert parse_slos(None) == parse_slos([]) == {}
    with pytest.raises(ValueError, match=r"^unknown SLO 'p99': use ttft, tpot or e2el, e\.g\. ttft:500$"):
        parse_slos("p99:5")
    with pytest.raises(ValueError, match=r"^SLO 'ttft:fast': the value must be milliseconds, e\.g\. ttft:500$"):
        parse_slos(["ttft:fast"])


def test_goodput_counts_requests_meeting_every_slo_and_a_one_token_request_has_no_tpot_to_miss():
    ttft, tpot, e2e = [100.0, 500.0, 200.0], [100.0, 100.0, math.nan], [300.0, 600.0, 200.0]
    assert goodput({"ttft": 200.0, "tpot": 150.0}, 2.0, ttft, tpot, e2e) == pytest.approx(1.0)  # 1st and 3rd
    assert goodput({"tpot": 50.0}, 2.0, ttft, tpot, e2e) == pytest.approx(0.5)  # only the one-token request
    assert goodput({"e2e": 250.0}, 1.0, ttft, tpot, e2e) == pytest.approx(1.0)
    assert goodput({}, 2.0, ttft, tpot, e2e) is None
    assert math.isnan(goodput({"ttft": 1.0}, 0.0, [], [], []))
