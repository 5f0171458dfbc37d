"""`enginetui attach --vllm URL --probe ADDR`: the probe's dashboard with vLLM's /metrics, prefix cache and proxy
beside it, and the outside rebuild scored against the probe at each /metrics reading.

The probe is the stand-in publisher (fake_probe.py) sending a real vLLM's burst; the server is the stand-in vLLM
(tests/vllm_watch/fake_vllm.py), here serving /metrics with vLLM's gauges as the probe's events say them.
"""

import asyncio
import json
import urllib.request

import pytest
import zmq
from textual.widgets import Input

from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import StepEvent
from enginetui.serve.request_names import RequestNames
from enginetui.vllm_probe.attach import ProbeEngine
from enginetui.vllm_probe.with_vllm import OwnNames, VllmTUI, oracle_text
from enginetui.vllm_watch.reconstruct import TOLERANCE
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.fakes.vllm_server import FakeVllm
from tests.support.pilot import until as wait_for
from tests.vllm_probe.fake_probe import DrivenProbeVllm, publish_all, read_events, subscribed

SIZE = (160, 48)
LABELS = 'engine="0",model_name="m"'


def metrics_text(event: StepEvent) -> str:
    """vLLM's /metrics gauges as they read after the step `event` tells."""
    used = event.num_blocks - event.num_free_blocks
    return (
        "process_start_time_seconds 1e9\n"
        f"vllm:num_requests_running{{{LABELS}}} {len(event.running)}\n"
        f"vllm:num_requests_waiting{{{LABELS}}} {len(event.waiting)}\n"
        f"vllm:kv_cache_usage_perc{{{LABELS}}} {used / event.num_blocks}\n"
        f'vllm:cache_config_info{{block_size="{event.block_size}",enable_prefix_caching="True",engine="0",'
        f'num_gpu_blocks="{event.num_blocks + 1}"}} 1.0\n'
    )


def serve_gauges(fake: FakeVllm, event: StepEvent) -> None:
    fake.readings = [{"t": float("-inf"), "text": metrics_text(event)}]


async def test_each_reading_is_scored_against_the_probe_and_the_screen_says_which_is_exact(tmp_path):
    events = read_events()
    fake = FakeVllm()
    serve_gauges(fake, events[0])
    address = f"ipc://{tmp_path}/probe.sock"
    publisher = EventPublisher(zmq.Context.instance(), address)
    app = DrivenProbeVllm(ProbeEngine(address), fake.url, kv_events=None)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await subscribed(pilot, publisher)
            shown: list[StepEvent] = []  # the probe's latest event at each reading
            for start in range(0, len(events), 24):
                await publish_all(pilot, app, publisher, events[start : start + 24])
                shown.append(events[min(start + 24, len(events)) - 1])
                serve_gauges(fake, shown[-1])
                assert await app.feed.read_metrics() is not None
            # vLLM's gauges, read while no event was on its way, are the probe's state
            assert app.truth.metrics.count == len(shown) and app.truth.metrics.agreeing == len(shown)
            # the rebuild saw no request (no proxy): it rebuilt an idle vLLM, checked at every reading with traffic
            # (and the first back at rest), each agreeing where the probe's queues and blocks were within ±1 of idle;
            # it starts at the second reading (at the first, /v1/models had not told vLLM's max_model_len yet)
            checked, busy_before = [], False
            for event in shown[1:]:
                busy = bool(event.running or event.waiting)
                if busy or busy_before:
                    checked.append(event)
                    busy_before = busy
            agreeing = sum(
                len(e.running) <= TOLERANCE
                and len(e.waiting) <= TOLERANCE
                and e.num_blocks - e.num_free_blocks <= TOLERANCE
                for e in checked
            )
            assert app.truth.rebuild.count == len(checked) > 0 and app.truth.rebuild.agreeing == agreeing
            text = oracle_text(app.truth, app.vllm, app.state.latest, 400).plain
            last = events[-1]
            assert f"exact (probe): running {len(last.running)} · waiting {len(last.waiting)}" in text
            assert f"/metrics: running {len(last.running)} · waiting {len(last.waiting)}" in text
            assert f"equal to the probe on {len(shown)}/{len(shown)} readings (100%)" in text
            share = f"{100 * agreeing / len(checked):.0f}%"
            assert f"rebuilt, {share} agreement with the probe over {len(checked)} readings" in text
            assert "--proxy-port PORT" in text
            app.redraw()
            await pilot.pause()
            assert str(app.query_one("#vllm-oracle").render()).startswith("exact (probe): running")
            assert "KV events are not listened to" in str(app.query_one("#tree-body").render())
            assert app.state.latest == last  # the engine's panels: the probe's events, as without --vllm
    finally:
        publisher.close()
        fake.stop()


