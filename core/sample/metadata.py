"""Per-row sampling settings of one step's batch, as tensors."""

from dataclasses import dataclass

import torch


@dataclass(slots=True)
class SamplingMetadata:
    """Row i describes the request whose logits are row i of the sampler's input."""

    temperature: torch.Tensor  # [num_rows] float; 0 marks greedy rows
    top_k: torch.Tensor | None  # [num_rows] int64, vocab_size where disabled; None if no row uses it
    top_p: torch.Tensor | None  # [num_rows] float, 1.0 where disabled; None if no row uses it
    min_p: torch.Tensor | None  # [num_rows] float, 0.0 where disabled; None if no row uses it
    seeds: list[int | None]  # per row: the request's seed, or None to use the engine's generator
    num_output_tokens: list[int]  # per row: tokens generated so far (offsets each seeded draw)
    presence_penalty: torch.Tensor | None  # [num_rows] float; None if no row uses penalties
    frequency_penalty: torch.Tensor | None  # [num_rows] float
    repetition_penalty: torch.Tensor | None  # [num_rows] float
    output_token_ids: list[list[int]]  # per row: generated tokens (for penalties)
    prompt_token_ids: list[list[int]]  # per row: prompt tokens (for the repetition penalty)
    min_tokens_blocked: list[list[int]]  # per row: token ids forbidden now (EOS / stop ids before min_tokens)
    max_num_logprobs: int | None  # largest logprobs request in the batch; None if none asks
    # per row: temperature 0, as the host knows it (None: read from the tensor, a device sync on CUDA)
    greedy: list[bool] | None = None

    @property
    def all_greedy(self) -> bool:
        return all(self.greedy) if self.greedy is not None else bool((self.temperature == 0).all())

    @property
    def any_greedy(self) -> bool:
        return any(self.greedy) if self.greedy is not None else bool((self.temperature == 0).any())
