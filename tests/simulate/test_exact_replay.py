"""The proof: driven by a real engine's recorded step times and arrivals, the simulator (the engine's
own scheduler, no model) reproduces that run step for step, and its step events equal the engine's.

The real engine runs in-process on a tiny random-weight OPT with a pool small enough to preempt,
a budget small enough to chunk prefills, and requests arriving while others run; half of them may
stop on EOS (the simulator forces their recorded lengths whatever ended them).
"""

import asyncio

import msgspec
import pytest

from enginetui.cli import main
from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.record.reader import read_recording
from enginetui.core.sampling_params import SamplingParams
from enginetui.simulate.fitted import FitInfo, FittedModel
from enginetui.simulate.measured import compare_recording
from enginetui.simulate.replay import replay_recording
from tools.sim_accuracy import main as accuracy_main

pytestmark = pytest.mark.timeout(240)

# Keys of a step event that are measured times (or counters of them) or the machine's state, not scheduling decisions.
TIMED = {
    "seq",
    "time",
    "sched_ms",
    "exec_ms",
    "update_ms",
    "forward_ms",
    "sample_ms",
    "compute_threads",
    "step_interval_ms",
    "phases",
}


async def _record(path, model_dir, engine_args: dict) -> None:
    engine = AsyncLLM.from_engine_args(model=model_dir, multiprocess=False, record=path, **engine_args)
    try:
        first_tokens = asyncio.Event()

        async def run(request_id: str, prompt: list[int], params: SamplingParams, priority: int = 0) -> None:
            n = 0
            async for out in engine.generate(prompt, params, request_id, priority=priority):
                n = len(out.outputs[0].token_ids)
                if request_id == "a0" and n >= 3:
                    first_tokens.set()

        lengths = [(40, 30), (70, 12), (25, 45), (90, 20)]
        first = [
            asyncio.create_task(
                run(
                    f"a{i}",
                    list(range(5 + i, 5 + i + p)),
                    SamplingParams(max_tokens=o, ignore_eos=True, temperature=0),
                    priority=i % 2,
                )
            )
            for i, (p, o) in enumerate(lengths)
        ]
        await first_tokens.wait()  # the second wave arrives while the first runs
        second = [
            asyncio.create_task(
                run(
                    f"b{i}",
                    list(range(300 + 7 * i, 300 + 7 * i + p)),
                    SamplingParams(max_tokens=o, temperature=1.0, seed=i),
                    priority=(i + 1) % 2,
                )
            )
            for i, (p, o) in enumerate(lengths)
        ]
        await asyncio.gather(*first, *second)
        await engine.stop_recording()
    finally:
        engine.shutdown()


def _scheduling_fields(event) -> dict:
    fields = msgspec.structs.asdict(event)
    for key in TIMED:
        fields.pop(key)
    fields["running"] = [msgspec.structs.replace(r, first_scheduled_time=None) for r in event.running]
    fields["waiting"] = [msgspec.structs.replace(r, first_scheduled_time=None) for r in event.waiting]
    return fields


@pytest.mark.parametrize(
    "engine_args",
    [
        dict(num_gpu_blocks_override=14, max_num_batched_tokens=32, max_num_seqs=4, block_size=8),
        dict(
            num_gpu_blocks_override=20,
            max_num_batched_tokens=48,
            max_num_seqs=3,
            block_size=4,
            enable_prefix_caching=True,
            scheduling_policy="priority",
            long_prefill_token_threshold=16,
        ),
    ],
    ids=["fcfs", "priority-prefix-caching"],
)
def test_simulator_reproduces_a_recorded_run_step_for_step(tmp_path, text_opt_dir, engine_args):
    real_path, sim_path = tmp_path / "real.etrec", tmp_path / "sim.etrec"
    asyncio.run(_record(real_path, text_opt_dir, dict(seed=0, **engine_args)))
    real = [e for e in read_recording(real_path).events() if e.is_step]
    run = replay_recording(str(real_path), record=str(sim_path))
    sim = [e for e in read_recording(sim_path).events() if e.is_step]
    assert any(e.preempted for e in real) and any(c.num_remaining for e in real for c in e.chunks)
    assert len(sim) == len(real)
    for r, s in zip(real, sim):
        # every scheduling decision: scheduled tokens per request, admissions, chunks, preemptions,
        # finishes, queues and block tables, pool changes; requests announced by the step's event
        assert s.scheduled == r.scheduled, f"step {r.step}"
        assert [p.req_id for p in s.preempted] == [p.req_id for p in r.preempted], f"step {r.step}"
        assert [f.req_id for f in s.finished] == [f.req_id for f in r.finished], f"step {r.step}"
        assert s.time == r.time  # the clock too: each simulated step ends when the recorded one did
    # and the whole events, but for measured times, finish reasons (EOS stops are forced lengths here)
    # and requests' adds (the simulator announces them in the step that first sees them)
    for r, s in zip(real, sim):
        rf, sf = _scheduling_fields(r), _scheduling_fields(s)
        for f in ("finished",):
            rf[f] = [(e.req_id, e.num_output_tokens) for e in r.finished]
            sf[f] = [(e.req_id, e.num_output_tokens) for e in s.finished]
        rf.pop("added"), sf.pop("added")
        assert sf == rf, f"step {r.step}: " + ", ".join(f"{k}: {sf[k]} != {rf[k]}" for k in rf if sf[k] != rf[k])
    assert run.times.num_output.tolist() == [len(q.output_token_ids) for q in run.requests]


FCFS = dict(seed=0, num_gpu_blocks_override=14, max_num_batched_tokens=32, max_num_seqs=4, block_size=8)


@pytest.fixture(scope="module")
def fcfs_recording(tmp_path_factory, text_opt_dir) -> str:
    path = tmp_path_factory.mktemp("fcfs") / "real.etrec"
    asyncio.run(_record(path, text_opt_dir, FCFS))
    return str(path)


def test_the_command_line_replays_a_recording(fcfs_recording, capsys):
    num_steps = sum(1 for e in read_recording(fcfs_recording).events() if e.is_step)
    assert main(["simulate", "--from-recording", fcfs_recording, "--step-times", "recorded", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "8 completed of 8" in out and f", {num_steps} steps" in out and "replayed step times" in out


def test_measured_and_predicted_figures_agree_exactly_on_the_recorded_clock(fcfs_recording, tmp_path, capsys):
    rows = compare_recording(fcfs_recording, "recorded")
    assert [label for label, *_ in rows][:3] == ["duration s", "request throughput", "output tok/s"]
    for label, measured, predicted, error in rows:
        assert measured > 0 and predicted == measured and error == 0, label
    # another clock gives other figures, the same comparison
    fit = FittedModel({"constant": 1e-3, "prefill_tokens": 1e-5, "decode_tokens": 1e-4}, FitInfo("m", "x", 1, 1.0, 0.0))
    fit.save(tmp_path / "fit.json")
    rows = dict((label, (m, p)) for label, m, p, _ in compare_recording(fcfs_recording, str(tmp_path / "fit.json")))
    assert rows["duration s"][1] != rows["duration s"][0]
    accuracy_main([fcfs_recording])
    assert "TTFT p50 ms" in capsys.readouterr().out
