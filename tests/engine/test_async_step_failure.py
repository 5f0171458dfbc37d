"""A model step that raises with asynchronous scheduling: the engine ends as the synchronous path
does. Its requests end with an error, the others are served, the prefix cache holds exactly the
blocks that were written, and the latest event shows the engine's state."""

import msgspec
import pytest

from enginetui.core import SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.outputs import EngineCoreRequest
from enginetui.core.sched.output import SchedulerOutput
from enginetui.core.worker.model_runner import ModelRunnerOutput
from tests.fakes.scripted_runner import ScriptedRunner, scripted_token

FAILING_RUNNER = "tests.engine.test_async_step_failure:FailingRunner"
VICTIM = "victim"  # the request whose first step raises
PROMPTS = {
    VICTIM: [2, 7, 8, 9, 10, 11, 12, 13, 14, 15],  # two full blocks of 4, and a part
    "other": [2, 40, 41, 42, 43, 44, 45, 46, 47, 48],
    "twin": [2, 7, 8, 9, 10, 11, 12, 13, 14, 15],  # the victim's prompt: its blocks are prefix hits
}
MAX_TOKENS = 6


class FailingRunner(ScriptedRunner):
    """The scripted runner, raising in the first step that computes the victim (after taking the
    plan's changes, as a failing forward would)."""

    failed = False  # set once the failure was injected

    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput:
        result = super().execute(out)
        if VICTIM in out.num_scheduled_tokens and not self.failed:
            self.failed = True
            raise RuntimeError("injected fault")
        return result


def _add(core: EngineCore, req_id: str) -> None:
    core.add_request(
        EngineCoreRequest(
            request_id=req_id,
            prompt_token_ids=PROMPTS[req_id],
            sampling_params=SamplingParams(max_tokens=MAX_TOKENS),
            eos_token_ids=[2],
            arrival_time=0.0,
        )
    )


def _state(event) -> dict:
    """The state an event leaves behind (what a viewer draws), without times."""
    fields = (
        "running",
        "waiting",
        "num_free_blocks",
        "cached_free_blocks",
        "shared_blocks",
        "prefix_cache_queries",
        "prefix_cache_hits",
        "total_output_tokens",
        "total_preemptions",
    )
    return {f: msgspec.to_builtins(getattr(event, f)) for f in fields}


def _run(async_scheduling: bool):
    """The victim runs alone; the other two arrive after the first busy-loop step: synchronously,
    once the victim's step has failed; with async scheduling, while it executes (they are planned
    into step 2 before step 1's failure is seen). Returns tokens, ends, the event of the busy-loop
    step that applied the failure with a snapshot taken right after it, and the core."""
    core = EngineCore(
        EngineConfig(
            model_runner=FAILING_RUNNER,
            num_gpu_blocks_override=32,
            block_size=4,
            enable_prefix_caching=True,
            async_scheduling=async_scheduling,
            debug_invariants=True,
        )
    )
    _add(core, VICTIM)
    tokens: dict[str, list[int]] = {r: [] for r in PROMPTS}
    ends: dict[str, tuple[str, str]] = {}
    failure = None
    while core.has_work():
        outputs, event = core.step()
        for out in outputs.outputs:
            tokens[out.request_id] += out.new_token_ids
            if out.finish_reason:
                ends[out.request_id] = (out.finish_reason, out.finish_detail)
        if failure is None and VICTIM in ends:
            failure = (event, core.snapshot())
        if core.step_count == 1:
            _add(core, "other")
            _add(core, "twin")
    core.close()
    if async_scheduling:  # the others were planned (step 2) before step 1's failure was applied
        assert (failure[0].planned_step, failure[0].executed_step) == (2, 1)
    return tokens, ends, failure, core


@pytest.mark.parametrize("async_scheduling", [False, True], ids=["sync", "async"])
def test_a_failed_step_errors_its_request_and_serves_the_others(async_scheduling):
    tokens, ends, (event, snapshot), core = _run(async_scheduling)
    assert ends[VICTIM][0] == "error" and "injected fault" in ends[VICTIM][1]
    assert tokens[VICTIM] == []
    for req_id in ("other", "twin"):
        assert ends[req_id][0] == "length"
        assert tokens[req_id] == [scripted_token(PROMPTS[req_id], [2], k) for k in range(MAX_TOKENS)]
    assert [(e.req_id, e.reason) for e in event.finished] == [(VICTIM, "error")]
    assert _state(event) == _state(snapshot)  # the latest event equals the engine state
    assert core.scheduler.kv.pool.num_free_blocks == 32


def _cached_contents(core: EngineCore) -> list:
    return sorted(core.scheduler.kv.pool.cached)


def test_async_leaves_the_prefix_cache_as_the_synchronous_path_does():
    """Nothing the failed step was to write is findable; everything written later is."""
    *_, sync_core = _run(False)
    *_, async_core = _run(True)
    assert _cached_contents(async_core) == _cached_contents(sync_core)
    assert len(_cached_contents(sync_core)) > 0
