"""Random request traces for the differential test against vLLM's scheduler, and our side of it.

A trace is plain JSON: a scheduler configuration and, for each step, the actions taken before that
step's schedule() (add a request, abort one, reset the prefix cache). Each request carries the
tokens it will sample, in order (its k-th output token is `outputs[k]` whenever it samples, also
after a preemption), so both schedulers see the same tokens; some are EOS or a stop token, so
requests finish by stop as well as by length. After the last action both run until no request is
left. `run_ours` and tests/sched/vllm_oracle.py write the same per-step record (see STEP_FIELDS).

A trace with `"async_scheduling": true` in its config is driven as vLLM's EngineCore drives its
AsyncScheduler (step_with_batch_queue, a batch queue of depth 2): each trace step plans a new step
(its tokens' outputs still unknown: placeholders) and applies the outputs of the oldest step in
flight, once two are queued or nothing more can be planned. A step samples for every request it
did not leave mid-prefill; the token is the request's next trace output when the step's outputs
are applied.
"""

import random
from collections import deque

from enginetui.core.config import EngineConfig
from enginetui.core.request import Request, RequestStatus
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.scheduler import Scheduler

EOS = 1  # the trace's EOS token id
STOP = 2  # a stop token id some requests ask for
MAX_STEPS = 600  # a trace that has not drained by then is reported as such (both sides stop here)

STEP_FIELDS = {
    "sched": "[[req_id, tokens]] scheduled this step, in scheduling order",
    "preempted": "sorted ids preempted this step",
    "finished": "sorted [[req_id, reason]] that finished in update_from_output (stop / length)",
    "aborted": "ids an abort action actually ended (it was still live), in action order",
    "reset": "the result of each reset_prefix_cache action this step",
    "running": "running queue after the step, in order",
    "waiting": "waiting queue after the step, head first",
    "computed": "{req_id: num_computed_tokens} of every live request after the step",
    "blocks": "{req_id: block ids} of every request holding blocks (vLLM's ids minus its null block 0)",
    "free": "free blocks after the step",
    "cached": "{req_id: num_cached_tokens} reported with a request's first output, this step",
    "stats": "cumulative prefix-cache [queries, hits, preempted queries, preempted hits], as of the latest applied step (vLLM reports them with outputs)",
    "placeholders": "{req_id: output placeholders} of live requests holding any, after the step",
    "stale": "sorted ids whose applied output was stale (preempted while its step ran), this step",
}


def random_trace(seed: int, async_scheduling: bool = False) -> dict:
    """One random trace: tight budgets and pools, both policies, caching on and off, shared prefixes."""
    rng = random.Random(seed)
    block_size = rng.choice([2, 4, 4, 8])
    chunked = rng.random() < 0.85
    config = {
        "block_size": block_size,
        "num_blocks": rng.choice([rng.randint(4, 12), rng.randint(8, 24), rng.randint(16, 48)]),
        "max_num_batched_tokens": rng.choice([6, 8, 12, 16, 24, 32, 48, 64]),
        "max_num_seqs": rng.choice([1, 2, 3, 4, 6, 8, 16]),
        "max_model_len": 256,
        "policy": rng.choice(["fcfs", "priority"]),
        "enable_prefix_caching": rng.random() < 0.6,
        "enable_chunked_prefill": chunked,
        "long_prefill_token_threshold": rng.choice([0, 0, 0, rng.randint(1, 24)]),
        "scheduler_reserve_full_isl": rng.random() < 0.75,
    }
    # Without chunked prefill a whole recompute must fit one step's budget: keep requests short enough.
    max_kv_tokens = config["num_blocks"] * block_size
    if not chunked:
        max_kv_tokens = min(max_kv_tokens, config["max_num_batched_tokens"])
    prefixes = [[rng.randrange(3, 40) for _ in range(rng.randint(1, 3 * block_size))] for _ in range(3)]
    num_requests = rng.randint(3, 16)
    last_arrival_step = rng.randint(0, 20)
    steps: list[list[dict]] = [[] for _ in range(last_arrival_step + 1)]
    ids = []
    for n in range(num_requests):
        prompt = rng.choice(prefixes)[:] if rng.random() < 0.6 else []
        prompt += [rng.randrange(3, 40) for _ in range(rng.randint(0 if prompt else 1, 24))]
        max_tokens = rng.randint(1, 12)
        over = len(prompt) + max_tokens - 1 - max_kv_tokens  # never-fitting requests are ours to reject
        if over > 0:
            prompt = prompt[: max(1, len(prompt) - over)]
            max_tokens = max(1, min(max_tokens, max_kv_tokens + 1 - len(prompt)))
        step = rng.randint(0, last_arrival_step)
        req_id = f"r{n}"  # string order (r10 < r2) differs from arrival order: ties break by id
        ids.append(req_id)
        steps[step].append(
            {
                "op": "add",
                "id": req_id,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "priority": rng.choice([0, 0, 1, 2]),
                "arrival": float(step),
                "stop_token_ids": [STOP] if rng.random() < 0.5 else [],
                "outputs": [_sample(rng) for _ in range(max_tokens)],
            }
        )
    for _ in range(rng.randint(0, 3)):  # aborts, some of requests already gone or not yet arrived
        steps[rng.randint(0, last_arrival_step)].append({"op": "abort", "id": rng.choice(ids)})
    if rng.random() < 0.3:
        steps[rng.randint(0, last_arrival_step)].append({"op": "reset"})
    config["async_scheduling"] = async_scheduling
    return {"seed": seed, "config": config, "steps": steps}


