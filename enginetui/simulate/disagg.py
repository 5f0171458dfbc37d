"""Disaggregated prefill: a prefill pool and a decode pool behind vllm-router's PD mode
(`--vllm-pd-disaggregation`, src/routers/http/vllm_pd_router.rs), on one simulated clock.

At a request's arrival the router picks a prefill replica (by `--prefill-policy`) and a decode replica (by
`--decode-policy`), as vllm-router picks both before it sends anything. The prefill replica serves the
request with max_tokens 1 (what the router sends it); when that ends, its prompt's KV (prompt tokens x the
model's KV bytes per token) crosses the link at `--kv-transfer-bandwidth`, and the request enters its decode
replica with that KV in place but the last prompt token's (vLLM's KV connector: the decode instance computes
the last prompt token and samples from it), and generates all its output there. Its TTFT is its wait and
prefill on the prefill pool, the transfer, and its wait and first step on the decode pool. Transfers do not
share the link (each has the whole bandwidth), and the decode replica takes no blocks until the KV arrives.
"""

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import replace

from enginetui.core.config import EngineConfig
from enginetui.simulate.fleet import FleetReplica, FleetRun
from enginetui.simulate.fleet_events import FleetEvents
from enginetui.simulate.routers import Router
from enginetui.simulate.simulator import EngineLoop, _engine_request, collector_paused
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.workload import SimRequest


def run_disaggregated(
    config: EngineConfig,
    num_blocks: int,
    max_model_len: int,
    step_model: StepTimeModel,
    prefill_router: Router,
    decode_router: Router,
    workload: list[SimRequest],
    kv_bytes_per_token: float,
    bandwidth_bytes_s: float,
    progress: Callable[[int], None] | None = None,
    events: FleetEvents | None = None,
) -> FleetRun:
    """Serve `workload` on `prefill_router.num_replicas` prefill and `decode_router.num_replicas` decode
    engines (events: replicas 0..P-1 the prefill pool, then the decode pool)."""
    with collector_paused():
        return _run(
            config,
            num_blocks,
            max_model_len,
            step_model,
            prefill_router,
            decode_router,
            workload,
            kv_bytes_per_token / bandwidth_bytes_s,
            progress,
            events,
        )


def _run(
    config,
    num_blocks,
    max_model_len,
    model,
    prefill_router,
    decode_router,
    workload,
    seconds_per_token,
    progress,
    events,
) -> FleetRun:
    wall0 = time.perf_counter()
    reqs = sorted(workload, key=lambda r: r.arrival)
    n = len(reqs)
    num_p = prefill_router.num_replicas

    def replica(k: int) -> FleetReplica:
        observer = events.builders[k] if events else None
        return FleetReplica(k, EngineLoop(config, num_blocks, max_model_len, model, observer))

    prefill = [replica(k) for k in range(num_p)]
    decode = [replica(num_p + k) for k in range(decode_router.num_replicas)]
    for router in (prefill_router, decode_router):
        router.explain = events is not None
    caching = config.enable_prefix_caching
    routed_tokens = caching or prefill_router.needs_tokens or decode_router.needs_tokens
    p_busy: list[tuple[float, int]] = []  # (next step's start, replica) of busy prefill replicas
    d_busy: list[tuple[float, int]] = []  # the same for the decode pool
    handoffs: list[tuple[float, int, int]] = []  # (KV arrived, request position, decode replica)
    on_prefill: dict[str, tuple[int, int]] = {}  # request id -> (its position, its decode replica)
    p_choices = [0] * n
    d_choices = [0] * n
    transfer = [0.0] * n
    d_why = [""] * n
    i = 0
    steps = 0

    def start(loop: EngineLoop, busy: list, k: int) -> None:
        if loop.busy():
            heapq.heappush(busy, (model.next_start(loop.now, loop.num_steps + 1), k))
        else:
            loop.idle()

    while i < n or handoffs or p_busy or d_busy:
        t_in = min(reqs[i].arrival if i < n else math.inf, handoffs[0][0] if handoffs else math.inf)
        t_p = p_busy[0][0] if p_busy else math.inf
        t_d = d_busy[0][0] if d_busy else math.inf
        if t_p < t_in and t_p <= t_d:  # a prefill step: the prompts it ends leave for their decode replica
            k = heapq.heappop(p_busy)[1]
            loop = prefill[k].loop
            ended = len(loop.finished_order)
            loop.step(t_in)
            for done in loop.finished_order[ended:]:
                pos, kd = on_prefill.pop(loop.requests[done].request_id)
                transfer[pos] = reqs[pos].prompt_len * seconds_per_token
                heapq.heappush(handoffs, (loop.times.finish[done] + transfer[pos], pos, kd))
            start(loop, p_busy, k)
            continue
        if t_d < t_in:  # a decode step (or stretch): none runs past a prefill step's start, whose KV may come
            k = heapq.heappop(d_busy)[1]
            loop = decode[k].loop
            before = loop.num_steps
            loop.step(min(t_in, t_p))
            steps += loop.num_steps - before
            start(loop, d_busy, k)
            if progress is not None and steps >= 64:
                steps = 0
                progress(sum(d.loop.num_ended for d in decode))
            continue
        if i < n and reqs[i].arrival <= t_in:  # an arrival (before a handoff at the same time)
            r = reqs[i]
            pos = i
            i += 1
            first = replace(r, output_len=1, max_tokens=1)  # the router sends the prefill replica max_tokens 1
            request = _engine_request(first, routed_tokens, config.block_size)
            for pool in (prefill, decode):
                for rep in pool:
                    rep.now = r.arrival
            kp = prefill_router.route(request, prefill, r.arrival)
            kd = decode_router.route(request, decode, r.arrival)
            p_choices[pos], d_choices[pos] = kp, kd
            prefill[kp].routed += 1
            decode[kd].routed += 1
            if events is not None:
                events.routed(kp, f"{prefill_router.name}: {prefill_router.why}")
                d_why[pos] = f"{decode_router.name}: {decode_router.why}"
            loop = prefill[kp].loop
            idle = not loop.busy()
            if idle:
                loop.now = max(loop.now, r.arrival)
            if not caching and routed_tokens:
                request = _engine_request(first, False)
            on_prefill[r.request_id] = (pos, kd)
            if loop.add(first, request):
                if idle:
                    start(loop, p_busy, kp)
            else:  # refused (it could never fit): its decode replica refuses it too, and counts it
                del on_prefill[r.request_id]
                heapq.heappush(handoffs, (r.arrival, pos, kd))
                if idle:
                    loop.idle()
            continue
        arrived, pos, kd = heapq.heappop(handoffs)
        r = reqs[pos]
        loop = decode[kd].loop
        idle = not loop.busy()
        if idle:
            loop.now = max(loop.now, arrived)
        request = _engine_request(replace(r, arrival_time=arrived), caching, config.block_size)
        request.num_external_tokens = r.prompt_len - 1
        if events is not None:
            events.routed(num_p + kd, d_why[pos])
        loop.add(r, request)  # its times count from its own arrival at the fleet
        if idle:
            start(loop, d_busy, kd)
    if progress is not None:
        progress(sum(d.loop.num_ended for d in decode))
    wall = time.perf_counter() - wall0
    return FleetRun(
        [rep.loop.result(wall) for rep in prefill + decode],
        p_choices,
        f"{prefill_router.name} / {decode_router.name}",
        wall,
        ["prefill"] * num_p + ["decode"] * len(decode),
        d_choices,
        transfer,
    )
