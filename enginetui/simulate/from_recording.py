"""A recorded run (core/record) as a workload, and the engine it ran on.

Each request enters the simulated engine when the recorded engine first could have scheduled it:
at the start of the first step after the event that announced it (`added`), times as recorded.
Its prompt is the recorded prompt, its output the tokens it generated (its length is the forced
output length, its tokens are the "sampled" ones), its max_tokens the recorded one when it was
rejected (so it is rejected again). Requests aborted or unfinished when the recording ends stop
after the tokens they had generated.
"""

from dataclasses import dataclass

from enginetui.core.config import EngineConfig
from enginetui.core.engine.events import StepEvent
from enginetui.core.record.reader import read_recording
from enginetui.simulate.step_time import step_start
from enginetui.simulate.workload import SimRequest

SCHEDULING_FIELDS = ("block_size", "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill",
                     "enable_prefix_caching", "scheduling_policy", "scheduler_reserve_full_isl",
                     "long_prefill_token_threshold")  # the EngineConfig fields that steer the scheduler


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


def recorded_run(path: str) -> RecordedRun:
    recording = read_recording(path)
    header = recording.header
    known = {name: header.config[name] for name in SCHEDULING_FIELDS if name in header.config}
    config = EngineConfig(device="cpu", **known)
    added: dict[str, object] = {}  # req_id -> RequestAdded, in order
    enters: dict[str, float] = {}  # req_id -> when it entered (simulated = recorded seconds)
    tokens: dict[str, list[int]] = {}
    ended: dict[str, str] = {}  # req_id -> end reason
    pending: list[str] = []  # announced since the last step
    steps: list[StepEvent] = []
    for i, event in enumerate(recording.events()):
        if i == 0 and event.running and not any(event.added):
            raise ValueError(f"{path} starts in the middle of a run ({len(event.running)} requests already "
                             f"running): its arrivals are not all in it")
        for a in event.added:
            added[a.req_id] = a
            pending.append(a.req_id)
        if event.is_step:
            steps.append(event)
            start = step_start(event)
            for req_id in pending:
                enters[req_id] = start
            pending = []
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
        requests.append(SimRequest(
            req_id, enters[req_id], len(a.prompt_token_ids), len(out), prompt_token_ids=list(a.prompt_token_ids),
            output_token_ids=out, priority=a.priority, arrival_time=a.arrival_time,
            max_tokens=a.max_tokens if reason == "rejected" or not out else None))
    num_partial = sum(1 for r in requests if ended.get(r.request_id) not in ("stop", "length", "rejected"))
    return RecordedRun(requests, steps, config, header.engine.num_blocks, header.engine.max_model_len,
                       header.engine.model_name, num_partial)
