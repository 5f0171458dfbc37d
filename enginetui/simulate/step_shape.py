"""What a step computes, as the step-time models see it: token counts and attention work.

Built from the scheduler's plan right after `schedule()` (which already counts the scheduled
tokens as computed), so it costs one pass over the scheduled requests.
"""

from dataclasses import dataclass

from enginetui.core.request import Request
from enginetui.core.sched.output import SchedulerOutput


@dataclass(frozen=True, slots=True)
class StepShape:
    """One engine step's work."""

    step: int  # 1-based step number
    num_reqs: int  # requests in the batch
    num_prefill_tokens: int  # prompt (or recompute) tokens
    num_decode_tokens: int  # one-token decode steps (= decoding requests)
    num_sampled: int  # requests that sample a token (rows through lm_head)
    decode_context: int  # sum over decoding requests of the tokens they attend to (KV read)
    prefill_kv_tokens: int  # sum over prefill chunks of the tokens in their context after the chunk (KV read)
    prefill_attention_pairs: int  # query-key pairs of the prefill chunks (causal within the chunk)

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens


def step_shape(
    step: int, output: SchedulerOutput, requests: dict[str, Request], sampling: list[str] | None = None
) -> StepShape:
    """The shape of the step `output` plans; `requests` maps ids to the scheduler's requests. The ids of
    the requests that sample this step are appended to `sampling` when given."""
    decode_context = prefill_kv = pairs = sampled = 0
    for req_id, n in output.num_scheduled_tokens.items():
        r = requests[req_id]
        after = r.num_computed_tokens
        before = after - n
        num_tokens = r.num_tokens
        if after == num_tokens:
            sampled += 1
            if sampling is not None:
                sampling.append(req_id)
        if n == 1 and before == num_tokens - 1 and r.output_token_ids:
            decode_context += after
        else:
            prefill_kv += after
            pairs += n * before + n * (n + 1) // 2
    return StepShape(
        step,
        len(output.num_scheduled_tokens),
        output.num_prefill_tokens,
        output.num_decode_tokens,
        sampled,
        decode_context,
        prefill_kv,
        pairs,
    )