def _sample(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.06:
        return EOS
    if r < 0.12:
        return STOP
    return rng.randrange(3, 40)


def make_scheduler(config: dict, scheduler_class: type[Scheduler] = Scheduler) -> Scheduler:
    engine_config = EngineConfig(
        block_size=config["block_size"],
        max_num_batched_tokens=config["max_num_batched_tokens"],
        max_num_seqs=config["max_num_seqs"],
        enable_chunked_prefill=config["enable_chunked_prefill"],
        enable_prefix_caching=config["enable_prefix_caching"],
        scheduling_policy=config["policy"],
        long_prefill_token_threshold=config["long_prefill_token_threshold"],
        scheduler_reserve_full_isl=config["scheduler_reserve_full_isl"],
        async_scheduling=config.get("async_scheduling", False),
    )
    return scheduler_class(engine_config, config["num_blocks"], config["max_model_len"])


def run_ours(trace: dict, scheduler_class: type[Scheduler] = Scheduler) -> list[dict]:
    """Drive our scheduler (or a subclass of it) through the trace; one record per step (STEP_FIELDS)."""
    s = make_scheduler(trace["config"], scheduler_class)
    is_async = trace["config"].get("async_scheduling", False)
    outputs: dict[str, list[int]] = {}  # request id -> the tokens it samples, in order
    emitted: set[str] = set()  # requests that have produced a token
    in_flight: deque = deque()  # (plan, ids of requests it samples), newest first
    records = []
    stats = [0, 0, 0, 0]
    step = 0
    while step < MAX_STEPS and (
        step < len(trace["steps"]) or (s.has_requests() if is_async else s.has_unfinished_requests()) or in_flight
    ):
        record = {"aborted": [], "reset": [], "cached": {}, "finished": [], "sched": [], "preempted": [], "stale": []}
        for action in trace["steps"][step] if step < len(trace["steps"]) else []:
            if action["op"] == "add":
                outputs[action["id"]] = action["outputs"]
                params = SamplingParams(
                    max_tokens=action["max_tokens"], stop_token_ids=action["stop_token_ids"] or None
                )
                s.add_request(
                    Request(
                        action["id"],
                        list(action["prompt"]),
                        params,
                        [EOS],
                        action["arrival"],
                        action["priority"],
                        action["max_tokens"],
                    )
                )
            elif action["op"] == "abort":
                record["aborted"] += s.finish_requests([action["id"]], RequestStatus.FINISHED_ABORTED, "aborted")
            else:
                record["reset"].append(s.reset_prefix_cache())
        s.take_pending_outputs()
        apply = not is_async
        if not is_async or s.has_requests():
            out = s.schedule()
            record["sched"] = [[req_id, n] for req_id, n in out.num_scheduled_tokens.items()]
            record["preempted"] = sorted(out.preempted_req_ids)
            in_flight.appendleft((out, [r for r in out.num_scheduled_tokens if not s.requests[r].is_prefill_chunk]))
            apply = apply or len(in_flight) == 2 or not (out.total_num_scheduled_tokens or s.has_requests())
        elif in_flight:
            apply = True
        if apply:
            _apply_oldest(s, in_flight.pop(), outputs, emitted, record)
            stats = [s.kv.prefix_queries, s.kv.prefix_hits, s.kv.preempted_prefix_queries, s.kv.preempted_prefix_hits]
        s.check_invariants()
        kv = s.kv
        live = s.requests.values()
        record.update(
            running=[r.request_id for r in s.running],
            waiting=[r.request_id for r in s.waiting],
            computed={r.request_id: r.num_computed_tokens for r in live},
            blocks={req_id: [b.block_id for b in blocks] for req_id, blocks in kv.req_to_blocks.items()},
            free=kv.pool.num_free_blocks,
            stats=stats,
            placeholders={r.request_id: r.num_output_placeholders for r in live if r.num_output_placeholders},
        )
        record["finished"].sort()
        records.append(record)
        step += 1
    return records


def _apply_oldest(s: Scheduler, oldest: tuple, outputs: dict, emitted: set, record: dict) -> None:
    """The oldest step in flight returns: each request it samples for (still live) gets its next trace token."""
    out, samplers = oldest
    record["stale"] = sorted(
        r for r in out.num_scheduled_tokens if r in s.requests and s.requests[r].num_stale_output_tokens
    )
    sampled = {}
    for req_id in samplers:
        request = s.requests.get(req_id)
        if request is not None:
            tokens = outputs[req_id]
            sampled[req_id] = tokens[request.num_output_tokens] if request.num_output_tokens < len(tokens) else EOS
    for o in s.update_from_output(out, sampled):
        if o.finish_reason:
            record["finished"].append([o.request_id, o.finish_reason])
        if o.new_token_ids and o.request_id not in emitted:
            emitted.add(o.request_id)
            record["cached"][o.request_id] = o.num_cached_tokens


def first_difference(ours: list[dict], theirs: list[dict]) -> str | None:
    """Where two step records first disagree, in words; None when they agree on every step."""
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for field in STEP_FIELDS:
            if a[field] != b[field]:
                return f"step {step}, {field}: ours {a[field]} vs vLLM {b[field]}"
    if len(ours) != len(theirs):
        return f"ours ran {len(ours)} steps, vLLM {len(theirs)}"
    return None
