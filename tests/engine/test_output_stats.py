"""What the server's metrics read from EngineCore's outputs: each step's computed tokens (a step
that computed tokens sends its outputs even with none in them), and on the last output of each
request the times it was preempted, the same numbers the step events show."""

import pytest

from enginetui.core import SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.entrypoints.openai.metrics import ServerMetrics
from enginetui.core.outputs import EngineCoreOutputs, EngineCoreRequest
from tests.fakes.scripted_runner import SCRIPTED_RUNNER

PROMPT_LEN, MAX_TOKENS, NUM_REQUESTS = 10, 12, 6


def _run(async_scheduling: bool) -> tuple[list[EngineCoreOutputs], list, EngineInfo]:
    """Six requests on a pool of 12 blocks of 4 tokens, prompts in chunks of at most 16 tokens a
    step: they preempt one another, and some steps compute a prompt's chunk and output nothing."""
    core = EngineCore(
        EngineConfig(
            model_runner=SCRIPTED_RUNNER,
            num_gpu_blocks_override=12,
            block_size=4,
            max_num_batched_tokens=16,
            async_scheduling=async_scheduling,
            debug_invariants=True,
        )
    )
    for i in range(NUM_REQUESTS):
        core.add_request(
            EngineCoreRequest(
                request_id=f"r{i}",
                prompt_token_ids=[3 + i] * PROMPT_LEN,
                eos_token_ids=[],
                sampling_params=SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True),
                arrival_time=0.0,
            )
        )
    info = core.describe(0)
    outputs, events = [], []
    while core.has_work():
        out, event = core.step()
        outputs.append(out)
        events.append(event)
    core.close()
    return outputs, events, info


@pytest.mark.parametrize("async_scheduling", [False, True], ids=["sync", "async"])
def test_outputs_carry_each_steps_tokens_and_each_finished_requests_preemptions(async_scheduling):
    outputs, events, _ = _run(async_scheduling)
    preempted: dict[str, int] = {}
    for event in events:
        for p in event.preempted:
            preempted[p.req_id] = preempted.get(p.req_id, 0) + 1
    assert sum(preempted.values()) == events[-1].total_preemptions > 0
    last = {o.request_id: o for out in outputs for o in out.outputs if o.finish_reason is not None}
    assert set(last) == {f"r{i}" for i in range(NUM_REQUESTS)}
    assert {r: o.num_preemptions for r, o in last.items()} == {r: preempted.get(r, 0) for r in last}
    # every plan's tokens once, on the outputs of the step that applied it: all the events' plans
    assert sum(o.num_scheduled_tokens for o in outputs) == sum(e.num_scheduled_tokens for e in events) > 0


def test_a_step_that_computed_a_prompts_middle_chunk_still_reports_its_tokens():
    core = EngineCore(EngineConfig(model_runner=SCRIPTED_RUNNER, max_num_batched_tokens=8, block_size=4))
    core.add_request(
        EngineCoreRequest(
            request_id="long",
            prompt_token_ids=[5] * 30,
            eos_token_ids=[],
            sampling_params=SamplingParams(max_tokens=2, ignore_eos=True),
            arrival_time=0.0,
        )
    )
    steps = []
    while core.has_work():
        steps.append(core.step()[0])
    core.close()
    # 8 + 8 + 8 + 6 prompt tokens, then one decode: the middle chunks output nothing
    assert [(o.num_scheduled_tokens, len(o.outputs)) for o in steps] == [(8, 1), (8, 0), (8, 0), (6, 1), (1, 1)]


def test_the_servers_metrics_count_them():
    outputs, events, info = _run(async_scheduling=False)
    metrics = ServerMetrics("m", info)
    for out in outputs:
        metrics.observe_engine_outputs(out)
    steps = [o.num_scheduled_tokens for o in outputs if o.num_scheduled_tokens]
    assert _sample(metrics, "vllm:iteration_tokens_total_count") == len(steps)
    assert (
        _sample(metrics, "vllm:iteration_tokens_total_sum") == sum(steps) == sum(e.num_scheduled_tokens for e in events)
    )  # recomputed prompts included
    assert _sample(metrics, "vllm:request_num_preemptions_count") == NUM_REQUESTS
    assert _sample(metrics, "vllm:request_num_preemptions_sum") == events[-1].total_preemptions


def _sample(metrics: ServerMetrics, name: str) -> float:
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"{name} not found")
