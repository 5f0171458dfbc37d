"""Drive vLLM's own schedulers with the probe in them through request traces, and check every event.

Runs in vLLM's interpreter: `python probe_driver.py TRACES.json RESULTS.json MODEL_DIR` (enginetui on its
PYTHONPATH: enginetui.vllm_launch.enginetui_site). The traces are
tests/sched/traces.py's, run as tests/sched/vllm_oracle.py runs them (no model), with the probe's
scheduler classes wrapped once more: around each schedule() / update_from_output() / abort / reset
the wrapper reads vLLM's state directly, takes the events the probe published meanwhile from a SUB
socket, and compares them field by field (queues, every request's progress and blocks, free and
cached-free blocks, the plan, preemptions, finishes, new tokens, prefix-cache totals, step numbers).
Each trace also runs on vLLM's plain classes: the probe must not change a single step. Writes a JSON
summary: counts of what was compared, and the first mismatches.
"""

import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import msgspec
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sched"))  # vllm_oracle

import vllm  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_utils import init_none_hash  # noqa: E402
from vllm_oracle import build_vllm_config, make_scheduler, run_trace  # noqa: E402

from enginetui.core.engine.events import MissedEvents, decode_event  # noqa: E402
from enginetui.vllm_probe import ProbeAsyncScheduler, ProbeScheduler  # noqa: E402
from enginetui.vllm_probe.config import PROBE_ENV  # noqa: E402

MAX_PROBLEMS = 20
LOG = logging.getLogger("vllm.enginetui_probe")


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def read_state(s) -> dict:
    """vLLM's scheduler state, read directly (block ids minus vLLM's null block 0)."""
    manager = s.kv_cache_manager
    pool = manager.block_pool
    tables = manager.coordinator.single_type_managers[0].req_to_blocks
    status = {"RUNNING": "running", "PREEMPTED": "preempted"}
    holding = getattr(s, "kv_holding_waiting", ())  # vLLM 0.32's queue of waiting requests that hold blocks
    live = [*s.running, *holding, *s.waiting]
    return {
        "running": [r.request_id for r in s.running],
        "waiting": [r.request_id for r in holding] + [r.request_id for r in s.waiting],
        "requests": {
            r.request_id: [
                status.get(r.status.name, "waiting"),
                r.num_prompt_tokens,
                r.num_computed_tokens,
                r.num_tokens,
                r.num_output_tokens,
                r.max_tokens,
                r.num_preemptions,
                r.priority,
                r.num_output_placeholders,
            ]
            for r in live
        },
        "blocks": {req_id: [b.block_id - 1 for b in blocks] for req_id, blocks in tables.items() if blocks},
        "num_blocks": pool.num_gpu_blocks - 1,
        "free": pool.get_num_free_blocks(),
        "cached_free": sorted(
            b.block_id - 1 for b in pool.free_block_queue.get_all_free_blocks() if b.block_hash is not None
        ),
        "shared": sorted({b.block_id - 1 for r in s.running for b in tables.get(r.request_id, ()) if b.ref_cnt > 1}),
    }


def event_state(e) -> dict:
    """The same fields as the probe's event tells them."""
    live = [*e.running, *e.waiting]
    return {
        "running": [p.req_id for p in e.running],
        "waiting": [p.req_id for p in e.waiting],
        "requests": {
            p.req_id: [
                p.status,
                p.num_prompt_tokens,
                p.num_computed_tokens,
                p.num_tokens,
                p.num_output_tokens,
                p.max_tokens,
                p.num_preemptions,
                p.priority,
                p.num_output_placeholders,
            ]
            for p in live
        },
        "blocks": {p.req_id: p.block_ids for p in live if p.block_ids},
        "num_blocks": e.num_blocks,
        "free": e.num_free_blocks,
        "cached_free": sorted(e.cached_free_blocks),
        "shared": e.shared_blocks,
    }


