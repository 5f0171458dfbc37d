"""A scheduler worked by hand: a small config, requests of consecutive token ids, one step at a time."""

from enginetui.core.config import EngineConfig
from enginetui.core.request import Request
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.scheduler import Scheduler


def make_scheduler(num_blocks=100, block_size=16, budget=2048, max_model_len=8192, **kw) -> Scheduler:
    cfg = EngineConfig(block_size=block_size, max_num_batched_tokens=budget, **kw)
    return Scheduler(cfg, num_blocks, max_model_len)


def make_request(
    req_id: str, prompt_len: int, max_tokens: int = 16, priority: int = 0, arrival: float = 0.0, first_token: int = 3
) -> Request:
    """A prompt of consecutive token ids from `first_token`; ignores EOS."""
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    tokens = list(range(first_token, first_token + prompt_len))
    return Request(
        req_id, tokens, params, eos_token_ids=[2], arrival_time=arrival, priority=priority, max_tokens=max_tokens
    )


def run_step(s: Scheduler, token: int = 7):
    """schedule(), then feed a sampled token to every request that reached its last token."""
    out = s.schedule()
    sampled = {
        rid: token
        for rid in out.num_scheduled_tokens
        if s.requests[rid].num_computed_tokens == s.requests[rid].num_tokens
    }
    s.update_from_output(out, sampled)
    s.check_invariants()
    return out
