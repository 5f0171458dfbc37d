"""A decode batch in an EngineCore driven in this process (no busy loop): filled, stepped with each step
timed alone, and ended. `bench profile`, `bench ops`, `bench roofline`, `bench scheduling` and `simulate
--calibrate` measure their steps with it."""

import time
from collections.abc import Callable, Iterator

from enginetui.core import SamplingParams
from enginetui.core.ceil_div import cdiv
from enginetui.core.engine.core import EngineCore
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import StepEvent
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.engine.processor import Processor
from enginetui.core.outputs import EngineCoreOutputs


def check_decode_capacity(info: EngineInfo, batch_size: int, input_len: int, steps: int, prompt_len: int = 0) -> None:
    """Refuse a batch the engine cannot keep decoding for `steps` steps (pool or max_model_len too small),
    beside a new prompt of `prompt_len` tokens in each step when given (computed and finished in it)."""
    # Tokens a request reaches by the end (one more block each of slack for decoding while others prefill).
    max_len = input_len + steps + 1 + info.block_size
    prompt_blocks = cdiv(prompt_len + 1, info.block_size) if prompt_len else 0  # the new prompt and its one token
    needed = batch_size * cdiv(max_len, info.block_size) + prompt_blocks
    positions = max(max_len, prompt_len + 1)
    if needed > info.num_blocks or positions > info.max_model_len:
        what = f" and a {prompt_len}-token prompt" if prompt_len else ""
        raise ValueError(
            f"{batch_size} requests of {input_len} prompt tokens{what} need {needed} KV blocks and {positions} "
            f"positions; the pool has {info.num_blocks} blocks, max_model_len is {info.max_model_len}: lower "
            f"--input-len or --steps, or raise --num-gpu-blocks-override"
        )


def start_decode_batch(
    core: EngineCore,
    processor: Processor,
    output_processor: OutputProcessor,
    prompts: list[list[int]],
    temperature: float,
    tag: str,
) -> list[str]:
    """Add a request per prompt (long enough to decode until aborted) and step until every one has
    its prompt computed: from the next step on, the batch decodes. Returns the requests' ids."""
    info = processor.info
    longest = max(map(len, prompts))
    params = SamplingParams(temperature=temperature, ignore_eos=True, max_tokens=info.max_model_len - longest)
    req_ids = [f"{tag}-{i}" for i in range(len(prompts))]
    for req_id, prompt in zip(req_ids, prompts):
        request, text = processor.process(req_id, prompt, params)
        output_processor.register(request, text)
        core.add_request(request)
    sched = core.scheduler
    while sched.waiting or any(r.num_computed_tokens < r.num_prompt_tokens for r in sched.running):
        output_processor.process(core.step()[0].outputs)  # prefill, chunked over as many steps as the budget needs
        if any(r.num_preemptions for r in (*sched.running, *sched.waiting)):
            raise RuntimeError("a request was preempted while filling the batch: the KV pool is too small")
    return req_ids


def end_decode_batch(core: EngineCore, output_processor: OutputProcessor, req_ids: list[str]) -> None:
    """Abort a batch start_decode_batch began, and let the client side see it end."""
    core.abort_requests(req_ids)
    output_processor.process(core.take_update()[0])


def timed_steps(
    core: EngineCore, steps: int, batch_size: int, before_step: Callable[[], None] | None = None
) -> Iterator[tuple[float, EngineCoreOutputs, StepEvent | None]]:
    """Run `steps` steps of a decode batch of `batch_size` requests, yielding each one's seconds (the wall
    time of `core.step()`), outputs and event; `before_step()` runs ahead of each step, untimed. A batch
    that lost a request (the pool or max_model_len ran out) is refused."""
    sched = core.scheduler
    for _ in range(steps):
        if len(sched.running) != batch_size:
            raise RuntimeError(
                f"{len(sched.running)} requests running, expected {batch_size}: the KV pool or max_model_len is "
                f"too small for the batch (raise --num-gpu-blocks-override, or lower --input-len or --steps)"
            )
        if before_step is not None:
            before_step()
        start = time.perf_counter()
        outputs, event = core.step()
        yield time.perf_counter() - start, outputs, event
