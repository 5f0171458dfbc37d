"""The simulator: the engine's own Scheduler and KV cache manager, stepped on a simulated clock.

Nothing here decides what runs: each step is `Scheduler.schedule()` and
`Scheduler.update_from_output()` exactly as EngineCore calls them. What stands in for the model:
- sampled tokens: a request samples when a step computes its last known token (the model runner's
  rule); the token is the workload's (recordings) or STAND_IN_TOKEN;
- output lengths: each request has max_tokens = its workload output length and ignores EOS, so the
  scheduler's own stop check ends it after exactly that many tokens;
- time: the step-time model moves the clock by each step's shape; requests enter when the clock
  reaches their arrival (between steps, as EngineCore takes in requests), the clock jumps to the next
  arrival when the engine is idle.
"""

from array import array
from collections.abc import Callable
from dataclasses import dataclass

from enginetui.core.config import EngineConfig
from enginetui.core.request import Request
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.scheduler import Scheduler
from enginetui.simulate.step_shape import step_shape
from enginetui.simulate.step_time import StepTimeModel
from enginetui.simulate.workload import SimRequest

STAND_IN_TOKEN = 0  # the token every simulated request "samples" (no EOS is ever set, so it stops nothing)
STAND_IN_PROMPT_TOKEN = 1  # prompt filler where token values cannot matter (prefix caching off)


@dataclass(slots=True)
class RequestTimes:
    """Per request (index-aligned with the workload, sorted by arrival): what happened when."""

    arrival: array  # [n] seconds it entered the engine
    first_token: array  # [n] seconds its first token was sampled (nan: never)
    finish: array  # [n] seconds it finished (nan: never; rejected requests never finish)
    num_output: array  # [n] tokens it generated
    num_preemptions: array  # [n] times it was preempted
    itl: array  # every gap between two consecutive tokens of one request, seconds (all requests)


@dataclass(slots=True)
class Timeline:
    """Per step: the clock and the engine's state after the step."""

    end: array  # [steps] seconds at the end of the step
    seconds: array  # [steps] how long the step took
    num_prefill_tokens: array  # [steps] prompt / recompute tokens
    num_decode_tokens: array  # [steps] decode tokens
    num_running: array  # [steps] running requests after the step
    num_waiting: array  # [steps] waiting requests after the step
    kv_used_blocks: array  # [steps] blocks referenced after the step
    num_preempted: array  # [steps] preemptions during the step


@dataclass(slots=True)
class SimRun:
    """What one simulation produced."""

    requests: list[SimRequest]  # the workload, sorted by arrival (index-aligned with `times`)
    times: RequestTimes  # per request
    timeline: Timeline  # per step
    num_blocks: int  # KV pool size
    num_rejected: int  # requests refused at admission (they could never fit)
    first_rejection: str  # why the first of them was refused ("" if none was)
    step_model: str  # the step-time model's name
    wall_seconds: float  # how long the simulation itself took (this machine's seconds)


class Observer:
    """What a simulation tells whoever watches it (a recording, a live view); each method may be left out."""

    def on_add(self, request: Request) -> None:
        """A request entered the engine (added to the scheduler, or rejected by it)."""

    def on_step(self, sched: Scheduler, plan, sampled: dict[str, int], start: float, end: float) -> None:
        """The step ran from `start` to `end` (simulated seconds) and sampled `sampled`; the scheduler's step
        record (with the pool's changes) is the observer's to drain."""


