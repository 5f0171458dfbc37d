"""A step's shape: what one scheduled step computes, as the step-time models price it. The scheduler
computes it with each plan; step events carry the latest step's, so a recording's steps are priced
without re-running its scheduler."""

import msgspec


class StepShape(msgspec.Struct, frozen=True):
    """One step's work: token counts and attention work."""

    step: int = 0  # the plan's step number (1-based; 0: no step planned yet)
    num_reqs: int = 0  # requests in the batch
    num_prefill_tokens: int = 0  # prompt (or recompute) tokens
    num_decode_tokens: int = 0  # one-token decode steps (= decoding requests)
    num_sampled: int = 0  # requests that sample a token (rows through lm_head)
    decode_context: int = 0  # sum over decoding requests of the tokens they attend to (KV read)
    prefill_kv_tokens: int = 0  # sum over prefill chunks of the tokens in their context after the chunk (KV read)
    prefill_attention_pairs: int = 0  # query-key pairs of the prefill chunks (causal within the chunk)

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens
