"""EngineCore takes its model runner from the configuration: the real one by default, or a named
class (here the scripted runner of tests/fakes/scripted_runner.py, which the dashboard's tests drive)."""

import pytest

from enginetui.core import SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.outputs import EngineCoreRequest
from enginetui.core.worker.model_runner import ModelRunner
from enginetui.core.worker.runner_class import runner_class
from tests.fakes.scripted_runner import SCRIPTED_RUNNER, ScriptedRunner, scripted_token


def test_auto_is_the_real_runner_and_a_name_is_imported():
    assert runner_class("auto") is ModelRunner
    assert runner_class(SCRIPTED_RUNNER) is ScriptedRunner


@pytest.mark.parametrize(
    "name, error",
    [
        ("tests.fakes.scripted_runner", "package.module:Class"),
        ("tests.no_such_module:Runner", "cannot be imported"),
        ("tests.fakes.scripted_runner:NoSuchClass", "cannot be imported"),
        ("tests.fakes.scripted_runner:SCRIPTED_RUNNER", "no execute"),
    ],
)
def test_a_bad_runner_name_is_a_clear_error(name, error):
    with pytest.raises(ValueError, match=error):
        runner_class(EngineConfig(model_runner=name).model_runner)


def test_the_engine_steps_the_scripted_tokens_through_chunking_and_preemption():
    """A pool too small for all three, stepped by hand: chunked prefill, preemption and recompute,
    and still each request gets exactly its script (the runner drops a preempted request and takes
    it anew)."""
    core = EngineCore(
        EngineConfig(
            model_runner=SCRIPTED_RUNNER,
            num_gpu_blocks_override=6,
            block_size=4,
            max_num_batched_tokens=8,
            scheduler_reserve_full_isl=False,
            debug_invariants=True,
        )
    )
    assert isinstance(core.runner, ScriptedRunner)
    prompts = {"a": [2, 7, 8, 9, 10], "b": [2, 11, 12], "c": [2, 13, 14, 15, 16, 17, 18]}
    params = SamplingParams(max_tokens=8)
    for req_id, prompt in prompts.items():
        core.add_request(
            EngineCoreRequest(
                request_id=req_id, prompt_token_ids=prompt, sampling_params=params, eos_token_ids=[2], arrival_time=0.0
            )
        )
    tokens: dict[str, list[int]] = {req_id: [] for req_id in prompts}
    ends = {}
    chunked = False
    while core.has_work():
        outputs, event = core.step()
        chunked = chunked or any(chunk.num_remaining for chunk in event.chunks)
        for out in outputs.outputs:
            tokens[out.request_id] += out.new_token_ids
            if out.finish_reason:
                ends[out.request_id] = out.finish_reason
    for req_id, prompt in prompts.items():
        assert tokens[req_id] == [scripted_token(prompt, [2], k) for k in range(8)]
    assert ends == {"a": "length", "b": "length", "c": "length"}
    assert chunked and core.total_preemptions > 0
