"""SVG snapshots of the one dashboard on a vLLM without a probe (`attach --vllm URL`): the rebuild's step events in
the engine's panels (inferred), vLLM's /metrics, latencies, prefix tree and proxied requests beside them.

Deterministic: no network (the recorded burst's /metrics readings and proxied requests, or the recorded session's
/metrics readings and KV batches, are folded into the watcher's state by hand; the server address is fixed; the
clock shown is UTC). After an intended change of the screen: `pytest tests/vllm_watch/test_snapshots.py
--snapshot-update`.
"""

import time
from pathlib import Path

import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_probe.with_vllm import VllmTUI
from enginetui.vllm_watch.burst import burst_items
from enginetui.vllm_watch.rebuild_engine import RebuildEngine
from enginetui.vllm_watch.server import load_decoder
from enginetui.vllm_watch.state import SchedulerLimits, ServerInfo, WatchState
from tests.fakes import vllm_recorded

BURST = Path(__file__).parent / "fixtures" / "opt-tiny-burst"  # 64 requests through the proxy, real vLLM 0.32
URL = "http://127.0.0.1:8000"


class RecordedApp(VllmTUI):
    """The dashboard with the network left out: the test feeds its watcher's state."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, clock=lambda: 0.0, **kwargs)  # the dashboard's clock stands still
        self.feed.follow_rank = lambda rank: None  # type: ignore[method-assign]  # no KV subscriber

    def _poll_metrics(self) -> None:
        pass


def fed_app() -> VllmTUI:
    """The recorded session as it was while the second burst ran: tree with evictions, latencies; no proxy, so
    no request for the rebuild (it says so)."""
    app = RecordedApp(RebuildEngine(URL), URL, kv_events="tcp://127.0.0.1:5557", limits=SchedulerLimits(16, 512))
    state = app.vllm
    t = [s["t"] for s in vllm_recorded.session()["steps"] if s["step"].startswith("the same burst")][0] + 0.9
    state.set_server(ServerInfo("opt-tiny", str(DEFAULT_MODEL_DIR), 512))
    state.caches.decode = load_decoder(str(DEFAULT_MODEL_DIR))[0]
    state.kv_status(0.0, "up", "")
    batches = [(f["t"], 0, b) for f, b in zip(vllm_recorded.frames(), vllm_recorded.batches(), strict=True)]
    readings = [
        (r["t"], 1, sample) for r, sample in zip(vllm_recorded.metrics_texts(), vllm_recorded.samples(), strict=True)
    ]
    for when, is_reading, item in sorted(batches + readings, key=lambda x: x[:2]):  # in the order they came
        if when <= t:
            state.apply_metrics(item) if is_reading else state.apply_batch(item)
    return app


def rebuilt_app(share: float) -> VllmTUI:
    """The recorded 64-request burst through the proxy, vLLM's limits given, `share` of it folded: the rebuild's
    steps in the engine's panels."""
    engine = RebuildEngine(URL)
    app = RecordedApp(engine, URL, kv_events=None)
    limits, items = burst_items(BURST)
    app.vllm = WatchState.from_recorded(items[: int(share * len(items))], limits=limits, rebuild_sinks=[engine])
    return app


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(160, 48), (120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_vllm_column_on_the_recorded_session(snap_compare, size):
    assert snap_compare(fed_app(), terminal_size=size)


@pytest.mark.parametrize("size", [(160, 48), (120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_rebuilt_burst_in_the_engine_panels(snap_compare, size):
    assert snap_compare(rebuilt_app(0.4), terminal_size=size)
