"""SVG snapshots of the vLLM dashboard at several terminal sizes, drawn from the recorded real session.

Deterministic: no network (the recorded /metrics readings and KV batches are folded into the
state by hand, the server address is fixed, the clock shown is UTC). After an intended change
of the screen: `pytest tests/vllm_watch/test_snapshots.py --snapshot-update`.
"""

import time
from pathlib import Path

import pytest

from enginetui.vllm_watch.app import VllmWatchApp
from enginetui.vllm_watch.burst import replay_burst
from enginetui.vllm_watch.server import load_decoder
from enginetui.vllm_watch.state import ServerInfo
from tests.vllm_watch import recorded

BURST = Path(__file__).parent / "fixtures" / "opt-tiny-burst"  # 64 requests through the proxy, real vLLM 0.32


class RecordedApp(VllmWatchApp):
    """The dashboard with the network left out: the test feeds its state."""

    def _poll_metrics(self) -> None:
        pass

    def _follow_rank(self, rank: int) -> None:
        pass


def fed_app() -> VllmWatchApp:
    """The state as it was while the second burst ran: tree with evictions, queues, latencies."""
    app = RecordedApp("http://127.0.0.1:8000", kv_events="tcp://127.0.0.1:5557")
    state = app.state
    t = [s["t"] for s in recorded.session()["steps"] if s["step"].startswith("the same burst")][0] + 0.9
    state.set_server(ServerInfo("opt-tiny", str(recorded.MODEL_DIR), 512))
    state.caches.decode = load_decoder(str(recorded.MODEL_DIR))[0]
    batches = [(f["t"], 0, b) for f, b in zip(recorded.frames(), recorded.batches(), strict=True)]
    readings = [(r["t"], 1, sample) for r, sample in zip(recorded.metrics_texts(), recorded.samples(), strict=True)]
    for when, is_reading, item in sorted(batches + readings, key=lambda x: x[:2]):  # in the order they came
        if when <= t:
            state.apply_metrics(item) if is_reading else state.apply_batch(item)
    return app


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(160, 48), (120, 40), (100, 30), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_dashboard_on_the_recorded_vllm(snap_compare, size):
    assert snap_compare(fed_app(), terminal_size=size)


def rebuilt_app() -> VllmWatchApp:
    """After the recorded 64-request burst through the proxy, vLLM's limits given: every headline
    figure, the scheduler rebuild's too."""
    app = RecordedApp("http://127.0.0.1:8000", kv_events="tcp://127.0.0.1:5557")
    app.state = replay_burst(BURST)
    return app


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_headline_figures_are_whole_at_120x40_and_the_essentials_at_80x24(snap_compare, size):
    assert snap_compare(rebuilt_app(), terminal_size=size)
