"""The Perfetto export of an engine run with asynchronous scheduling draws the plan of step N+1 on the
busy-loop track before step N's outputs are taken in (its update), as the engine ran it; without
asynchronous scheduling every update comes before the next plan."""

import pytest

from enginetui.core import LLM, SamplingParams
from enginetui.core.record.reader import read_recording
from enginetui.export.perfetto import BUSY_LOOP_TID, ENGINE_PID, MODEL_TID, perfetto_trace
from tests.export.trace_format import check_trace_event_format
from tests.record.recordings import write
from tests.support.event_capture import recorded_events
from tests.support.parity import mixed_prompts


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_the_next_plan_comes_before_the_update_only_with_async_scheduling(tiny_opt_dir, tmp_path, async_scheduling):
    llm = LLM(model=tiny_opt_dir, multiprocess=False, skip_tokenizer_init=True, async_scheduling=async_scheduling)
    with recorded_events(llm.engine) as events:  # from the update that adds the requests on
        llm.generate(
            mixed_prompts(4, 512, 1, 40), SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False
        )
    llm.shutdown()
    trace = perfetto_trace(read_recording(write(tmp_path / "async.etrec", events)))
    check_trace_event_format(trace)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == ENGINE_PID and "step" in e["args"]]
    phases = {(e["name"].split()[0], e["args"]["step"]): e for e in slices if e["tid"] in (BUSY_LOOP_TID, MODEL_TID)}
    assert all(e["tid"] == MODEL_TID for (phase, _), e in phases.items() if phase == "execute")
    pairs = [
        (phases[("schedule", n + 1)], update)
        for (phase, n), update in phases.items()
        if phase == "update" and ("schedule", n + 1) in phases
    ]
    assert len(pairs) >= 6  # 8 output tokens each: a prefill and 7 decodes at least, each followed by another
    ahead = [plan["ts"] < update["ts"] for plan, update in pairs]
    assert all(ahead) if async_scheduling else not any(ahead)
