"""A recorded run (core/record) as a workload, and the engine it ran on.

Each request enters the simulated engine when the recorded engine received it (its `arrival_time`),
kept within the one step it could have reached the engine in and never before a request the engine
took in ahead of it: a request that came in while a step ran waits for that step, in the recording as
in the simulation, and on the recording's own step times the replay stays exact. Its prompt and output
tokens are the recorded ones, its max_tokens the recorded one when it was rejected (so it is rejected
again); requests aborted or unfinished when the recording ends stop after the tokens they generated.
"""

import math
from dataclasses import dataclass

from enginetui.core.config import EngineConfig
from enginetui.core.engine.events import RequestAdded, StepEvent
from enginetui.core.record.format import Header
from enginetui.core.record.reader import read_recording
from enginetui.simulate.step_time import step_start
from enginetui.simulate.workload import SimRequest

SCHEDULING_FIELDS = (
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "scheduling_policy",
    "scheduler_reserve_full_isl",
    "long_prefill_token_threshold",
)  # the EngineConfig fields that steer the scheduler


@dataclass(slots=True)
class RecordedRun:
    """What a recording holds for the simulator."""

    requests: list[SimRequest]  # every request the recorded engine took in, times as recorded
    steps: list[StepEvent]  # its step events, in order
    config: EngineConfig  # its scheduling flags
    num_blocks: int  # its KV pool
    max_model_len: int  # its longest request
    model_name: str  # what it ran
    num_partial: int  # requests aborted or still running at the end (they stop after their recorded tokens)
    header: Header  # the recording's header (where and when it ran)
    # the engine's CPU threads when uncontended: its EngineInfo's, else (an older recording) the most any
    # step ran on; 0 where no step ran a model on a CPU
    cpu_threads: int

    def on_fewer_threads(self, event: StepEvent) -> bool:
        """The step ran on fewer CPU threads than the engine has: the thread governor's answer to other
        processes competing for the cores (core/worker/thread_governor.py), a machine the step-time
        models do not describe."""
        return 0 < event.compute_threads < self.cpu_threads


def recorded_run(path: str) -> RecordedRun:
    recording = read_recording(path)
    header = recording.header
    if header.replicas:
        raise ValueError(
            f"{path} is a simulated fleet's recording ({len(header.replicas)} engines): it opens with "
            f"`enginetui replay`; --from-recording takes one engine's"
        )
    if not header.engine.max_model_len:  # a vLLM recorded through its probe alone (vllm_probe/recording.py)
        raise ValueError(
            f"{path} does not hold its engine's max_model_len or prefix caching (a vLLM recorded through its probe "
            f"without --vllm URL): record it with `enginetui attach --vllm URL --probe ADDR --record FILE`"
        )
    known = {name: header.config[name] for name in SCHEDULING_FIELDS if name in header.config}
    config = EngineConfig(device="cpu", **known)
    added: dict[str, RequestAdded] = {}  # req_id -> RequestAdded, in order
    enters: dict[str, float] = {}  # req_id -> when it entered (simulated = recorded seconds)
    tokens: dict[str, list[int]] = {}
    ended: dict[str, str] = {}  # req_id -> end reason
    pending: list[str] = []  # announced since the last step
    steps: list[StepEvent] = []
    previous_start = -math.inf  # the start of the last step so far (the engine took in requests just before it)
    latest = -math.inf  # the latest entry so far: the engine took its requests in in order
    for i, event in enumerate(recording.events()):
        if i == 0 and event.running and not any(event.added):
            raise ValueError(
                f"{path} starts in the middle of a run ({len(event.running)} requests already "
                f"running): its arrivals are not all in it"
            )
        for a in event.added:
            added[a.req_id] = a
            pending.append(a.req_id)
        if event.is_step and (event.scheduled or event.new_token_ids):  # not a vLLM's empty step (the probe's)
            steps.append(event)
            start = step_start(event)
            for req_id in pending:
                # see the module's docstring: received during the step before (or while idle), taken in at
                # `start`; not at or before the previous start, where the simulator would take it in a step early
                earliest = max(math.nextafter(previous_start, math.inf), latest)
                latest = enters[req_id] = min(max(added[req_id].arrival_time, earliest), start)
            pending = []
            previous_start = start
        for req_id, ids in event.new_token_ids.items():
            tokens.setdefault(req_id, []).extend(ids)
        for end in (*event.finished, *event.rejected):
            ended[end.req_id] = end.reason
    requests = []
    for req_id, a in added.items():
        if req_id not in enters:
            continue  # announced after the last step: never scheduled
        out = tokens.get(req_id, [])
        reason = ended.get(req_id)
        requests.append(
            SimRequest(
                req_id,
                enters[req_id],
                len(a.prompt_token_ids),
                len(out),
                prompt_token_ids=list(a.prompt_token_ids),
                output_token_ids=out,
                priority=a.priority,
                arrival_time=a.arrival_time,
                max_tokens=a.max_tokens if reason == "rejected" or not out else None,
            )
        )
    num_partial = sum(1 for r in requests if ended.get(r.request_id) not in ("stop", "length", "rejected"))
    cpu_threads = header.engine.cpu_threads or max((e.compute_threads for e in steps), default=0)
    return RecordedRun(
        requests,
        steps,
        config,
        header.engine.num_blocks,
        header.engine.max_model_len,
        header.engine.model_name,
        num_partial,
        header,
        cpu_threads,
    )
