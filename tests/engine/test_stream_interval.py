"""--stream-interval: a request's outputs are passed on every that many tokens, the first and the
last at once (vLLM's OutputProcessor rule), whether the engine sets it or the request raises it."""

import pytest

from enginetui.core.config import ConfigError, EngineConfig
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.outputs import EngineCoreOutput, EngineCoreRequest
from enginetui.core.sampling_params import SamplingParams


def passed_on(engine_interval: int, request_interval: int | None, steps: list[list[int]], n: int = 1) -> list[int]:
    """Run one request's engine outputs (tokens per step, the last step finishes it) through the
    output processor; the token count of every RequestOutput it passes on."""
    processor = OutputProcessor(None, stream=True, stream_interval=engine_interval)
    params = SamplingParams(max_tokens=1000, n=n, stream_interval=request_interval)
    children = processor.register(
        EngineCoreRequest(
            request_id="r", prompt_token_ids=[1, 2], sampling_params=params, eos_token_ids=[], arrival_time=0.0
        ),
        None,
    )
    counts = []
    for i, tokens in enumerate(steps):
        last = i == len(steps) - 1
        outs = [
            EngineCoreOutput(request_id=c.request_id, new_token_ids=tokens, finish_reason="length" if last else None)
            for c in children
        ]
        results, _ = processor.process(outs)
        counts += [len(c.token_ids) for r in results for c in r.outputs]
    return counts


def test_interval_one_passes_on_every_output_even_a_partial_prefill():
    assert passed_on(1, None, [[], [5], [6], [7]]) == [0, 1, 2, 3]


def test_the_first_then_every_interval_then_the_last():
    one_token_steps = [[t] for t in range(11)]
    assert passed_on(4, None, one_token_steps) == [1, 5, 9, 11]  # vLLM: the first, 1 + 4k, the last
    assert passed_on(4, None, [[], [], [1]] + one_token_steps[:5]) == [0, 0, 1, 5, 6]  # before a token, each goes
    assert passed_on(3, None, [[1], [2, 3], [4, 5], [6]]) == [1, 5, 6]  # several tokens a step count as they come


def test_a_request_raises_the_engines_interval_and_never_lowers_it():
    steps = [[t] for t in range(10)]
    assert passed_on(2, 5, steps) == [1, 6, 10]
    assert passed_on(5, 2, steps) == [1, 6, 10]
    assert passed_on(1, 3, steps) == [1, 4, 7, 10]


def test_every_sample_of_an_n_request_follows_the_interval():
    counts = passed_on(3, None, [[t] for t in range(5)], n=2)
    assert counts == [1, 1, 4, 4, 5, 5]


def test_an_interval_below_one_is_refused():
    with pytest.raises(ValueError, match="stream_interval must be at least 1"):
        SamplingParams(stream_interval=0)
    with pytest.raises(ConfigError, match="stream_interval must be a positive integer"):
        EngineConfig(stream_interval=0)
