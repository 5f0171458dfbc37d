"""The vLLM dashboard in Pilot on the fake vLLM server: how a test builds it and reads what it shows."""

from enginetui.vllm_watch.app import VllmWatchApp
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.fakes.vllm_server import FakeVllm
from tests.vllm_watch import recorded

POLL_S = 0.05  # read /metrics often: the tests wait less


def watch(fake: FakeVllm, **kwargs) -> VllmWatchApp:
    kwargs.setdefault("kv_events", fake.kv_endpoint)
    kwargs.setdefault("kv_replay", fake.replay_endpoint)
    return VllmWatchApp(fake.url, poll_s=POLL_S, redraw_hz=20, **kwargs)


def shown(app, selector) -> str:
    """What a panel shows, drawn from the state as it is now."""
    app.redraw()
    widget = app.query_one(selector)
    if isinstance(widget, PrefixTreePanel):
        return str(widget.query_one("#tree-body").content)
    rendered = widget.render()
    return getattr(rendered, "plain", None) or str(rendered)


def step_time(name: str, nth: int = 0) -> float:
    return [s["t"] for s in recorded.session()["steps"] if s["step"].startswith(name)][nth]