class Checker:
    """Subscribes to one scheduler's probe and checks each event it publishes against vLLM's state."""

    def __init__(self, address: str, label: str, counts: Counter, problems: list) -> None:
        self.label = label  # names the trace in problems
        self.counts = counts
        self.problems = problems
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.RCVHWM, 0)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.connect(address)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.missed = MissedEvents()
        self.plans: dict[int, tuple] = {}  # planned step -> (scheduled, preempted ids, admitted ids)
        self.steps_of: dict[int, int] = {}  # id(scheduler output) -> its step
        self.ended: dict[str, str] = {}  # expected in the next event: request id -> reason
        self.added: list[str] = []  # expected in the next event: requests added, in order
        self.prefix = [0, 0]  # cumulative prefix-cache queries and hits from vLLM's stats
        self.output_tokens = 0
        self.latest_step = 0  # the probe's busy-loop step of the latest event
        self.probe = None  # the checked scheduler's probe

    def close(self) -> None:
        self.sub.close(linger=0)
        self.ctx.term()

    def take(self, probe) -> list:
        """Every event the probe published so far and this checker has not taken yet."""
        events = []
        deadline = time.monotonic() + 10
        while (self.missed.last_seq or 0) < probe.seq:
            if not self.sub.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                self.problem(f"event {probe.seq} never arrived")
                break
            events.append(self.missed.mark(decode_event(self.sub.recv())))
        return events

    def problem(self, text: str) -> None:
        self.counts["problems"] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{self.label}: {text}")

    def check(self, event, state: dict, executed: int, new_tokens: dict) -> None:
        self.counts["events"] += 1
        if event.num_dropped_events:
            self.problem(f"seq {event.seq}: {event.num_dropped_events} events lost")
        seen = event_state(event)
        for key, value in state.items():
            if seen[key] != value:
                self.problem(f"seq {event.seq} {key}: probe {seen[key]} vs vLLM {value}")
        plan = self.plans.pop(event.planned_step, None) if event.planned_step else None
        if event.planned_step and plan is None:
            self.problem(f"seq {event.seq}: planned step {event.planned_step} is not a step vLLM planned")
        scheduled, preempted, admitted, decode, chunked, shape = plan or ({}, [], [], 0, set(), (0,) * 8)
        got = {
            "scheduled": list(event.scheduled.items()),
            "preempted": sorted(p.req_id for p in event.preempted),
            "admitted": [a.req_id for a in event.admitted],
            "executed": event.executed_step,
            "finished": sorted((e.req_id, e.reason) for e in event.finished),
            "new_token_ids": event.new_token_ids,
            "added": [(a.req_id, len(a.prompt_token_ids), a.max_tokens, a.priority) for a in event.added],
            "prefix": [event.prefix_cache_queries, event.prefix_cache_hits],
            "output_tokens": event.total_output_tokens,
            "split": [event.num_prefill_tokens, event.num_decode_tokens],
            "step": event.step,
            "unfinished prefills": {c.req_id for c in event.chunks if c.num_remaining},
            "shape": msgspec.structs.astuple(event.shape) if event.shape else None,
        }
        want = {
            "scheduled": list(scheduled.items()),
            "preempted": preempted,
            "admitted": admitted,
            "executed": executed,
            "finished": sorted(self.ended.items()),
            "new_token_ids": new_tokens,
            "added": self.added,
            "prefix": self.prefix,
            "output_tokens": self.output_tokens,
            "split": [sum(scheduled.values()) - decode, decode],
            "unfinished prefills": chunked,
            "shape": shape,
            "step": self.latest_step + 1 if event.kind == "step" else self.latest_step,
        }
        for key, value in want.items():
            if got[key] != value:
                self.problem(f"seq {event.seq} {key}: probe {got[key]} vs vLLM {value}")
        if any(c.req_id not in event.scheduled or c.num_tokens != event.scheduled[c.req_id] for c in event.chunks):
            self.problem(f"seq {event.seq}: a chunk that was not scheduled: {event.chunks}")
        self.latest_step = event.step
        self.ended, self.added = {}, []
        self.counts["checked steps with a plan"] += bool(plan)
        self.counts["preemptions"] += len(event.preempted)
        self.counts["admissions"] += len(event.admitted)
        self.counts["chunks"] += len(event.chunks)
        self.counts["finishes"] += len(event.finished)
        self.counts["additions"] += len(event.added)
        self.counts["blocks allocated"] += len(event.blocks_allocated)
        self.counts["cached-free blocks"] += event.num_cached_free_blocks
        self.counts["shared blocks"] += len(event.shared_blocks)
        self.counts["placeholders"] += sum(p.num_output_placeholders for p in event.running)
        self.counts["combined async steps"] += bool(
            event.async_scheduling
            or (event.planned_step and event.executed_step and event.planned_step != event.executed_step)
        )


