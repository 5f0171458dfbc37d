"""A real vLLM 0.32 CPU server with the probe in it, a burst through the proxy into a small pool (preemptions),
and the dashboard on the probe with the server beside it (`enginetui attach --vllm URL --probe ADDR --record
FILE`): its figures equal vLLM's own /metrics and vLLM's line for every step (`--enable-logging-iteration-details`:
requests, tokens and KV use), the rebuild is scored against the probe, and the recording replays, exports and
simulates.

Started with ENGINETUI_VLLM_PYTHON set (skipped without it); minutes on 2 cores (vLLM's start).
"""

import json
import threading
import time

import msgspec
import pytest
import zmq

from enginetui.bench.vllm_step_log import logged_steps
from enginetui.cli import main
from enginetui.core.engine.events import MissedEvents, decode_event
from enginetui.core.record.reader import read_recording
from enginetui.dashboard.state import DashboardState
from enginetui.replay.cli import open_session
from enginetui.replay.session import ReplaySession
from enginetui.simulate.calibrate import replayed_shapes
from enginetui.simulate.from_recording import recorded_run
from enginetui.vllm_launch import find_vllm_python
from enginetui.vllm_probe.attach import ProbeEngine
from enginetui.vllm_probe.recording import read_facts
from enginetui.vllm_probe.with_vllm import oracle_text
from enginetui.vllm_watch import prometheus as m
from tests.support.pilot import until as wait_for
from tests.vllm_probe.fake_probe import DrivenProbeVllm
from tests.vllm_probe.live import send_burst, vllm_with_probe

NUM_REQUESTS = 32
MAX_TOKENS = 160  # each: a long burst (few run at once in the small pool), so /metrics is read during it

pytestmark = [
    pytest.mark.skipif(
        find_vllm_python() is None, reason="set ENGINETUI_VLLM_PYTHON to a Python interpreter with vLLM installed"
    ),
    pytest.mark.slow,
    pytest.mark.timeout(1500),
]


def pool_state(running: float, waiting: float, usage: float) -> tuple[int, int, float]:
    return int(running), int(waiting), round(usage, 9)


