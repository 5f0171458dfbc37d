"""The Perfetto export of an engine run with asynchronous scheduling draws the plan of step N+1
on the busy-loop track while step N executes on the model track."""

from enginetui.core import LLM, SamplingParams
from enginetui.core.record.reader import read_recording
from enginetui.export.perfetto import BUSY_LOOP_TID, ENGINE_PID, MODEL_TID, perfetto_trace
from tests.export.trace_format import check_trace_event_format
from tests.record.recordings import write
from tests.support.event_capture import recorded_events
from tests.support.parity import mixed_prompts


def test_schedule_of_the_next_step_overlaps_the_execution(tiny_opt_dir, tmp_path):
    llm = LLM(model=tiny_opt_dir, multiprocess=False, skip_tokenizer_init=True, async_scheduling=True)
    with recorded_events(llm.engine) as events:  # from the update that adds the requests on
        llm.generate(
            mixed_prompts(4, 512, 1, 40), SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False
        )
    llm.shutdown()
    trace = perfetto_trace(read_recording(write(tmp_path / "async.etrec", events)))
    check_trace_event_format(trace)
    slices = {(e["tid"], e["name"]): e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == ENGINE_PID}
    executes = {e["args"]["step"]: e for (tid, _), e in slices.items() if tid == MODEL_TID}
    schedules = {
        e["args"]["step"]: e
        for (tid, name), e in slices.items()
        if tid == BUSY_LOOP_TID and name.startswith("schedule")
    }
    assert executes and all(name.startswith("execute") for (tid, name) in slices if tid == MODEL_TID)
    overlapping = [
        n for n, ex in executes.items() if n + 1 in schedules and schedules[n + 1]["ts"] < ex["ts"] + ex["dur"]
    ]
    assert len(overlapping) > len(executes) // 2
