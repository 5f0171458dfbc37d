"""A bounded load test on 127.0.0.1: 64 concurrent streaming clients, some of which hang up mid-
stream and some of which send bad requests, on a 24-block pool (so the engine preempts).

Afterwards every good request either completed (its stream ended with a finish reason and
[DONE]) or, if its client hung up, the engine ended it; the engine holds no request and no
block; and the server still answers. Every loop is bounded in count and in time.
"""

import asyncio
import contextlib
import json
import random
import threading
import time
from dataclasses import dataclass

import httpx
from websockets.sync.client import connect

from enginetui.core.engine.events import decode_event
from tests.serve.serving import API_KEY, engine_idle

CLIENTS = 64  # concurrent clients
REQUESTS_PER_CLIENT = 2  # requests each client sends, one after the other
BAD_SHARE = 0.2  # of requests that are bad on purpose
HANGUP_SHARE = 0.25  # of good requests whose client hangs up after a few chunks
DEADLINE_S = 240.0  # the whole load, however slow the machine
PROMPTS = ("The function", "A class is", "In Python,", "An exception", "The module", "Return the")

# Bad requests: (what, how to send it, the status it must get)
BAD = {
    "malformed json": (dict(content=b'{"prompt": "x", ', headers={"Content-Type": "application/json"}), 422),
    "bad temperature": (dict(json={"prompt": "x", "temperature": -3}), 400),
    "unknown model": (dict(json={"prompt": "x", "model": "nope"}), 404),
    "no key": (dict(json={"prompt": "x"}, headers={"Authorization": ""}), 401),
    "too long": (dict(json={"prompt": [7] * 600}), 400),
    "never fits the pool": (dict(json={"prompt": "x", "max_tokens": 450, "ignore_eos": True}), 400),
}


@dataclass
class Outcome:
    """What one request's client saw."""

    req_id: str  # the engine request id (cmpl-<X-Request-Id>)
    kind: str  # "complete", "hangup" or the bad-request kind
    status: int = 0  # HTTP status
    finish_reason: str | None = None  # of a completed stream
    done: bool = False  # [DONE] arrived


async def one_request(client: httpx.AsyncClient, rng: random.Random, name: str) -> Outcome:
    req_id = f"cmpl-{name}"
    headers = {"X-Request-Id": name}
    if rng.random() < BAD_SHARE:
        kind = rng.choice(sorted(BAD))
        send, _ = BAD[kind]
        r = await client.post("/v1/completions", **{**send, "headers": {**headers, **send.get("headers", {})}})
        return Outcome(req_id, kind, r.status_code)
    hangup_after = rng.randint(1, 4) if rng.random() < HANGUP_SHARE else None
    body = {
        "model": "default",
        "prompt": rng.choice(PROMPTS),
        "max_tokens": rng.randint(8, 32),
        "stream": True,
        "temperature": rng.choice([0, 0.8]),
        "ignore_eos": rng.random() < 0.5,
    }
    out = Outcome(req_id, "hangup" if hangup_after else "complete")
    chunks = 0
    async with client.stream("POST", "/v1/completions", json=body, headers=headers) as r:
        out.status = r.status_code
        async for line in r.aiter_lines():
            if line == "data: [DONE]":
                out.done = True
            elif line.startswith("data: "):
                choice = json.loads(line[6:])["choices"][0]
                out.finish_reason = choice["finish_reason"] or out.finish_reason
                chunks += 1
                if hangup_after is not None and chunks >= hangup_after:
                    break  # hang up mid-stream
    return out


async def client_loop(url: str, index: int) -> list[Outcome]:
    rng = random.Random(index)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120) as c:
        return [await one_request(c, rng, f"load-{index}-{k}") for k in range(REQUESTS_PER_CLIENT)]


class EngineEnds:
    """Every request end the engine reports, read from the event stream in a thread."""

    def __init__(self, ws) -> None:
        self.ends: dict[str, list[str]] = {}  # request id -> reasons it ended with (one expected)
        self.dropped = 0  # events this subscriber missed
        self._ws = ws  # the event stream, greeting already read
        self._stop = threading.Event()  # tells the reader to finish
        self._thread = threading.Thread(target=self._read, daemon=True)  # the reader

    @classmethod
    @contextlib.contextmanager
    def following(cls, url: str):
        with connect(
            url.replace("http://", "ws://") + "/v1/enginetui/events",
            additional_headers={"Authorization": f"Bearer {API_KEY}"},
            open_timeout=30,
        ) as ws:
            ws.recv(timeout=30)  # the greeting snapshot
            ends = cls(ws)
            ends._thread.start()
            try:
                yield ends
            finally:
                ends._stop.set()
                ends._thread.join(5)

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                event = decode_event(self._ws.recv(timeout=0.2))
            except TimeoutError:
                continue
            except Exception:  # noqa: BLE001 - closed
                return
            self.dropped += event.num_dropped_events
            for end in (*event.finished, *event.rejected):
                self.ends.setdefault(end.req_id, []).append(end.reason)


async def all_clients(url: str) -> list[list[Outcome]]:
    return await asyncio.wait_for(asyncio.gather(*(client_loop(url, i) for i in range(CLIENTS))), DEADLINE_S)


def test_64_concurrent_streaming_clients_with_hangups_and_bad_requests(server, http):
    started = time.monotonic()
    with EngineEnds.following(server.url) as ends:
        results = asyncio.run(all_clients(server.url))
        state = engine_idle(http, timeout=30)  # no request left in the engine, every block free
        time.sleep(0.5)  # the last events reach the reader
    outcomes = [o for per_client in results for o in per_client]
    assert len(outcomes) == CLIENTS * REQUESTS_PER_CLIENT
    kinds = {o.kind for o in outcomes}
    assert {"complete", "hangup"} <= kinds and len(kinds & set(BAD)) >= 4, kinds

    for o in outcomes:
        if o.kind in BAD:
            assert o.status == BAD[o.kind][1], (o.kind, o.status)
        elif o.kind == "complete":
            assert o.status == 200 and o.done and o.finish_reason in ("stop", "length"), o
        else:
            assert o.status == 200
    assert state["num_free_blocks"] == state["num_blocks"]

    good = [o for o in outcomes if o.kind in ("complete", "hangup")]
    if ends.dropped == 0:  # the event stream saw everything: the engine ended each good request exactly once
        for o in good:
            assert len(ends.ends.get(o.req_id, [])) == 1, (o, ends.ends.get(o.req_id))
            reason = ends.ends[o.req_id][0]
            assert reason in (("stop", "length") if o.kind == "complete" else ("stop", "length", "abort")), (o, reason)
        assert any(ends.ends[o.req_id] == ["abort"] for o in good if o.kind == "hangup")
    bad_ids = [o.req_id for o in outcomes if o.kind in BAD and o.kind != "never fits the pool"]
    assert not any(i in ends.ends for i in bad_ids)  # refused before reaching the engine

    assert http.get("/health").status_code == 200
    r = http.post("/v1/completions", json={"prompt": "The function", "max_tokens": 5})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    print(
        f"load: {len(outcomes)} requests in {time.monotonic() - started:.1f} s, "
        f"{sum(o.kind == 'hangup' for o in outcomes)} hung up, {sum(o.kind in BAD for o in outcomes)} bad, "
        f"{ends.dropped} events missed by the test's subscriber"
    )