async def test_the_dashboard_on_the_probe_equals_vllms_metrics_and_records_the_run(tmp_path, capsys):
    with vllm_with_probe(tmp_path, extra_args=("--enable-logging-iteration-details",)) as (server, address):
        collected, missed = [], MissedEvents()  # every event, beside the dashboard's own subscription
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.connect(address)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        engine = ProbeEngine(address)
        engine.facts = await read_facts(server.url, None)
        record = str(tmp_path / "vllm.etrec")
        recording = engine.start_recording(record, "enginetui attach --vllm URL --probe ADDR --record FILE")
        # the test takes the dashboard's /metrics readings itself, every 0.1 s (the burst lasts seconds)
        app = DrivenProbeVllm(engine, server.url, kv_events=None, proxy=("127.0.0.1", 0))
        readings: list[m.MetricsSample] = []
        try:
            async with app.run_test(size=(160, 48)) as pilot:
                await wait_for(pilot, lambda: app.vllm.proxy_url is not None, "the proxy")
                await pilot.pause(1.0)  # both subscriptions reach the probe before vLLM's first step
                burst = threading.Thread(target=send_burst, args=(app.vllm.proxy_url, NUM_REQUESTS, MAX_TOKENS, True))
                burst.start()
                while burst.is_alive():
                    sample = await app.feed.read_metrics()
                    if sample is not None:  # None: vLLM's API server, busy with the burst, did not answer in time
                        readings.append(sample)
                    for _ in range(200):  # what came meanwhile, up to a bound: vLLM steps faster than they decode
                        if not sub.poll(0):
                            break
                        collected.append(missed.mark(decode_event(sub.recv())))
                    await pilot.pause(0.1)
                burst.join()
                # every request's end reaches the subscriber, however busy the machine (then whatever follows)
                deadline = time.monotonic() + 120
                while sum(len(e.finished) for e in collected) < NUM_REQUESTS and time.monotonic() < deadline:
                    if sub.poll(1000):
                        collected.append(missed.mark(decode_event(sub.recv())))
                while sub.poll(3000):
                    collected.append(missed.mark(decode_event(sub.recv())))
                last = collected[-1]
                await wait_for(
                    pilot,
                    lambda: app.state.latest is not None and app.state.latest.seq == last.seq,
                    "the dashboard to take the last event",
                )
                final = None  # vLLM at rest: the rebuild's last reading (a loaded machine may need another try)
                for _ in range(3):
                    if (final := await app.feed.read_metrics()) is not None:
                        break
                assert final is not None, app.vllm.link_error
                assert missed.total == 0 and engine.missed.total == 0
                assert app.state.latest == last

                # every /metrics reading shows a state some event showed (or the idle one before the first)
                states = {pool_state(0, 0, 0.0)}
                states |= {
                    pool_state(len(e.running), len(e.waiting), 1 - e.num_free_blocks / e.num_blocks) for e in collected
                }
                for reading in readings + [final]:
                    seen = pool_state(reading.total(m.RUNNING), reading.total(m.WAITING), reading.total(m.KV_USAGE))
                    assert seen in states, f"/metrics showed {seen}, no event did"
                # and the counters, once vLLM is idle, are the events' totals
                finished = [end for e in collected for end in e.finished]
                broken = [f"{v.status}: {v.detail}" for v in app.vllm.requests.values() if v.status != "finished"]
                assert not broken, f"requests through the proxy that did not finish: {broken}"
                assert final.total(m.REQUESTS_DONE) == len(finished) == NUM_REQUESTS
                assert final.total(m.GENERATION_TOKENS) == last.total_output_tokens
                assert final.total(m.PREEMPTIONS) == last.total_preemptions > 0
                assert final.total(m.PREFIX_QUERIES) == last.prefix_cache_queries
                assert final.total(m.PREFIX_HITS) == last.prefix_cache_hits > 0
                assert {v.req_id for v in app.state.ordered() if not v.active} == {end.req_id for end in finished}

                # vLLM's own line per step (--enable-logging-iteration-details) is the probe's event of that step
                logged = list(logged_steps(server.log_text()))
                busy = [e for e in collected if e.num_scheduled_tokens]
                assert len(logged) == len(busy) > NUM_REQUESTS
                for line, event in zip(logged, busy, strict=True):
                    assert (line.requests, line.tokens) == (len(event.scheduled), event.num_scheduled_tokens), line
                    assert line.kv_usage is not None
                    assert abs(line.kv_usage - (1 - event.num_free_blocks / event.num_blocks)) <= 0.0005 + 1e-9, line

                # beside the probe: the rebuild from the proxy's requests, scored against the probe at each reading
                # each reading after the probe's first event, against the probe's state then
                assert app.truth.metrics.count == sum(app.truth.at(r.time) is not None for r in [*readings, final])
                rebuild = app.vllm.rebuild
                assert rebuild is not None and app.truth.rebuild.count == len(rebuild.checks)
                text = oracle_text(app.truth, app.vllm, app.state.latest, 400).plain
                scores = app.truth.rebuild
                if scores.count:
                    share = f"{100 * scores.agreeing / scores.count:.0f}%"
                    assert f"rebuilt, {share} agreement with the probe over {scores.count} readings" in text
                else:  # a busy machine: /metrics answered no reading while the rebuild had stepped (seen beside CI)
                    assert "no reading scored yet" in text
                metrics = app.truth.metrics
                print(
                    f"rebuild: {scores.agreeing}/{scores.count} readings agree with the probe; "
                    f"/metrics: {metrics.agreeing}/{metrics.count}"
                )
        finally:
            sub.close(linger=0)
            engine.shutdown()
        # the recording: every event, replayed as the dashboard folded it, exported, simulated
        summary = recording.close()
        run = read_recording(record)
        assert summary.num_events == len(run) == len(collected) and list(run.events()) == collected
        assert run.header.engine.model_name == engine.facts.model and run.header.engine.max_model_len > 0
        folded = DashboardState()
        for event in collected:
            folded.apply_event(event)
        assert ReplaySession(run).state_at(len(run) - 1) == folded
        session, notes = open_session(record)  # as `enginetui replay` opens it: the served model's tokenizer packed
        assert not notes and all(view.text for view in session.state_at(len(run) - 1).requests.values())
        assert main(["export", record, "--format", "perfetto", str(tmp_path / "trace.json")]) == 0
        assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
        assert main(["export", record, "--format", "csv", str(tmp_path / "csv")]) == 0
        assert main(["simulate", "--from-recording", record, "--step-times", "recorded", "--no-progress"]) == 0
        # each step's shape as the probe published it is the one the simulator's scheduler computes replaying the
        # run (which refuses a run it diverges from); the fit reads them
        recorded = recorded_run(record)
        unnumbered = lambda shapes: [msgspec.structs.replace(s, step=0) for s in shapes]  # noqa: E731
        assert unnumbered(e.shape for e in recorded.steps) == unnumbered(replayed_shapes(record, recorded))
        assert main(["simulate", "--calibrate-from-recording", record, str(tmp_path / "fit.json")]) == 0
        print(capsys.readouterr().out)
