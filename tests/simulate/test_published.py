"""The roofline model's predictions of published vLLM GPU figures, pinned: a change to the roofline, the
memory sizing, the ShareGPT reader or the scheduler that moves them must update docs/simulate.md's table too."""

import pytest

from tools.sim_published import PUBLISHED, compare, comparison_table

# (hardware, metric) -> the prediction docs/simulate.md's "Against published GPU figures" table shows
PREDICTED = {
    ("h200", "duration_s"): 0.6350,
    ("h200", "request_throughput"): 28.96,
    ("h100", "duration_s"): 0.8513,
    ("h100", "request_throughput"): 22.74,
}


@pytest.mark.parametrize("result", PUBLISHED, ids=lambda r: f"{r.hardware}-{r.metric}")
def test_prediction_of_a_published_figure_is_pinned(result):
    comparison = compare(result)
    assert comparison.predicted == pytest.approx(PREDICTED[result.hardware, result.metric], rel=2e-3)
    assert comparison.error_pct == pytest.approx((comparison.predicted / result.value - 1) * 100)
    assert result.source.startswith("https://") and result.assumed


def test_the_list_names_two_accelerators_and_the_table_shows_each_result():
    assert {r.hardware for r in PUBLISHED} == {"h100", "h200"}
    table = comparison_table([compare(r) for r in PUBLISHED[:1]])
    assert "| 0.833421 | 0.635 | -24% |" in table
