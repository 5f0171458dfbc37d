"""The one dashboard on the fake vLLM server without a probe (the outside rebuild): how a test builds it
and reads what it shows."""

from enginetui.vllm_probe.with_vllm import VllmTUI
from enginetui.vllm_watch.rebuild_engine import RebuildEngine
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.fakes import vllm_recorded
from tests.fakes.vllm_server import FakeVllm

POLL_S = 0.05  # read /metrics often: the tests wait less


def watch(fake: FakeVllm, record: str | None = None, **kwargs) -> VllmTUI:
    """`attach --vllm URL` (`--record FILE`) on the fake server."""
    kwargs.setdefault("kv_events", fake.kv_endpoint)
    kwargs.setdefault("kv_replay", fake.replay_endpoint)
    return rebuilt(fake.url, record, **kwargs)


def rebuilt(url: str, record: str | None = None, **kwargs) -> VllmTUI:
    engine = RebuildEngine(url)
    if record is not None:
        engine.start_recording(record, "tests")
    kwargs.setdefault("poll_s", POLL_S)
    app = VllmTUI(engine, url, redraw_hz=20, **kwargs)
    engine.facts_from = app.vllm
    return app


def shown(app, selector) -> str:
    """What a panel shows, drawn from the state as it is now."""
    app.redraw()
    widget = app.query_one(selector)
    if isinstance(widget, PrefixTreePanel):
        return str(widget.query_one("#tree-body").content)
    rendered = widget.render()
    return getattr(rendered, "plain", None) or str(rendered)


def step_time(name: str, nth: int = 0) -> float:
    return [s["t"] for s in vllm_recorded.session()["steps"] if s["step"].startswith(name)][nth]
