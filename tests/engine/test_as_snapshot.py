"""A step event turned into a snapshot (what the probe's and the rebuild's dashboard engines answer when
asked again) is the snapshot EngineCore itself builds right after that step, but for the step's block
changes, plan numbers and phases, which it keeps."""

import msgspec
import pytest

from enginetui.core import SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.events import as_snapshot
from enginetui.core.outputs import EngineCoreRequest
from tests.fakes.scripted_runner import SCRIPTED_RUNNER

KEPT = ("blocks_allocated", "blocks_freed", "planned_step", "executed_step", "phases")  # the step's, not news


@pytest.mark.parametrize("async_scheduling", [False, True], ids=["sync", "async"])
def test_a_step_event_as_snapshot_is_the_engines_own_snapshot(async_scheduling):
    core = EngineCore(
        EngineConfig(
            model_runner=SCRIPTED_RUNNER,
            num_gpu_blocks_override=12,
            block_size=4,
            max_num_batched_tokens=16,
            async_scheduling=async_scheduling,
        )
    )
    for i in range(6):  # prompts in chunks, preemptions on a small pool: every kind of news in some step
        core.add_request(
            EngineCoreRequest(
                request_id=f"r{i}",
                prompt_token_ids=[3 + i] * 10,
                eos_token_ids=[],
                sampling_params=SamplingParams(max_tokens=12, ignore_eos=True),
                arrival_time=0.0,
            )
        )
    compared, news = 0, set()
    while core.has_work():
        _, event = core.step()
        assert event is not None
        news |= {
            name
            for name in ("added", "admitted", "chunks", "new_token_ids", "preempted", "finished")
            if getattr(event, name)
        }
        own = core.snapshot()
        assert as_snapshot(event) == msgspec.structs.replace(
            own, time=event.time, **{name: getattr(event, name) for name in KEPT}
        )
        compared += 1
    core.close()
    assert compared > 10 and news == {"added", "admitted", "chunks", "new_token_ids", "preempted", "finished"}
