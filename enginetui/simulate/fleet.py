"""A fleet: several simulated engines (each its own scheduler, KV pool and clock: simulator.EngineLoop) behind
a router (routers.py), on one simulated clock.

Requests are routed in arrival order. A replica's step runs when it starts before the next arrival; an
arrival is routed once every busy replica's next step starts at or after it, so each replica takes it in
between steps exactly as a single engine does (Simulator.run). The router's load per replica counts the
requests routed to it that have not finished by the arrival's time. With a front-end (the served path,
`front_end_seconds` a request), a routed request first waits in its replica's front-end queue and enters the
engine when the front-end is done with it (front_end_entries), as a later arrival of its own. With a shared
host (`shared_host_slowdown` s), a replica's step takes 1 + s x (the share of the other replicas busy as it
starts) of its model's time: replicas on one machine, whose steps contend for its memory bandwidth and caches.
"""

import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from enginetui.core.config import EngineConfig
from enginetui.core.request import Request
from enginetui.simulate.fleet_events import FleetEvents
from enginetui.simulate.routers import Router
from enginetui.simulate.simulator import EngineLoop, FrontEnd, SimRun, _engine_request, collector_paused
from enginetui.simulate.step_time import SharedHost, StepTimeModel
from enginetui.simulate.workload import SimRequest


class FleetReplica:
    """One engine of the fleet, as the router sees it (routers.Replica)."""

    def __init__(self, index: int, loop: EngineLoop) -> None:
        self.index = index
        self.loop = loop
        self.routed = 0  # requests routed to it
        self.finished_seen = 0  # of which the router knows finished (by `now`)
        self.now = 0.0  # the router's clock, set before each routing

    def load(self) -> int:
        ends = self.loop.finish_times
        while self.finished_seen < len(ends) and ends[self.finished_seen] <= self.now:
            self.finished_seen += 1
        return self.routed - self.finished_seen

    def cached_prefix_blocks(self, block_hashes: list[bytes]) -> int:
        self.loop.commit()  # the steps planned ahead that ran, applied
        pool = self.loop.sched.kv.pool
        n = 0
        for h in block_hashes:
            if not pool.cached.get(h):
                break
            n += 1
        return n

    def num_waiting(self) -> int:
        return len(self.loop.sched.waiting)  # a plan ahead runs only while nothing waits

    def kv_usage(self) -> float:
        self.loop.commit()
        pool = self.loop.sched.kv.pool
        return 1 - pool.num_free_blocks / max(pool.num_blocks, 1)


@dataclass(slots=True)
class FleetRun:
    """What a fleet simulation produced."""

    replicas: list[SimRun]  # per replica, its requests in the order it took them
    choices: list[int]  # per workload request (sorted by arrival): the replica it was routed to (its prefill one)
    router: str  # the router's name
    wall_seconds: float  # how long simulating took here
    roles: list[str] = field(default_factory=list)  # per replica: "replica", or "prefill" / "decode" (disaggregated)
    decode_choices: list[int] = field(default_factory=list)  # disaggregated: per request its decode replica (of D)
    transfer_seconds: list[float] = field(default_factory=list)  # disaggregated: per request its KV transfer


