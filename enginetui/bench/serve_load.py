"""Sending a workload to an OpenAI-compatible server, as the serving benchmarks do, and the flags
that start `enginetui serve` with given engine arguments.

Each request is a streamed /v1/completions with token-id prompts, ignore_eos and max_tokens = the
request's output length, sent at its arrival time (a seeded Poisson process at the request rate,
or all at once); the client (stream_client.py) records when each chunk carrying tokens arrived.
"""

import argparse
import asyncio
import json
import time
from typing import Any

import httpx

from enginetui.bench.latency import RequestTiming, arrival_offsets
from enginetui.bench.stream_client import stream_events
from enginetui.bench.workload import BenchRequest
from enginetui.flags.engine import ENGINE_FLAGS

TEMPERATURE = 1.0  # every request samples, top_p 1 (LLM.generate's passes against a server too)


async def send(
    url: str, headers: dict[str, str], model: str, req: BenchRequest, delay: float, t0: float
) -> RequestTiming:
    """One streamed request, sent `delay` s after `t0`; its timings as the client saw them."""
    await asyncio.sleep(max(0.0, t0 + delay - time.perf_counter()))
    body = {
        "model": model,
        "prompt": req.prompt_token_ids,
        "max_tokens": req.output_len,
        "ignore_eos": True,
        "temperature": TEMPERATURE,
        "top_p": 1.0,
        "stream": True,
        "return_token_ids": True,
    }
    timing = RequestTiming(sent=time.perf_counter())

    def on_data(data: bytes) -> None:
        if not data.startswith(b"{"):
            return
        new = sum(len(c.get("token_ids") or []) for c in json.loads(data)["choices"])
        if new:
            timing.token_times.append(time.perf_counter())
            timing.num_output_tokens += new

    await stream_events(url, "/v1/completions", body, on_data, headers)
    timing.done = time.perf_counter()
    return timing


async def run_workload(
    url: str,
    api_key: str | None,
    workload: list[BenchRequest],
    warmup: list[BenchRequest],
    rate: float,
    seed: int,
    timeout_s: float,
) -> tuple[list[RequestTiming], float]:
    """Warm the server up, then send the workload on its arrival schedule; timings and duration.
    A pass (warm-up included) that runs past `timeout_s` raises TimeoutError."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def go() -> tuple[list[RequestTiming], float]:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as client:
            model = (await client.get("/v1/models")).raise_for_status().json()["data"][0]["id"]
        await asyncio.gather(*(send(url, headers, model, r, 0.0, time.perf_counter()) for r in warmup))
        offsets = arrival_offsets(len(workload), rate, seed)
        t0 = time.perf_counter()
        timings = await asyncio.gather(*(send(url, headers, model, r, offsets[i], t0) for i, r in enumerate(workload)))
        return list(timings), max(t.done for t in timings) - t0

    try:
        return await asyncio.wait_for(go(), timeout_s)
    except TimeoutError:
        raise TimeoutError(f"a pass of the workload against {url} ran past --timeout-s {timeout_s:g}") from None


def serve_flags(kwargs: dict[str, Any]) -> list[str]:
    """`enginetui serve` flags for these engine keyword arguments (vLLM's names)."""
    flags = []
    for spec in ENGINE_FLAGS:
        value = kwargs.get(spec.dest)
        if value is None:
            continue
        if spec.kwargs.get("action") is argparse.BooleanOptionalAction:
            flags.append(spec.flag if value else f"--no-{spec.flag[2:]}")
        elif isinstance(value, list):
            flags += [spec.flag, *map(str, value)]
        else:
            flags += [spec.flag, str(value)]
    if kwargs.get("skip_tokenizer_init"):
        flags.append("--skip-tokenizer-init")
    return flags
