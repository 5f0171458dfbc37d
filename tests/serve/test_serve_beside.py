"""`enginetui --serve PORT`: the dashboard and the server on one engine, in one event loop. The
dashboard shows a request sent over HTTP; its own typed prompt counts in /metrics too."""

import re

import httpx
import pytest

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.serve.cli import ServerBeside
from enginetui.serve.process import wait_gone
from enginetui.settings import SamplingSettings
from tests.support.pilot import until

WAIT_S = 60.0  # every wait below is bounded by this


def metric(text: str, name: str) -> float:
    labels = f'{{engine="0",model_name="{DEFAULT_MODEL_DIR}"}}'  # the served name: the embedded model's path
    return float(re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M).group(1))


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_dashboard_and_server_share_one_engine():
    server = ServerBeside(0, "beside-key")
    engine = server.wrap(AsyncLLM.from_engine_args(model=None, num_gpu_blocks_override=64, seed=0))
    pid = engine.engine_pid
    app = EngineTUI(engine, seed=0)
    headers = {"Authorization": "Bearer beside-key", "X-Request-Id": "via-http"}
    try:
        async with (
            server.serving(),
            app.run_test(size=(120, 40)) as pilot,
            httpx.AsyncClient(base_url=server.url, headers=headers, timeout=WAIT_S) as http,
        ):
            await until(pilot, lambda: app.phase == "ready", "the dashboard")
            assert (await http.get("/v1/models", headers={"Authorization": ""})).status_code == 401
            r = await http.post("/v1/completions", json={"prompt": "The function", "max_tokens": 8, "ignore_eos": True})
            assert r.status_code == 200 and r.json()["id"] == "cmpl-via-http"
            await until(
                pilot,
                lambda: (
                    app.state.requests.get("cmpl-via-http") is not None
                    and app.state.requests["cmpl-via-http"].status == "finished"
                ),
                "the HTTP request on screen",
            )
            assert app.state.requests["cmpl-via-http"].num_output_tokens == 8

            app.query_one(PromptBar).settings = SamplingSettings(max_tokens=5, ignore_eos=True)
            await pilot.press(*"A class is", "enter")
            await until(
                pilot,
                lambda: "r1" in app.state.requests and app.state.requests["r1"].status == "finished",
                "the typed prompt to finish",
            )
            text = (await http.get("/metrics")).text
            assert metric(text, "vllm:e2e_request_latency_seconds_count") == 2  # both front ends count
            assert metric(text, "vllm:generation_tokens_total") == 8 + 5
            await pilot.press("ctrl+q")
    finally:
        engine.shutdown()
    assert wait_gone(pid, 10)
    with pytest.raises(httpx.ConnectError):  # the server stopped with the dashboard
        httpx.get(f"{server.url}/health", timeout=5)
