"""The snapshot a dashboard attaching to the server starts from, with every live request's prompt
and output so far.

The engine's own snapshot lists the queues and each request's counts, but not its prompt or the
tokens it generated before the dashboard looked. Every request of a served engine runs through
this process's AsyncLLM, whose output processor keeps both; `full_greeting` adds them to the
snapshot as `added` (RequestAdded) and `new_token_ids` (the first `num_output_tokens` tokens the
snapshot lists, so the step events that follow continue the text exactly).
"""

import asyncio
import time

import msgspec

from enginetui.core.engine.events import RequestAdded, RequestProgress, StepEvent

CATCH_UP_S = 1.0  # how long to wait for outputs the engine made before the snapshot to reach this process
POLL_S = 0.01  # how often to look while waiting


async def full_greeting(llm, snapshot: StepEvent) -> StepEvent:
    """`snapshot` with the prompt and output tokens of each listed request `llm` (an AsyncLLM) runs.
    A request whose outputs have not all arrived within CATCH_UP_S is left as the snapshot lists it."""
    listed = [*snapshot.running, *snapshot.waiting]
    deadline = time.monotonic() + CATCH_UP_S
    while any(_behind(llm, p) for p in listed) and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    added, tokens = [], {}
    for p in listed:
        state = llm.output_processor.states.get(p.req_id)
        if state is None or _behind(llm, p):
            continue
        added.append(
            RequestAdded(
                req_id=p.req_id,
                prompt_token_ids=list(state.prompt_token_ids),
                sampling_params=state.params,
                max_tokens=p.max_tokens,
                priority=p.priority,
                arrival_time=p.arrival_time,
            )
        )
        if p.num_output_tokens:
            tokens[p.req_id] = state.detok.token_ids[: p.num_output_tokens]
    return msgspec.structs.replace(
        snapshot, added=[*snapshot.added, *added], new_token_ids={**snapshot.new_token_ids, **tokens}
    )


def _behind(llm, p: RequestProgress) -> bool:
    """True while this process has fewer of the request's output tokens than the snapshot counts."""
    state = llm.output_processor.states.get(p.req_id)
    return state is not None and len(state.detok.token_ids) < p.num_output_tokens