def checked(base, checkers: list):
    """`base` (a probe scheduler class) with the checks around its hooks; `checkers` gets each one's Checker."""

    class Checked(base):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.checker = checkers[-1]
            self.checker.probe = self._enginetui_probe
            deadline = time.monotonic() + 10
            while self._enginetui_probe.poll_subscribers() == 0 and time.monotonic() < deadline:
                time.sleep(0.001)

        def schedule(self, *args, **kwargs):
            before = read_state(self)
            out = super().schedule(*args, **kwargs)
            c = self.checker
            for event in c.take(self._enginetui_probe):  # the previous plan, when nothing applied it
                c.check(event, before, 0, {})
            step = self.current_step
            c.steps_of[id(out)] = step
            # A decode computes the one token left (vLLM: not a prefill chunk) of a request vLLM counts as
            # generating; vLLM also counts a preempted request's recompute as generating, the event as prefill.
            new_ids = {new.req_id for new in out.scheduled_new_reqs}
            decode, chunked = 0, set()
            sampled = decode_context = prefill_kv = pairs = 0  # the step's shape
            for req_id, n in out.num_scheduled_tokens.items():
                r = self.requests[req_id]
                context = req_id in new_ids or out.scheduled_cached_reqs.is_context_phase(req_id)
                after = r.num_computed_tokens
                if not context and n == 1 and not r.is_prefill_chunk:
                    decode += n
                    decode_context += after
                else:
                    prefill_kv += after
                    pairs += n * (after - n) + n * (n + 1) // 2
                c.counts["recompute tokens vLLM counts as generation"] += n * (not context and r.is_prefill_chunk)
                if r.is_prefill_chunk:
                    chunked.add(req_id)
                else:
                    sampled += 1
            total = sum(out.num_scheduled_tokens.values())
            shape = (step, len(out.num_scheduled_tokens), total - decode, decode, sampled, decode_context)
            c.plans[step] = (
                dict(out.num_scheduled_tokens),
                sorted(out.preempted_req_ids),
                [r for r in out.num_scheduled_tokens if r not in before["running"]],
                decode,
                chunked,
                (*shape, prefill_kv, pairs),
            )
            return out

        def update_from_output(self, scheduler_output, model_runner_output):
            outputs = super().update_from_output(scheduler_output, model_runner_output)
            c = self.checker
            new_tokens = {}
            for engine_outputs in outputs.values():
                stats = engine_outputs.scheduler_stats
                if stats is not None:
                    c.prefix = [
                        c.prefix[0] + stats.prefix_cache_stats.queries,
                        c.prefix[1] + stats.prefix_cache_stats.hits,
                    ]
                for o in engine_outputs.outputs:
                    c.output_tokens += len(o.new_token_ids)
                    if o.new_token_ids:
                        new_tokens[o.request_id] = list(o.new_token_ids)
                    if o.finish_reason is not None:
                        c.ended[o.request_id] = str(o.finish_reason)
            events = c.take(self._enginetui_probe)
            if len(events) != 1:
                c.problem(f"update_from_output published {len(events)} events, not 1")
            for event in events:
                c.check(event, read_state(self), c.steps_of.pop(id(scheduler_output)), new_tokens)
            return outputs

        def add_request(self, request) -> None:
            super().add_request(request)
            self.checker.added.append(
                (request.request_id, request.num_prompt_tokens, request.max_tokens, request.priority)
            )

        def finish_requests(self, request_ids, finished_status):
            ended = super().finish_requests(request_ids, finished_status)
            for r in ended:
                self.checker.ended[r.request_id] = str(r.get_finished_reason())
            return ended

        def reset_prefix_cache(self, *args, **kwargs):
            done = super().reset_prefix_cache(*args, **kwargs)
            c = self.checker
            for event in c.take(self._enginetui_probe):
                c.check(event, read_state(self), 0, {})
            return done

    return Checked


class Kept:
    """The schedulers a run built (run_trace does not return its scheduler)."""

    def __init__(self) -> None:
        self.made: list = []

    def wrap(self, base):
        kept = self

        class Keep(base):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                kept.made.append(self)

        return Keep


def check_traces(vllm_config, traces: list, workdir: str, counts: Counter, problems: list) -> None:
    """Every trace with a subscriber checking every event; and the probe changes nothing."""
    for i, trace in enumerate(traces):
        address = f"ipc://{workdir}/probe-{i}"
        os.environ[PROBE_ENV] = address
        checkers = [
            Checker(address, f"seed {trace['seed']} async={trace['config']['async_scheduling']}", counts, problems)
        ]
        try:
            plain = run_trace(vllm_config, trace)
            probed = run_trace(
                vllm_config, trace, (checked(ProbeScheduler, checkers), checked(ProbeAsyncScheduler, checkers))
            )
            probe, checker = checkers[0].probe, checkers[0]
            if probe.step_count != checker.latest_step or probe.seq != checker.missed.last_seq:
                checker.problem(
                    f"{probe.step_count} steps, {probe.seq} events; the latest checked: step "
                    f"{checker.latest_step}, seq {checker.missed.last_seq}"
                )
            counts["probe steps"] += probe.step_count
        finally:
            checkers[0].close()
        counts["traces"] += 1
        counts["async traces"] += trace["config"]["async_scheduling"]
        counts["trace steps"] += len(plain)
        if plain != probed:
            counts["problems"] += 1
            problems.append(f"seed {trace['seed']}: vLLM scheduled differently with the probe in it")