@pytest.mark.slow  # a proxy server and KV event sockets beside the app: seconds on 2 cores
async def test_the_prefix_tree_and_the_proxys_requests_show_beside_the_probe(tmp_path):
    events = read_events()
    fake = FakeVllm()
    serve_gauges(fake, events[-1])
    address = f"ipc://{tmp_path}/probe.sock"
    publisher = EventPublisher(zmq.Context.instance(), address)
    app = VllmTUI(
        ProbeEngine(address),
        fake.url,
        kv_events=fake.kv_endpoint,
        kv_replay=fake.replay_endpoint,
        proxy=("127.0.0.1", 0),
    )
    try:
        async with app.run_test(size=SIZE) as pilot:
            await subscribed(pilot, publisher)
            await publish_all(pilot, app, publisher, events[:8])
            await wait_for(pilot, lambda: app.vllm.kv_link == "up" or app.vllm.kv_link == "connecting", "KV events")
            fake.play_all()
            await wait_for(pilot, lambda: app.vllm.caches.ranks and app.vllm.batches_seen > 0, "KV event batches")
            await wait_for(pilot, lambda: app.vllm.proxy_url is not None, "the proxy")
            body = json.dumps({"model": "m", "prompt": "hello", "max_tokens": 4}).encode()
            request = urllib.request.Request(
                app.vllm.proxy_url + "/v1/completions", body, {"Content-Type": "application/json"}
            )
            await asyncio.to_thread(lambda: urllib.request.urlopen(request, timeout=10).read())
            await wait_for(pilot, lambda: any(not v.active for v in app.vllm.requests.values()), "the proxied request")
            app.redraw()
            await pilot.pause()
            tree = app.query_one(PrefixTreePanel)
            assert "blocks cached" in str(tree.query_one("#tree-body").render())
            listed = app.query_one("#vllm-requests").render().plain
            assert "p1" in listed and "Requests · 0 live · 1 ended" == str(app.query_one("#vllm-requests").border_title)
    finally:
        publisher.close()
        fake.stop()


class Renamed(RequestNames):
    """Request ids renamed by a table (the recorded burst's requests as vLLM names prompts sent with a request_id)."""

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__(tag="")
        self.names = names

    def local(self, engine_id: str) -> str:
        return self.names.get(engine_id, engine_id)


def test_the_probes_ids_of_prompts_sent_from_here_are_their_names_here():
    events = read_events()
    first, second = [a.req_id for e in events for a in e.added][:2]
    vllms = {first: "cmpl-enginetui-r1-0-aa721fd2", second: "cmpl-enginetui-r7-0-b1c1366b"}
    names = OwnNames(lambda name: name == "r1")  # r1 was sent from here, r7 by another dashboard
    for event in events:
        shown = names.local_event(Renamed(vllms).local_event(event))
        assert ids_of(shown) == {"r1" if i == first else vllms.get(i, i) for i in ids_of(event)}
    assert any("r1" in ids_of(names.local_event(Renamed(vllms).local_event(e))) for e in events)


def ids_of(event: StepEvent) -> set[str]:
    """Every request id the event names."""
    listed = (*event.added, *event.running, *event.waiting, *event.finished, *event.rejected, *event.preempted)
    return {p.req_id for p in listed} | set(event.scheduled) | set(event.new_token_ids)


@pytest.mark.slow  # a stand-in vLLM server and a probe socket beside the app: over 2 s on 2 cores
async def test_a_prompt_typed_here_is_one_row_with_the_probes_events_for_it(tmp_path):
    events = read_events()
    first, second = [a.req_id for e in events for a in e.added][:2]
    # vLLM 0.32 names the dashboard's r1 (sent with request_id enginetui-r1) cmpl-enginetui-r1-0 and 8 characters;
    # r7 was sent by another dashboard: it stays vLLM's
    names = {first: "cmpl-enginetui-r1-0-aa721fd2", second: "cmpl-enginetui-r7-0-b1c1366b"}
    events = [Renamed(names).local_event(e) for e in events]
    events = events[: next(i for i, e in enumerate(events) if names[first] in {f.req_id for f in e.finished}) + 1]
    fake = FakeVllm()
    serve_gauges(fake, events[-1])
    address = f"ipc://{tmp_path}/probe.sock"
    publisher = EventPublisher(zmq.Context.instance(), address)
    app = VllmTUI(ProbeEngine(address), fake.url, kv_events=None, poll_s=0.05)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await subscribed(pilot, publisher)
            await wait_for(pilot, lambda: app.vllm.server is not None, "/v1/models")
            app.query_one("#prompt", Input).value = "hello"
            await pilot.press("enter")
            await wait_for(pilot, lambda: "r1" in app.state.requests, "the typed prompt")
            assert fake.completions[-1]["request_id"] == "enginetui-r1"
            await publish_all(pilot, app, publisher, events)
            await wait_for(pilot, lambda: not app.state.requests["r1"].active, "r1's end")
            ids = set(app.state.requests)
            assert "r1" in ids and names[first] not in ids  # one row: the prompt typed here, with vLLM's steps for it
            assert names[second] in ids and "r7" not in ids  # not sent from here: as vLLM names it
            assert len(ids) == len({a.req_id for e in events for a in e.added})
            ran = [e.step for e in events if names[first] in e.scheduled]  # the steps vLLM ran it in
            lane = app.state.timeline.lanes["r1"]
            assert (lane.segments[0][1], lane.segments[-1][2]) == (ran[0], ran[-1]) and lane.end is not None
    finally:
        publisher.close()
        fake.stop()
