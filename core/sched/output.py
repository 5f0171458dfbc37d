"""The scheduler's plan for one step, handed to the model runner."""

from dataclasses import dataclass, field

from enginetui.core.request import Request
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.step_shape import StepShape


@dataclass(slots=True)
class NewRequestData:
    """A request the runner has not seen (first schedule, or resumed after preemption): full data."""

    req_id: str  # the request
    token_ids: list[int]  # every known token (prompt, plus outputs when resuming after preemption)
    num_prompt_tokens: int  # how many of token_ids are the prompt (penalties count only outputs)
    sampling_params: SamplingParams  # how to sample it
    eos_token_ids: list[int]  # EOS ids (blocked while min_tokens is not reached)
    block_ids: list[int]  # its whole block table
    num_computed_tokens: int  # tokens already in the cache (prefix-cache hits) before this step


@dataclass(slots=True)
class CachedRequestData:
    """Requests the runner already holds: deltas only, index-aligned lists."""

    req_ids: list[str] = field(default_factory=list)  # the requests
    new_token_ids: list[list[int]] = field(default_factory=list)  # tokens appended since the runner last saw it
    new_block_ids: list[list[int]] = field(default_factory=list)  # blocks appended to its table this step
    num_computed_tokens: list[int] = field(default_factory=list)  # tokens in the cache before this step


@dataclass(slots=True)
class SchedulerOutput:
    """What to compute this step."""

    scheduled_new_reqs: list[NewRequestData]  # first-time (or resumed) requests, full data
    scheduled_cached_reqs: CachedRequestData  # continuing requests, deltas
    num_scheduled_tokens: dict[str, int]  # request id -> tokens computed this step
    total_num_scheduled_tokens: int  # sum of num_scheduled_tokens
    finished_req_ids: set[str]  # requests that ended since the last step: the runner drops their state
    preempted_req_ids: set[str]  # requests preempted this step: the runner drops their state
    num_prefill_tokens: int = 0  # scheduled tokens that are prompt or recompute work
    num_decode_tokens: int = 0  # scheduled tokens that each generate the next token of a request
    shape: StepShape = StepShape()  # the step's work, for the step-time models and the step event


def sampling_ids(output: SchedulerOutput, requests: dict[str, Request]) -> list[str]:
    """The requests of the plan `output` that sample a token: all but those it leaves with prompt (or
    recompute) work; `requests` maps ids to the scheduler's requests."""
    return [req_id for req_id in output.num_scheduled_tokens if not requests[req_id].is_prefill_chunk]


def new_request_data(request: Request, block_ids: list[int]) -> NewRequestData:
    """Full data for a request the runner has not seen (or dropped at its preemption)."""
    request.num_tokens_sent_to_runner = request.num_tokens
    return NewRequestData(
        req_id=request.request_id,
        token_ids=request.all_token_ids,
        num_prompt_tokens=request.num_prompt_tokens,
        sampling_params=request.sampling_params,
        eos_token_ids=request.eos_token_ids,
        block_ids=block_ids,
        num_computed_tokens=request.num_computed_tokens,
    )


def cached_request_data(requests: list[Request], new_blocks: dict[str, list[int]]) -> CachedRequestData:
    """Deltas for requests the runner already holds: tokens and blocks appended since it last saw them."""
    data = CachedRequestData()
    for request in requests:
        data.req_ids.append(request.request_id)
        data.new_token_ids.append(request.tokens(request.num_tokens_sent_to_runner, request.num_tokens))
        data.new_block_ids.append(new_blocks[request.request_id])
        data.num_computed_tokens.append(request.num_computed_tokens)
        request.num_tokens_sent_to_runner = request.num_tokens
    return data
