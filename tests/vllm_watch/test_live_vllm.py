"""The dashboard on a live vLLM server (vLLM 0.32 CPU, the embedded model), driven through Pilot.

Starts vLLM twice (minutes each on a small CPU), so it runs only when vLLM's interpreter is
configured: ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python (skipped otherwise).
"""

import tempfile
from dataclasses import replace
from functools import partial

import pytest

from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.vllm_launch import find_vllm_python, start_vllm
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.app import VllmWatchApp
from enginetui.vllm_watch.prompts import BRANCHES, SHARED
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.support.pilot import until as wait_until
from tests.vllm_watch.recorded import MODEL_DIR

PYTHON = find_vllm_python()
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
    pytest.mark.timeout(1800),
    pytest.mark.slow,
]
SIZE = (150, 50)
WAIT_S = 120.0  # for anything the live server does
until = partial(wait_until, timeout=WAIT_S)  # the Pilot wait, with this file's deadline


async def send(pilot, app: VllmWatchApp, line: str) -> None:
    """Type a line into the prompt box and send it (the box filled in one go: Pilot is slow per key)."""
    app.query_one("#prompt").value = line
    await pilot.press("enter")


async def prompt(pilot, app: VllmWatchApp, text: str) -> None:
    """Send a prompt and wait until its completion ended."""
    before = len(app.state.requests)
    await send(pilot, app, text)
    await until(
        pilot,
        lambda: len(app.state.requests) > before and not list(app.state.requests.values())[-1].active,
        f"the answer to {text[:30]!r}",
    )
    assert list(app.state.requests.values())[-1].status == "finished"


def tree(app: VllmWatchApp):
    return app.state.caches.ranks[0]


async def test_the_dashboard_follows_a_live_vllm_and_its_restart():
    folder = tempfile.mkdtemp(prefix="vw-")
    server = start_vllm(PYTHON, str(MODEL_DIR), workdir=folder)
    try:
        app = VllmWatchApp(server.url, kv_events=server.kv_endpoint, kv_replay=server.replay_endpoint, poll_s=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: app.state.server is not None and app.state.caches.decode is not None and app.state.link == "up",
                "the model and its tokenizer",
            )
            for line in ("/set max 48", "/set temp 0"):
                await send(pilot, app, line)
            bar = app.query_one(
                PromptBar
            )  # and past EOS (not /set-able): 58-60 prompt + 48 tokens = 3 full blocks each
            bar.settings = replace(bar.settings, ignore_eos=True)
            await prompt(pilot, app, SHARED + BRANCHES[0])
            await prompt(pilot, app, SHARED + BRANCHES[1])
            await until(pilot, lambda: app.state.caches.ranks and tree(app).num_cached >= 4, "blocks in the tree")
            rows = tree(app).rows()
            assert "Return the number of items in the list" in rows[0].block.text  # decoded with the model's tokenizer
            assert sum(r.prefix.startswith(("├", "└")) for r in rows) == 2  # the two prompts branch
            await prompt(pilot, app, SHARED + BRANCHES[0])  # again: its blocks come from the prefix cache
            await until(
                pilot,
                lambda: (
                    (app.state.latest.total(m.REQUESTS_DONE) or 0) >= 3
                    and (app.state.latest.total(m.PREFIX_HITS) or 0) > 0
                ),
                "prefix-cache hits in /metrics",
            )
            assert app.state.hit_rate(recent=False) > 0
            assert app.state.latency(m.TTFT, "TTFT").count == 3
            assert max(app.state.history.gen_tok_s) > 0
            text = str(app.query_one("#tree-body").content)
            assert "Return the number of items" in text and "├ " in text
            assert "FINISHED" in app.query_one(RequestsTable).render().plain
            assert "prefix-cache hits" in app.query_one("#watch-server").render().plain

            await pilot.press(
                "ctrl+r"
            )  # vLLM resets its prefix cache; its AllBlocksCleared event comes with its next step
            await prompt(pilot, app, SHARED + BRANCHES[1])
            await until(pilot, lambda: tree(app).num_cleared == 1 and tree(app).num_cached == 3, "the reset")
            assert len(tree(app).roots()) == 1  # only the last prompt's chain is cached now

            server.stop()  # the server goes away...
            await until(pilot, lambda: app.state.link == "down", "/metrics down")
            title = app.query_one("#watch-title")  # redrawn at the next refresh after the state changes
            await until(pilot, lambda: "/metrics down" in str(title.content), "the title to say /metrics down")
            server = start_vllm(PYTHON, str(MODEL_DIR), workdir=folder, port=int(server.url.rsplit(":", 1)[1]))
            await until(pilot, lambda: app.state.link == "up" and app.state.restarts == 1, "the restarted server")
            assert tree(app).num_cached == 0  # a new server's cache starts empty
            await prompt(pilot, app, SHARED + BRANCHES[1])  # ...and both links work again
            await until(pilot, lambda: tree(app).num_cached == 3, "blocks from the new server")
            app.redraw()
            assert "3/64 blocks cached" in str(app.query_one(PrefixTreePanel).query_one("#tree-body").content)
            assert app.state.missed_batches == 0
            assert "1 restart" in str(app.query_one("#watch-title").content)
    finally:
        server.stop()
