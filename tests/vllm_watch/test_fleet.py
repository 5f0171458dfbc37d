"""The fleet view: two stand-in vLLM servers holding different parts of the same prompts."""

import dataclasses
import io

import msgspec
import pytest
from rich.console import Console
from textual.widgets import Static

from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.vllm_watch.fleet import fleet_rows, fleet_text, fleet_tree, replica_text
from enginetui.vllm_watch.fleet_app import REFUSAL, FleetApp, Replica
from enginetui.vllm_watch.kv_events import BlockRemoved, BlockStored
from enginetui.vllm_watch.prefix_tree import PrefixCaches
from enginetui.vllm_watch.state import WatchState
from tests.fakes import vllm_recorded
from tests.fakes.vllm_server import FakeVllm
from tests.support.pilot import until
from tests.vllm_watch.watch_pilot import step_time

SIZE = (160, 48)


@pytest.fixture
def fakes():
    servers = [FakeVllm(), FakeVllm()]
    yield servers
    for server in servers:
        server.stop()


def folded_until(name: str, nth: int = 0, rehash: bool = False) -> WatchState:
    """A replica's state with the recorded batches up to a step (`rehash`: as a replica whose hash
    seed differs would publish them)."""
    state = WatchState("http://x:1", "ipc:///x")
    state.caches = PrefixCaches()
    for frame, batch in zip(vllm_recorded.frames(), vllm_recorded.batches(), strict=True):
        if frame["t"] <= step_time(name, nth):
            state.apply_batch(_rehashed(batch) if rehash else batch)
    return state


def _rehashed(batch):
    def other(h):
        return None if h is None else h ^ 0x5A5A5A5A if isinstance(h, int) else b"other" + h

    events = []
    for e in batch.events:
        if isinstance(e, BlockStored):
            e = msgspec.structs.replace(
                e, block_hashes=[other(h) for h in e.block_hashes], parent_block_hash=other(e.parent_block_hash)
            )
        elif isinstance(e, BlockRemoved):
            e = msgspec.structs.replace(e, block_hashes=[other(h) for h in e.block_hashes])
        events.append(e)
    return dataclasses.replace(batch, events=tuple(events))


def test_prefixes_are_matched_by_tokens_across_replicas():
    a, b = folded_until("a streamed completion"), folded_until("prompt with the shared prefix", 1)
    rows = fleet_rows(fleet_tree([("A", a), ("B", b)]))
    assert any(r.holders == {"A", "B"} for r in rows)  # the first prompt: on both
    assert any(r.holders == {"A"} for r in rows)  # what only A went on to cache
    assert sum(r.blocks for r in rows if "A" in r.holders) == a.caches.ranks[0].num_cached  # each of A's blocks, once
    other = folded_until("prompt with the shared prefix", 1, rehash=True)  # other hashes, same tokens: still matched
    assert other.caches.ranks[0].blocks.keys().isdisjoint(b.caches.ranks[0].blocks.keys())
    assert fleet_rows(fleet_tree([("A", a), ("B", other)])) == rows
    text = fleet_text([("A", a), ("B", b)], 120).plain
    assert "● ● " in text and "● · " in text


async def test_the_fleet_app_watches_each_replica(fakes):
    first, second = fakes
    app = FleetApp([Replica(f.url, f.kv_endpoint, f.replay_endpoint) for f in fakes], poll_s=0.05, redraw_hz=20)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: all(s.server is not None and s.caches.decode for s in app.states))
        first.play_until(step_time("a streamed completion"))
        second.play_until(step_time("prompt with the shared prefix", 1))
        await until(
            pilot,
            lambda: all(
                s.caches.ranks and s.caches.ranks[0].last_seq == f.last_seq
                for s, f in zip(app.states, fakes, strict=True)
            ),
        )
        app.redraw()
        body = str(app.query_one("#fleet-prefixes-body").content)
        assert "● ● " in body and "● · " in body and "Return the number of items" in body
        panel = str(app.query_one("#replica-A").content)
        assert first.url in panel and "/metrics up" in panel and "KV events up" in panel
        assert replica_text("B", app.states[1], 100).plain.startswith(f"B {second.url}")
        assert "2/2 replicas answer" in str(app.query_one("#fleet-title").content)
        await pilot.press("ctrl+p")  # the dashboards' pause key: a watched fleet says why it does nothing
        await until(pilot, lambda: any(REFUSAL in str(n.message) for n in app._notifications))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        console = Console(width=SIZE[0], record=True, file=io.StringIO())
        console.print(app.screen.query_one(Static).content)
        shown = console.export_text()
        for words in ("stop watching and quit", "play, pause, step and speed", "which prefixes are cached", first.url):
            assert words in shown
        await pilot.press("f1")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
