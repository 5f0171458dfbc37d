"""The one dashboard on a live vLLM server without a probe (vLLM 0.32 CPU, the embedded model), through Pilot:
requests go through its proxy.

Starts vLLM twice (minutes each on a small CPU), so it runs only when vLLM's interpreter is
configured: ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python (skipped otherwise).
"""

from functools import partial

import httpx
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import find_vllm_python, start_vllm
from enginetui.vllm_probe.with_vllm import VllmTUI
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prompts import BRANCHES, SHARED
from enginetui.vllm_watch.requests_panel import WatchRequestsTable
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.support.pilot import until as wait_until
from tests.vllm_watch.watch_pilot import rebuilt

PYTHON = find_vllm_python()
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
    pytest.mark.timeout(1800),
    pytest.mark.slow,
]
SIZE = (150, 50)
WAIT_S = 120.0  # for anything the live server does
until = partial(wait_until, timeout=WAIT_S)  # the Pilot wait, with this file's deadline


async def prompt(pilot, app: VllmTUI, text: str) -> None:
    """Send a prompt through the proxy (greedy, 48 tokens past EOS: 58-60 prompt + 48 = 3 full blocks each)."""
    body = {"model": app.vllm.server.model, "prompt": text, "max_tokens": 48, "temperature": 0, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        r = await http.post(f"{app.vllm.proxy_url}/v1/completions", json=body)
    assert r.status_code == 200
    await until(pilot, lambda: not list(app.vllm.requests.values())[-1].active, f"the answer to {text[:30]!r}")
    assert list(app.vllm.requests.values())[-1].status == "finished"


def tree(app: VllmTUI):
    return app.vllm.caches.ranks[0]


async def test_the_dashboard_follows_a_live_vllm_and_its_restart(ipc_dir):
    folder = ipc_dir  # kept across the restart: the same sockets
    server = start_vllm(PYTHON, str(DEFAULT_MODEL_DIR), workdir=folder)
    try:
        app = rebuilt(
            server.url,
            kv_events=server.kv_endpoint,
            kv_replay=server.replay_endpoint,
            poll_s=0.5,
            proxy=("127.0.0.1", 0),
        )
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: app.vllm.server and app.vllm.caches.decode and app.vllm.link == "up" and app.vllm.proxy_url,
                "the model and its tokenizer",
            )
            await prompt(pilot, app, SHARED + BRANCHES[0])
            await prompt(pilot, app, SHARED + BRANCHES[1])
            await until(pilot, lambda: app.vllm.caches.ranks and tree(app).num_cached >= 4, "blocks in the tree")
            rows = tree(app).rows()
            assert "Return the number of items in the list" in rows[0].block.text  # decoded with the model's tokenizer
            assert sum(r.prefix.startswith(("├", "└")) for r in rows) == 2  # the two prompts branch
            await prompt(pilot, app, SHARED + BRANCHES[0])  # again: its blocks come from the prefix cache
            await until(
                pilot,
                lambda: (
                    (app.vllm.latest.total(m.REQUESTS_DONE) or 0) >= 3
                    and (app.vllm.latest.total(m.PREFIX_HITS) or 0) > 0
                ),
                "prefix-cache hits in /metrics",
            )
            assert app.vllm.hit_rate(recent=False) > 0
            assert app.vllm.latency(m.TTFT, "TTFT").count == 3
            assert max(app.vllm.history.gen_tok_s) > 0
            text = str(app.query_one("#tree-body").content)
            assert "Return the number of items" in text and "├ " in text
            assert "FINISHED" in app.query_one(WatchRequestsTable).render().plain
            assert "prefix-cache hits" in app.query_one("#vllm-metrics").render().plain

            await pilot.press("ctrl+r")  # its AllBlocksCleared event comes with its next step
            await until(
                pilot,
                lambda: any("vLLM reset its prefix cache" in str(n.message) for n in app._notifications),
                "vLLM's answer to ^r",
            )
            await prompt(pilot, app, SHARED + BRANCHES[1])
            await until(pilot, lambda: tree(app).num_cleared == 1 and tree(app).num_cached == 3, "the reset")
            assert len(tree(app).roots()) == 1  # only the last prompt's chain is cached now

            server.stop()  # the server goes away...
            await until(pilot, lambda: app.vllm.link == "down", "/metrics down")
            title = app.query_one("#vllm-status")  # redrawn at the next refresh after the state changes
            await until(pilot, lambda: "/metrics down" in str(title.content), "the title to say /metrics down")
            server = start_vllm(PYTHON, str(DEFAULT_MODEL_DIR), workdir=folder, port=int(server.url.rsplit(":", 1)[1]))
            await until(pilot, lambda: app.vllm.link == "up" and app.vllm.restarts == 1, "the restarted server")
            assert tree(app).num_cached == 0  # a new server's cache starts empty
            await prompt(pilot, app, SHARED + BRANCHES[1])  # ...and both links work again
            await until(pilot, lambda: tree(app).num_cached == 3, "blocks from the new server")
            app.redraw()
            assert "3/64 blocks cached" in str(app.query_one(PrefixTreePanel).query_one("#tree-body").content)
            assert app.vllm.missed_batches == 0
            assert "1 restart" in str(app.query_one("#vllm-status").content)
            app.query_one("#prompt").value = SHARED  # typed here: through the proxy, its text streams back
            await pilot.press("enter")
            await until(pilot, lambda: "r1" in app.state.requests and not app.state.requests["r1"].active, "r1")
            mine = app.state.requests["r1"]
            assert mine.status == "finished" and mine.text and mine.text == app.vllm.requests["r1"].text
    finally:
        server.stop()
