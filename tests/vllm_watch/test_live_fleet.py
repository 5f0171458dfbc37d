"""The fleet view on two live vLLM servers (vLLM 0.32 CPU, the embedded model), issue #29: one
caches a shared-prefix pair of prompts, the other a different prompt; the fleet view shows each
prefix on the replica that holds it, and each replica's panel shows what its own /metrics says.

Starts two vLLM servers at once (minutes on a small CPU; one OpenMP thread each), so it runs only
when vLLM's interpreter is configured: ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python
(skipped otherwise).
"""

from concurrent.futures import ThreadPoolExecutor
from functools import partial

import httpx
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import VllmServer, find_vllm_python, start_vllm
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.fleet import fleet_rows, fleet_tree
from enginetui.vllm_watch.fleet_app import FleetApp, Replica
from enginetui.vllm_watch.prompts import BRANCHES, BURST, SHARED
from tests.support.pilot import until as wait_until

PYTHON = find_vllm_python()
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
    pytest.mark.timeout(2400),
    pytest.mark.slow,
]
SIZE = (160, 48)
WAIT_S = 180.0  # for anything a live server does
until = partial(wait_until, timeout=WAIT_S)  # the Pilot wait, with this file's deadline
MAX_TOKENS = 48  # past EOS: 58-60 prompt tokens + 48 = 3 full blocks of 32 per prompt
A_PROMPTS = (SHARED + BRANCHES[0], SHARED + BRANCHES[1])  # the shared prefix, twice: its blocks are reused
B_PROMPT = BURST[0]  # nothing in common with A's


@pytest.fixture(scope="module")
def two_servers():
    """Two vLLM servers, started side by side, one OpenMP thread each (unbound: the OS places
    them). Module-scoped: they end with this file's tests, not at the end of the session."""
    with pytest.MonkeyPatch.context() as env:  # start_vllm hands its environment to vLLM
        env.setenv("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        env.setenv("OMP_NUM_THREADS", "1")
        env.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        with ThreadPoolExecutor(2) as pool:
            starts = [pool.submit(start_vllm, PYTHON, str(DEFAULT_MODEL_DIR)) for _ in range(2)]
            try:
                servers: list[VllmServer] = [start.result() for start in starts]
            except BaseException:
                for start in starts:
                    if start.exception() is None:  # (waits for it) the other one came up: end it
                        start.result().stop()
                raise
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


async def complete(http: httpx.AsyncClient, server: VllmServer, model: str, prompt: str) -> None:
    body = {"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    r = await http.post(server.url + "/v1/completions", json=body)
    r.raise_for_status()


async def scrape(http: httpx.AsyncClient, server: VllmServer) -> m.MetricsSample:
    r = await http.get(server.url + "/metrics")
    r.raise_for_status()
    return m.parse_metrics(r.text, 0.0)


async def test_the_fleet_shows_which_replica_caches_which_prefix(two_servers):
    a, b = two_servers
    app = FleetApp([Replica(s.url, s.kv_endpoint, s.replay_endpoint) for s in (a, b)], poll_s=0.5)
    async with app.run_test(size=SIZE) as pilot, httpx.AsyncClient(timeout=600) as http:
        await until(
            pilot,
            lambda: all(
                s.server is not None and s.caches.decode is not None and s.link == "up" and s.kv_link == "up"
                for s in app.states
            ),
            "both models and their tokenizers",
            seen=lambda: "; ".join(
                f"{s.url}: model {s.server is not None}, tokenizer {s.caches.decode is not None}, "
                f"/metrics {s.link}, KV events {s.kv_link} {s.kv_error!r}"
                for s in app.states
            ),
        )
        for prompt in A_PROMPTS:
            await complete(http, a, app.states[0].server.model, prompt)
        await complete(http, b, app.states[1].server.model, B_PROMPT)

        def shared_row(rows):
            return [r for r in rows if "Return the number of items" in r.text]  # (the first block starts with BOS)

        def settled() -> bool:  # the KV events of the last steps may trail the HTTP answers
            rows = fleet_rows(fleet_tree(app.replicas))
            branches = [r for r in rows if r.prefix.startswith(("├", "└"))]
            return len(shared_row(rows)) == 1 and len(branches) == 2 and any(B_PROMPT[:10] in r.text for r in rows)

        await until(pilot, settled, "A's shared prefix with its two branches, and B's prompt")
        rows = fleet_rows(fleet_tree(app.replicas))
        shared = shared_row(rows)
        other = [r for r in rows if B_PROMPT[:10] in r.text]
        assert len(shared) == 1 and shared[0].holders == {"A"}  # the shared prefix: one chain, on A only
        assert len(other) == 1 and other[0].holders == {"B"}  # B's prompt: on B only
        assert sum(r.prefix.startswith(("├", "└")) and r.holders == {"A"} for r in rows) == 2  # A's two branches
        assert not any(r.holders == {"A", "B"} for r in rows)  # nothing is cached on both
        for name, state in app.replicas:
            assert sum(r.blocks for r in rows if name in r.holders) == state.caches.ranks[0].num_cached
        app.redraw()
        lines = str(app.query_one("#fleet-prefixes-body").content).splitlines()
        assert [line[:4] for line in lines if "Return the number of items" in line] == ["● · "]
        assert [line[:4] for line in lines if B_PROMPT[:10] in line] == ["· ● "]

        # Each panel shows its own server's /metrics, read now that both are idle.
        for (name, state), server, done in zip(app.replicas, (a, b), (len(A_PROMPTS), 1), strict=True):
            direct = await scrape(http, server)
            assert direct.total(m.REQUESTS_DONE) == done
            await until(
                pilot,
                lambda state=state, direct=direct: (
                    state.latest is not None and state.latest.total(m.REQUESTS_DONE) == direct.total(m.REQUESTS_DONE)
                ),
                f"replica {name}'s reading of its finished requests",
            )
            for metric in (m.RUNNING, m.WAITING, m.KV_USAGE, m.PREFIX_QUERIES, m.PREFIX_HITS):
                assert state.latest.total(metric) == direct.total(metric), metric
            app.redraw()
            panel = str(app.query_one(f"#replica-{name}").content)
            kv = 100 * max(direct.per_engine(m.KV_USAGE).values())
            assert (
                f"running {direct.total(m.RUNNING):.0f} · waiting {direct.total(m.WAITING):.0f}" in panel
                and f"KV {kv:.0f}%" in panel
            ), panel
            assert f"{state.caches.ranks[0].num_cached} blocks cached" in panel and server.url in panel
        assert (app.states[0].latest.total(m.PREFIX_HITS) or 0) > 0  # A's second prompt reused the shared prefix
        assert (app.states[1].latest.total(m.PREFIX_HITS) or 0) == 0
        assert "2/2 replicas answer" in str(app.query_one("#fleet-title").content)
