"""A stand-in for a real vLLM's probe: our engine's EventPublisher sending the events a real vLLM 0.32's probe
published during a burst (fixtures/burst.msgpack, recorded by `python -m tests.vllm_probe.live`)."""

import asyncio
from collections.abc import Callable
from pathlib import Path

import msgspec

from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import StepEvent
from enginetui.vllm_probe.with_vllm import VllmTUI
from tests.support.pilot import until as wait_for

FIXTURE = Path(__file__).with_name("fixtures") / "burst.msgpack"
BATCH = 32  # events sent before waiting for the reader (below the publisher's per-subscriber queue)
WAIT_S = 30.0


def read_events(path: Path = FIXTURE) -> list[StepEvent]:
    return msgspec.msgpack.decode(path.read_bytes(), type=list[StepEvent])


async def publish_all(pilot, app, publisher: EventPublisher, events: list) -> None:
    """Send `events` in batches, each once the dashboard `app` took the one before."""
    for start in range(0, len(events), BATCH):
        for event in events[start : start + BATCH]:
            publisher.publish(event)
        last = events[min(start + BATCH, len(events)) - 1].seq
        await wait_for(
            pilot, lambda last=last: app.state.latest is not None and app.state.latest.seq == last, f"event {last}"
        )


async def subscribed(pilot, publisher: EventPublisher) -> None:
    joined = []
    await wait_for(
        pilot, lambda: joined.append(publisher.new_subscribers()) or sum(joined) > 0, "the dashboard to subscribe"
    )


async def until(done: Callable[[], bool], what: str) -> None:
    """Wait (without an app) until `done()`."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class DrivenProbeVllm(VllmTUI):
    """The dashboard with a vLLM beside the probe, whose /metrics the test reads itself (app.feed.read_metrics()):
    each reading at a known point of the run, none out of turn."""

    def _poll_metrics(self) -> None:
        pass