def check_quiet_and_faults(
    vllm_config, traces: list, workdir: str, counts: Counter, problems: list, logs: LogLines
) -> None:
    """No subscriber: nothing published, nothing changed. A probe failing mid-run: logged once, switched
    off, and vLLM's steps are still the plain ones."""
    for i, trace in enumerate(traces):
        os.environ[PROBE_ENV] = f"ipc://{workdir}/quiet-{i}"
        kept = Kept()
        plain = run_trace(vllm_config, trace)
        quiet = run_trace(vllm_config, trace, (kept.wrap(ProbeScheduler), kept.wrap(ProbeAsyncScheduler)))
        probe = kept.made[0]._enginetui_probe
        counts["quiet traces"] += 1
        if quiet != plain or probe.seq != 0 or probe.step_count == 0:
            counts["problems"] += 1
            problems.append(
                f"seed {trace['seed']} without a subscriber: changed={quiet != plain}, "
                f"published {probe.seq}, steps {probe.step_count}"
            )

        os.environ[PROBE_ENV] = f"ipc://{workdir}/faulty-{i}"
        logs.lines.clear()

        class Faulty(ProbeScheduler if not trace["config"]["async_scheduling"] else ProbeAsyncScheduler):
            made = kept.made  # the schedulers this run built

            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                self.made.append(self)
                probe, calls = self._enginetui_probe, []
                after_schedule = probe.after_schedule
                self.fault_calls = calls

                def fail_on_third(*hook_args):
                    calls.append(1)
                    if len(calls) == 3:
                        raise RuntimeError("injected fault")
                    after_schedule(*hook_args)

                probe.after_schedule = fail_on_third

        faulty = run_trace(vllm_config, trace, (Faulty, Faulty))
        failed = [line for line in logs.lines if "internal error" in line]
        scheduler = kept.made[-1]
        broke = len(scheduler.fault_calls) >= 3
        counts["fault traces"] += 1
        counts["probes switched off"] += broke
        if faulty != plain or scheduler._enginetui_probe.enabled == broke or len(failed) != broke:
            counts["problems"] += 1
            problems.append(
                f"seed {trace['seed']} with a failing probe: changed={faulty != plain}, "
                f"still on={scheduler._enginetui_probe.enabled}, error lines {len(failed)}"
            )


def check_startup_lines(vllm_config, trace: dict, workdir: str, logs: LogLines) -> dict:
    """What one start-up says for each bad or missing setting (the scheduler runs without the probe)."""
    said = {}
    cases = {"unset": "", "bad": "udp://nowhere", "bad json": '{"endpoint": 5}'}
    for name, value in cases.items():
        os.environ[PROBE_ENV] = value
        logs.lines.clear()
        s = make_scheduler(vllm_config, trace["config"], (ProbeScheduler, ProbeAsyncScheduler))
        said[name] = [s._enginetui_probe is None, logs.lines[:]]
    with zmq.Context() as ctx, ctx.socket(zmq.PUB) as taken:
        port = taken.bind_to_random_port("tcp://127.0.0.1")
        os.environ[PROBE_ENV] = f"tcp://127.0.0.1:{port}"
        logs.lines.clear()
        s = make_scheduler(vllm_config, trace["config"], (ProbeScheduler, ProbeAsyncScheduler))
        said["address taken"] = [s._enginetui_probe is None, logs.lines[:]]
    real, vllm.__version__ = vllm.__version__, "0.99.1"
    try:
        os.environ[PROBE_ENV] = f"ipc://{workdir}/version"
        logs.lines.clear()
        s = make_scheduler(vllm_config, trace["config"], (ProbeScheduler, ProbeAsyncScheduler))
        said["unknown version"] = [s._enginetui_probe is None, logs.lines[:]]
        s._enginetui_probe.close()
    finally:
        vllm.__version__ = real
    return said


def main() -> None:
    traces_path, results_path, model_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    traces = json.loads(Path(traces_path).read_text())
    init_none_hash(sha256)
    vllm_config = build_vllm_config(model_dir)
    logs = LogLines()
    LOG.addHandler(logs)
    counts: Counter = Counter()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="probe-") as workdir:
        check_traces(vllm_config, traces, workdir, counts, problems)
        check_quiet_and_faults(
            vllm_config,
            traces[:10] + [t for t in traces if t["config"]["async_scheduling"]][:10],
            workdir,
            counts,
            problems,
            logs,
        )
        startup = check_startup_lines(vllm_config, traces[0], workdir, logs)
        enginetui_modules = sorted(m for m in sys.modules if m.startswith("enginetui"))
    Path(results_path).write_text(
        json.dumps(
            {
                "counts": counts,
                "problems": problems,
                "startup": startup,
                "modules": enginetui_modules,
                "textual": "textual" in sys.modules,
            }
        )
    )


if __name__ == "__main__":
    main()