def run_fleet(
    config: EngineConfig,
    num_blocks: int | Sequence[int],
    max_model_len: int,
    step_model: StepTimeModel | Sequence[StepTimeModel],
    num_replicas: int,
    router: Router,
    workload: list[SimRequest],
    progress: Callable[[int], None] | None = None,
    fast_forward: bool = True,
    events: FleetEvents | None = None,
    front_end_seconds: float = 0.0,
    shared_host_slowdown: float = 0.0,
    front_end_token_seconds: float = 0.0,
    front_end_step_seconds: float = 0.0,
    router_tokenize_seconds: float = 0.0,
) -> FleetRun:
    """Serve `workload` on `num_replicas` engines behind `router`, alike or, where `num_blocks` and `step_model`
    are sequences, each replica its own KV pool and step-time model (a mixed fleet); `events`: build each
    replica's step events (a watched or recorded fleet) and say why the router chose each replica;
    `front_end_seconds`: each replica's front-end takes that long a request, one at a time, before the request
    enters its engine (the request's times still count from its arrival), and with `front_end_step_seconds`
    and `front_end_token_seconds` it also streams each step's tokens in the same queue (simulator.FrontEnd);
    `shared_host_slowdown`: how much longer a replica's step takes while all the other replicas are busy (0.3:
    30%; they share one machine); `router_tokenize_seconds`: with a router that asks every replica to tokenize a
    prompt before routing it (Router.asks_replicas), each replica's front-end works that long on each request at
    its arrival, and the request reaches its replica's front-end when every replica has answered."""
    if num_replicas < 1:
        raise ValueError(f"--replicas must be at least 1, got {num_replicas}")
    if not shared_host_slowdown >= 0:
        raise ValueError(f"--shared-host-slowdown must be non-negative, got {shared_host_slowdown:g}")
    with collector_paused():
        return _run_fleet(
            config,
            num_blocks,
            max_model_len,
            step_model,
            num_replicas,
            router,
            workload,
            progress,
            fast_forward,
            events,
            front_end_seconds,
            shared_host_slowdown,
            front_end_token_seconds,
            front_end_step_seconds,
            router_tokenize_seconds,
        )


