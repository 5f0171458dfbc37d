"""A server started without --allow-control: attached dashboards watch. Changing the engine is
refused with a typed error (HTTP 403, code "not_allowed"), reading it is not, and the dashboard
says "watch only" instead of pretending it paused."""

import asyncio

import httpx
import pytest

from enginetui.core.engine import control
from enginetui.core.entrypoints.openai.control_gate import WATCH_ONLY
from enginetui.dashboard.app import EngineTUI
from enginetui.serve.remote_engine import RemoteEngine
from tests.serve.serving import ServerProcess

WAIT_S = 60.0  # bound on every wait below


@pytest.fixture(scope="module")
def watch_only_server():
    srv = ServerProcess("--num-gpu-blocks-override", "24")
    yield srv
    assert srv.stop() == 0


def test_changing_the_engine_is_refused_reading_it_is_not(watch_only_server):
    with httpx.Client(base_url=watch_only_server.url, timeout=WAIT_S) as http:
        for op, value in (
            ("pause", None),
            ("step_once", None),
            ("set_step_interval", 0.5),
            ("reset_prefix_cache", None),
            ("resume", None),
        ):
            r = http.post("/v1/enginetui/control", json={"op": op, "value": value})
            assert r.status_code == 403
            assert r.json() == {"op": op, "error": {"code": "not_allowed", "message": WATCH_ONLY}}
        r = http.post("/v1/enginetui/control", json={"op": "snapshot"})
        assert r.status_code == 200 and r.json()["result"]["kind"] == "snapshot" and not r.json()["result"]["paused"]
        r = http.post("/v1/enginetui/control", json={"op": "fly"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_call"
        assert http.get("/v1/enginetui/info").json()["allow_control"] is False


@pytest.mark.timeout(180)
async def test_a_watch_only_dashboard_says_so_and_does_not_pretend(watch_only_server):
    remote = RemoteEngine.connect(watch_only_server.url, None)
    try:
        assert not remote.can_control and remote.device.endswith("watch only")
        with pytest.raises(control.ControlNotAllowed, match="watch only"):
            await remote.pause()
        app = EngineTUI(remote, probe=remote.probe, seed=0)
        async with app.run_test(size=(120, 40)) as pilot:
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while app.phase != "ready":
                assert asyncio.get_running_loop().time() < deadline, "the dashboard did not attach"
                await pilot.pause(0.05)
            offered = {b.binding.action for b in app.active_bindings.values() if b.enabled and b.binding.show}
            assert "burst(8)" in offered or "burst" in offered  # the footer offers what works ...
            assert not offered & {"pause", "resume", "step", "pace(1)", "pace(-1)"}  # ... and not what is refused
            for key in ("ctrl+p", "pagedown"):
                app.clear_notifications()
                await pilot.press(key)
                while not any("watch only" in n.message for n in app._notifications):
                    assert asyncio.get_running_loop().time() < deadline, f"no 'watch only' notice for {key}"
                    await pilot.pause(0.05)
            assert not app.paused and not app.state.paused  # nothing paused, and the keys do not claim it
            assert app.state.step_interval_ms == 0 and app.query_one("#prompt").value == ""  # PgDn did nothing
            await pilot.press("ctrl+q")
    finally:
        remote.shutdown()
