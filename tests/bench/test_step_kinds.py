"""Step kinds of `bench serve --compare vllm-server --step-times`: vLLM's logged steps read, our
recorded steps read, both sorted by the same kinds."""

from enginetui.bench.step_kinds import KINDS, StepSample, compare_steps, step_kind, vllm_steps

# two lines as vLLM 0.32's front-end logs them with --enable-logging-iteration-details, between others
VLLM_LOG = """\
(APIServer pid=25133) INFO 12-03 06:31:02 [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 tokens/s
(APIServer pid=25133) INFO 12-03 06:31:02 [loggers.py:203] Iteration(41): 1 context requests, 300 context \
tokens, 3 generation requests, 3 generation tokens, iteration elapsed time: 212.35 ms, CPU KV cache usage: 1.2%
(APIServer pid=25133) INFO 12-03 06:31:02 [loggers.py:203] Iteration(42): 0 context requests, 0 context \
tokens, 4 generation requests, 4 generation tokens, iteration elapsed time: 27.80 ms, CPU KV cache usage: 1.2%
"""


def test_vllms_logged_steps_are_read_with_their_shape_and_time():
    assert list(vllm_steps(VLLM_LOG)) == [StepSample(300, 3, 212.35), StepSample(0, 4, 27.8)]


def test_steps_fall_in_kinds_by_decodes_or_prompt_tokens():
    assert step_kind(StepSample(0, 1, 0.0)) == "decode 1"
    assert step_kind(StepSample(0, 3, 0.0)) == "decode 3-4"
    assert step_kind(StepSample(0, 40, 0.0)) == "decode 33+"
    assert step_kind(StepSample(300, 3, 0.0)) == "prompt 129-512 tok"  # the decodes ride along
    assert step_kind(StepSample(5000, 0, 0.0)) == "prompt 2049+ tok"
    assert KINDS[0] == "decode 1" and KINDS[-1] == "prompt 2049+ tok"


def test_the_comparison_takes_medians_per_kind_and_totals():
    ours = [StepSample(0, 1, 20.0), StepSample(0, 1, 22.0), StepSample(0, 1, 30.0), StepSample(100, 0, 50.0)]
    theirs = [StepSample(0, 1, 25.0), StepSample(0, 2, 26.0)]
    result = compare_steps(ours, theirs)
    rows = {r.kind: r for r in result.rows}
    assert list(rows) == ["decode 1", "decode 2", "prompt 1-128 tok"]  # kinds neither side ran are left out
    assert (rows["decode 1"].ours_ms, rows["decode 1"].vllm_ms, rows["decode 1"].ratio) == (22.0, 25.0, 22.0 / 25.0)
    assert rows["decode 2"].ours_steps == 0 and rows["decode 2"].ours_ms is None and rows["decode 2"].ratio is None
    assert rows["prompt 1-128 tok"].vllm_steps == 0
    assert (result.ours_total_ms, result.vllm_total_ms, result.ours_steps, result.vllm_steps) == (122.0, 51.0, 4, 2)
