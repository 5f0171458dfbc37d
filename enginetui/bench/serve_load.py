"""Sending a workload to an OpenAI-compatible server, as the serving benchmarks do, and the flags
that start `enginetui serve` with given engine arguments.

A workload is the simulator's requests (enginetui/simulate/workload.py), so a trace's requests are sent as
`enginetui simulate` serves them. Each is a streamed /v1/completions with its token-id prompt, ignore_eos and
max_tokens = its output length, sent at its arrival; the client (enginetui/openai_client.py) records when each chunk
carrying tokens arrived.
"""

import asyncio
import json
import time
from typing import Any

import httpx

from enginetui.bench.latency import RequestTiming
from enginetui.bench.router_prompts import prompt_text
from enginetui.flags.engine import ENGINE_FLAGS, as_flags
from enginetui.openai_client import EventError, auth_headers, error_message, stream_events
from enginetui.simulate.workload import SimRequest, prompt_token_ids

TEMPERATURE = 1.0  # every request samples, top_p 1 (LLM.generate's passes against a server too)


def request_body(model: str, req: SimRequest, words: list[str] | None = None) -> dict[str, Any]:
    """The /v1/completions body of one request: its token-id prompt (with `words`: as text, one word a token,
    enginetui/bench/router_prompts.py), run to its output length."""
    prompt = prompt_token_ids(req)
    text = {"prompt": prompt_text(prompt, words), "add_special_tokens": False} if words is not None else {}
    return {
        "model": model,
        "prompt": prompt,
        **text,
        "max_tokens": req.output_len,
        "ignore_eos": True,
        "temperature": TEMPERATURE,
        "top_p": 1.0,
        "stream": True,
        "return_token_ids": True,
    }


async def send(
    url: str, headers: dict[str, str], model: str, req: SimRequest, t0: float, words: list[str] | None = None
) -> RequestTiming:
    """One streamed request, sent at its arrival (seconds after `t0`); its timings as the client saw them."""
    await asyncio.sleep(max(0.0, t0 + req.arrival - time.perf_counter()))
    body = request_body(model, req, words)
    timing = RequestTiming(sent=time.perf_counter())

    def on_data(data: bytes) -> None:
        if not data.startswith(b"{"):
            return
        chunk = json.loads(data)
        if "error" in chunk:
            raise EventError(error_message(data))
        new = sum(len(c.get("token_ids") or []) for c in chunk["choices"])
        if new:
            timing.token_times.append(time.perf_counter())
            timing.num_output_tokens += new

    await stream_events(url, "/v1/completions", body, on_data, headers)
    timing.done = time.perf_counter()
    return timing


async def run_workload(
    url: str,
    api_key: str | None,
    workload: list[SimRequest],
    warmup: list[SimRequest],
    timeout_s: float,
    words: list[str] | None = None,
) -> tuple[list[RequestTiming], float]:
    """Warm the server up, then send the workload, each request at its arrival (prompts as text with `words`);
    timings and duration. A pass (warm-up included) that runs past `timeout_s` raises TimeoutError."""
    headers = auth_headers(api_key)

    async def go() -> tuple[list[RequestTiming], float]:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as client:
            model = (await client.get("/v1/models")).raise_for_status().json()["data"][0]["id"]
        await asyncio.gather(*(send(url, headers, model, r, time.perf_counter(), words) for r in warmup))
        t0 = time.perf_counter()
        timings = await asyncio.gather(*(send(url, headers, model, r, t0, words) for r in workload))
        return list(timings), max(t.done for t in timings) - t0

    try:
        return await asyncio.wait_for(go(), timeout_s)
    except TimeoutError:
        raise TimeoutError(f"a pass of the workload against {url} ran past --timeout-s {timeout_s:g}") from None


def serve_flags(kwargs: dict[str, Any]) -> list[str]:
    """`enginetui serve` flags for these engine keyword arguments (vLLM's names)."""
    flags = as_flags({spec.dest: kwargs[spec.dest] for spec in ENGINE_FLAGS if kwargs.get(spec.dest) is not None})
    if kwargs.get("skip_tokenizer_init"):
        flags.append("--skip-tokenizer-init")
    return flags