def _run_fleet(
    config,
    num_blocks,
    max_model_len,
    step_model,
    num_replicas,
    router,
    workload,
    progress,
    fast_forward,
    events,
    front_end_seconds,
    shared_host_slowdown,
    front_end_token_seconds,
    front_end_step_seconds,
    router_tokenize_seconds,
) -> FleetRun:
    wall0 = time.perf_counter()
    reqs = sorted(workload, key=lambda r: r.arrival)
    n = len(reqs)
    models = list(step_model) if isinstance(step_model, Sequence) else [step_model] * num_replicas
    pools = list(num_blocks) if isinstance(num_blocks, Sequence) else [num_blocks] * num_replicas
    if len(models) != num_replicas or len(pools) != num_replicas:
        raise ValueError(f"a mixed fleet needs a step-time model and a KV pool for each of its {num_replicas} replicas")
    # shared host: each replica's clock its own model's, scaled before each of its steps (so no steps planned ahead)
    shared = [SharedHost(m) for m in models] if shared_host_slowdown and num_replicas > 1 else []
    fronts = [FrontEnd(front_end_seconds, front_end_token_seconds, front_end_step_seconds) for _ in range(num_replicas)]
    replicas = [
        FleetReplica(
            k,
            EngineLoop(
                config,
                pools[k],
                max_model_len,
                shared[k] if shared else models[k],
                events.builders[k] if events else None,
                fast_forward and not shared,
                front_end=fronts[k],
            ),
        )
        for k in range(num_replicas)
    ]
    router.explain = events is not None
    choices: list[int] = []
    busy: list[tuple[float, int]] = []  # (next step's start, replica) of busy replicas
    real_tokens = config.enable_prefix_caching or router.needs_tokens
    tokenize = router_tokenize_seconds if router.asks_replicas else 0.0  # each replica's work on each prompt
    # requests in a front-end: (entry, order, replica, request, engine request, the router's reason)
    entering: list[tuple[float, int, int, SimRequest, Request, str]] = []
    pending: list[deque[float]] = [deque() for _ in range(num_replicas)]  # per replica: its front-end's entries
    i = 0
    steps = 0
    while i < n or busy or entering:
        arrival = reqs[i].arrival if i < n else math.inf
        entry = entering[0][0] if entering else math.inf
        if busy and busy[0][0] < min(arrival, entry):
            _, k = heapq.heappop(busy)
            loop = replicas[k].loop
            if shared:  # the others busy now: with work left, or still in a step that ends after this one starts
                others = sum(r.loop.busy() or r.loop.now > loop.now for r in replicas) - 1
                shared[k].factor = 1 + shared_host_slowdown * others / (num_replicas - 1)
            before = loop.num_steps
            loop.step(min(arrival, pending[k][0] if pending[k] else math.inf))
            steps += loop.num_steps - before
            if loop.busy():
                heapq.heappush(busy, (models[k].next_start(loop.now, loop.num_steps + 1), k))
            else:
                loop.idle()
            if progress is not None and steps >= 64:
                steps = 0
                progress(sum(r.loop.num_ended for r in replicas))
            continue
        if entry <= arrival:  # a request through its front-end enters its engine
            entry, _, k, r, request, why = heapq.heappop(entering)
            pending[k].popleft()  # (a front-end's entries come in order)
        else:
            r = reqs[i]
            i += 1
            request = _engine_request(r, real_tokens, config.block_size)
            for replica in replicas:
                replica.now = r.arrival
            k = router.route(request, replicas, r.arrival)
            choices.append(k)
            why = f"{router.name}: {router.why}" if events is not None else ""
            replicas[k].routed += 1
            if not config.enable_prefix_caching and real_tokens:
                request = _engine_request(r, False)  # the engine needs no token values: the cheap stand-ins
            if front_end_seconds or fronts[k].streams or tokenize:
                # routed once every replica has tokenized the prompt (the routing itself is decided at the arrival)
                asked = max(front.work(r.arrival, tokenize) for front in fronts) if tokenize else r.arrival
                entry = fronts[k].take(asked)
                heapq.heappush(entering, (entry, i, k, r, request, why))
                pending[k].append(entry)
                continue
            entry = r.arrival
        if events is not None:
            events.routed(k, why)
        loop = replicas[k].loop
        idle = not loop.busy()
        if idle:
            loop.now = max(loop.now, entry)  # idle until this arrival
        loop.add(r, request)
        if idle and loop.busy():
            heapq.heappush(busy, (models[k].next_start(loop.now, loop.num_steps + 1), k))
        elif not loop.busy():
            loop.idle()  # rejected
    for front in fronts:
        front.flush()
    if progress is not None:
        progress(sum(r.loop.num_ended for r in replicas))
    wall = time.perf_counter() - wall0
    return FleetRun([r.loop.result(wall) for r in replicas], choices, router.name, wall, ["replica"] * num_replicas)


def merged_run(fleet: FleetRun) -> SimRun:
    """The fleet's replicas as one run: every request (disaggregated: as its decode replica served it, the
    arrival its own), every step of every replica, the counts summed (disaggregated: prefix caching's
    lookups those of the prefill pool, where prompts are computed)."""
    from array import array

    runs = fleet.replicas
    roles = fleet.roles or ["replica"] * len(runs)
    served = [run for run, role in zip(runs, roles) if role != "prefill"]  # whose requests the clients see
    prompts = [run for run, role in zip(runs, roles) if role != "decode"]  # where prompts are computed
    first = runs[0]

    def cat(name: str, part: str, over: list[SimRun]):
        out = array(getattr(getattr(first, part), name).typecode)
        for run in over:
            out.extend(getattr(getattr(run, part), name))
        return out

    times = type(first.times)(*(cat(name, "times", served) for name in first.times.__slots__))
    timeline = type(first.timeline)(*(cat(name, "timeline", runs) for name in first.timeline.__slots__))
    rejected = [run for run in served if run.num_rejected]
    return SimRun(
        [r for run in served for r in run.requests],
        times,
        timeline,
        first.num_blocks,
        sum(run.num_rejected for run in served),
        rejected[0].first_rejection if rejected else "",
        first.step_model,
        fleet.wall_seconds,
        sum(run.prefix_queries for run in prompts),
        sum(run.prefix_hits for run in prompts),
    )
