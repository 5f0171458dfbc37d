"""Property-based: any sampling params and prompt either run to a final output or raise a clear
ValueError before reaching the engine; the engine never dies."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from enginetui.core import LLM, SamplingParams
from enginetui.core.engine.llm import _as_prompt_list

NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.integers(-5, 300),
    st.text(max_size=2),
    st.none(),
    st.booleans(),
)
PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "temperature": NUMBER,
        "top_p": NUMBER,
        "top_k": NUMBER,
        "min_p": NUMBER,
        "seed": NUMBER,
        "presence_penalty": NUMBER,
        "frequency_penalty": NUMBER,
        "repetition_penalty": NUMBER,
        "max_tokens": st.one_of(st.integers(-2, 12), st.none(), st.text(max_size=1)),
        "min_tokens": st.one_of(st.integers(-2, 12), st.floats(width=32)),
        "stop": st.one_of(st.none(), st.text(max_size=3), st.lists(st.text(max_size=3), max_size=3), st.integers()),
        "stop_token_ids": st.one_of(st.none(), st.lists(st.integers(-3, 5000), max_size=3)),
        "logprobs": st.one_of(st.none(), st.integers(-1, 25)),
        "ignore_eos": st.one_of(st.booleans(), st.integers(0, 2)),
    },
)
PROMPT = st.one_of(
    st.text(max_size=40),  # any unicode, control characters and lone surrogates included
    st.lists(st.integers(-10, 5000), max_size=20),
    st.lists(st.one_of(st.integers(0, 100), st.text(max_size=1), st.floats()), max_size=5),
    st.none(),
    st.integers(),
)


@pytest.fixture(scope="module")
def llm(text_opt_dir):
    engine = LLM(
        model=text_opt_dir, multiprocess=False, num_gpu_blocks_override=64, max_model_len=128, debug_invariants=True
    )
    yield engine
    engine.shutdown()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kwargs=PARAMS, prompt=PROMPT)
def test_valid_input_finishes_and_invalid_input_raises_value_error(llm, kwargs, prompt):
    try:
        params = SamplingParams(**kwargs)
    except ValueError as exc:
        assert str(exc)
        return
    try:
        outs = llm.generate(prompt, params, use_tqdm=False)
    except ValueError as exc:
        assert str(exc)
    else:
        assert len(outs) == len(_as_prompt_list(prompt)) and all(o.finished for o in outs)
        assert all(o.outputs[0].finish_reason in ("stop", "length", "rejected") for o in outs)
    # Whatever happened, the engine is idle, consistent, and still serves.
    core = llm.engine.client.core
    core.scheduler.check_invariants()
    assert not core.scheduler.has_unfinished_requests() and core.scheduler.kv.pool.num_free_blocks == 64
    assert llm.generate([[2, 5]], SamplingParams(max_tokens=1), use_tqdm=False)[0].finished