class Simulator:
    """Runs a workload through a fresh Scheduler on the simulated clock."""

    def __init__(self, config: EngineConfig, num_blocks: int, max_model_len: int, step_model: StepTimeModel,
                 observer: Observer | None = None) -> None:
        self.config = config  # the engine's flags (budgets, policies, block size, prefix caching)
        self.num_blocks = num_blocks  # KV pool size
        self.max_model_len = max_model_len  # longest prompt + output
        self.step_model = step_model  # the clock
        self.observer = observer  # told of every request and step (None: nobody, the fast path)

    def run(self, workload: list[SimRequest], progress: Callable[[int], None] | None = None) -> SimRun:
        """Serve `workload`; `progress(finished)` is called every few steps with the count of ended requests."""
        import time

        wall0 = time.perf_counter()
        reqs = sorted(workload, key=lambda r: r.arrival)
        n = len(reqs)
        sched = Scheduler(self.config, self.num_blocks, self.max_model_len)
        live = sched.requests
        pool = sched.kv.pool
        model = self.step_model
        observer = self.observer
        nan = float("nan")
        times = RequestTimes(array("d", (r.arrival for r in reqs)), array("d", [nan]) * n, array("d", [nan]) * n,
                             array("l", [0]) * n, array("l", [0]) * n, array("f"))
        tl = Timeline(*(array("d") for _ in range(2)), *(array("l") for _ in range(6)))
        index: dict[str, int] = {}  # request id -> position in reqs
        last_token = array("d", [nan]) * n  # per request: when its latest token was sampled
        outputs_of: dict[str, list[int] | None] = {}  # request id -> its recorded tokens (None: stand-ins)
        caching = self.config.enable_prefix_caching
        recorded_tokens = any(r.output_token_ids for r in reqs)  # some request "samples" recorded tokens
        itl_append = times.itl.append
        num_ended = num_rejected = 0
        first_rejection = ""
        now = reqs[0].arrival if reqs else 0.0
        i = step = 0
        while True:
            now = model.next_start(now, step + 1)
            while i < n and reqs[i].arrival <= now:
                request = _engine_request(reqs[i], caching)
                index[request.request_id] = i
                outputs_of[request.request_id] = reqs[i].output_token_ids
                sched.add_request(request)
                if observer is not None:
                    observer.on_add(request)
                if request.request_id not in live:
                    first_rejection = first_rejection or request.finish_detail
                    num_rejected += 1
                    num_ended += 1
                i += 1
            if not sched.has_unfinished_requests():
                if observer is None:
                    sched.drain_step_record()  # rejections between steps: nothing keeps them
                if i >= n:
                    break
                now = reqs[i].arrival  # idle until the next arrival
                continue
            plan = sched.schedule()
            step += 1
            sampling: list[str] = []
            shape = step_shape(step, plan, live, sampling)
            if recorded_tokens:
                sampled = {}
                for req_id in sampling:
                    recorded = outputs_of[req_id]
                    sampled[req_id] = recorded[len(live[req_id].output_token_ids)] if recorded else STAND_IN_TOKEN
            else:
                sampled = dict.fromkeys(sampling, STAND_IN_TOKEN)
            start, now = now, model.advance(now, shape)
            for out in sched.update_from_output(plan, sampled):
                if out.finish_reason == "rejected":
                    continue  # refused at admission (counted then): it never runs
                k = index[out.request_id]
                if out.new_token_ids:
                    times.num_output[k] += 1
                    if times.first_token[k] != times.first_token[k]:  # nan: the first token
                        times.first_token[k] = now
                    else:
                        itl_append(now - last_token[k])
                    last_token[k] = now
                if out.finish_reason is not None:
                    times.finish[k] = now
                    num_ended += 1
            for req_id in plan.preempted_req_ids:
                times.num_preemptions[index[req_id]] += 1
            tl.end.append(now)
            tl.seconds.append(now - start)
            tl.num_prefill_tokens.append(plan.num_prefill_tokens)
            tl.num_decode_tokens.append(plan.num_decode_tokens)
            tl.num_running.append(len(sched.running))
            tl.num_waiting.append(len(sched.waiting))
            tl.kv_used_blocks.append(self.num_blocks - pool.num_free_blocks)
            tl.num_preempted.append(len(plan.preempted_req_ids))
            if observer is not None:
                observer.on_step(sched, plan, sampled, start, now)
            else:  # nobody reads what the step recorded: drop it
                sched.drain_step_record()
            if progress is not None and step % 64 == 0:
                progress(num_ended)
        if progress is not None:
            progress(num_ended)
        return SimRun(reqs, times, tl, self.num_blocks, num_rejected, first_rejection, model.name,
                      time.perf_counter() - wall0)


def _engine_request(r: SimRequest, caching: bool) -> Request:
    """The scheduler's Request for a workload request: forced output length, no EOS."""
    if r.prompt_token_ids is not None:
        prompt = list(r.prompt_token_ids)
    else:
        prefix = r.prefix or []
        distinct = r.prompt_len - len(prefix)
        prompt = prefix + (_distinct_tokens(r.request_id, distinct) if caching else [STAND_IN_PROMPT_TOKEN] * distinct)
    max_tokens = r.max_tokens or r.output_len
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    arrival_time = r.arrival if r.arrival_time is None else r.arrival_time
    return Request(r.request_id, prompt, params, [], arrival_time, r.priority, max_tokens)


def _distinct_tokens(request_id: str, n: int) -> list[int]:
    """Tokens no other request's prompt shares (prefix caching finds no false hits): seeded by the id."""
    import random

    rng = random.Random(request_id)
    return [rng.randrange(2, 32000) for _ in range(n)]
