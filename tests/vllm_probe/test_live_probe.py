"""A real vLLM 0.32 CPU server with the probe in it, a burst into a small pool (preemptions), and the
dashboard on the probe (`enginetui attach --probe`): its figures equal vLLM's own /metrics.

Started with ENGINETUI_VLLM_PYTHON set (skipped without it); minutes on 2 cores (vLLM's start).
"""

import threading
import time
import urllib.request

import pytest
import zmq

from enginetui.core.engine.events import MissedEvents, decode_event
from enginetui.vllm_launch import find_vllm_python
from enginetui.vllm_probe.attach import ProbeEngine, ProbeWatchTUI
from enginetui.vllm_watch import prometheus as m
from tests.support.pilot import until as wait_for
from tests.vllm_probe.live import send_burst, vllm_with_probe

NUM_REQUESTS = 32

pytestmark = [
    pytest.mark.skipif(
        find_vllm_python() is None, reason="set ENGINETUI_VLLM_PYTHON to a Python interpreter with vLLM installed"
    ),
    pytest.mark.slow,
    pytest.mark.timeout(1500),
]


def read_metrics(url: str) -> m.MetricsSample:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return m.parse_metrics(r.read().decode(), time.time())


def pool_state(running: float, waiting: float, usage: float) -> tuple[int, int, float]:
    return int(running), int(waiting), round(usage, 9)


async def test_the_dashboard_on_the_probe_equals_vllms_metrics(tmp_path):
    with vllm_with_probe(tmp_path) as (server, address):
        collected, missed = [], MissedEvents()  # every event, beside the dashboard's own subscription
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.connect(address)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        engine = ProbeEngine(address)
        app = ProbeWatchTUI(engine)
        readings: list[m.MetricsSample] = []
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.pause(1.0)  # both subscriptions reach the probe before vLLM's first step
                burst = threading.Thread(target=send_burst, args=(server.url, NUM_REQUESTS))
                burst.start()
                while burst.is_alive():
                    readings.append(read_metrics(server.url))
                    while sub.poll(0):
                        collected.append(missed.mark(decode_event(sub.recv())))
                    await pilot.pause(0.2)
                burst.join()
                while sub.poll(3000):
                    collected.append(missed.mark(decode_event(sub.recv())))
                last = collected[-1]
                await wait_for(
                    pilot,
                    lambda: app.state.latest is not None and app.state.latest.seq == last.seq,
                    "the dashboard to take the last event",
                )
                final = read_metrics(server.url)
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
                assert final.total(m.REQUESTS_DONE) == len(finished) == NUM_REQUESTS
                assert final.total(m.GENERATION_TOKENS) == last.total_output_tokens
                assert final.total(m.PREEMPTIONS) == last.total_preemptions > 0
                assert final.total(m.PREFIX_QUERIES) == last.prefix_cache_queries
                assert final.total(m.PREFIX_HITS) == last.prefix_cache_hits > 0
                assert {v.req_id for v in app.state.ordered() if not v.active} == {end.req_id for end in finished}
        finally:
            sub.close(linger=0)
