"""The sampler: penalties, greedy or temperature sampling with top-k / top-p / min-p, logprobs."""

import torch

from enginetui.core.outputs import Logprob
from enginetui.core.sample.metadata import SamplingMetadata
from enginetui.core.sample.penalties import apply_min_tokens, apply_penalties


def argmax_rows(x: torch.Tensor) -> torch.Tensor:
    """[num_rows, vocab] -> [num_rows]: the first index of each row's maximum, as `argmax(dim=-1)`,
    which on CPU is about 4x slower than `max` at [36, 50272] (torch 2.13: 4.3 vs 1.0 ms)."""
    return x.max(dim=-1).indices


class Sampler:
    """Turns one step's logits into one token per row, reproducibly for seeded requests. On CUDA it reads
    the device once a step: the tokens (and logprobs) in one copy; the branches are chosen on the host."""

    def __init__(self, seed: int, device: torch.device | str = "cpu") -> None:
        # A generator draws only on its own device, so both live where the logits will be.
        self.generator = torch.Generator(device=device).manual_seed(seed)  # rows without their own seed
        self.row_generator = torch.Generator(device=device)  # re-seeded for each seeded row

    def __call__(self, logits: torch.Tensor, meta: SamplingMetadata) -> tuple[list[int], list[list[Logprob]] | None]:
        """logits: [num_rows, vocab] -> sampled token per row, and per-row logprobs if asked."""
        logits = logits.float()  # [num_rows, vocab]
        apply_min_tokens(logits, meta)
        apply_penalties(logits, meta)
        greedy = meta.temperature == 0  # [num_rows]
        if meta.all_greedy:
            sampled = argmax_rows(logits)  # [num_rows]
            final = logits
        else:
            temp = torch.where(greedy, 1.0, meta.temperature)[:, None]  # [num_rows, 1]
            final = filter_logits(logits / temp, meta)  # [num_rows, vocab]
            probs = final.softmax(dim=-1)  # [num_rows, vocab]
            sampled = self._draw(probs, meta)  # [num_rows]
            if meta.any_greedy:
                sampled = torch.where(greedy, argmax_rows(logits), sampled)  # [num_rows]
                final = torch.where(greedy[:, None], logits, final)
        if meta.max_num_logprobs is None:
            return sampled.tolist(), None
        return _logprobs(final, sampled, meta.max_num_logprobs)

    def _draw(self, probs: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
        """probs: [num_rows, vocab] -> one categorical draw per row, [num_rows]: the row's CDF
        inverted at one uniform number (invert_cdf). A seeded row's number depends only on its seed
        and output position. One number per row, where an exponential race over the vocabulary drew
        one per entry (64 x 50,272 of them: a fifth of a decode step on CPU)."""
        u = torch.rand(
            probs.shape[0], dtype=torch.float64, generator=self.generator, device=probs.device
        )  # [num_rows] in [0, 1)
        for row, seed in enumerate(meta.seeds):
            if seed is not None:
                self.row_generator.manual_seed(hash((seed, meta.num_output_tokens[row])) & (2**63 - 1))
                u[row] = torch.rand((), dtype=torch.float64, generator=self.row_generator, device=probs.device)
        return invert_cdf(probs, u)


CDF_CHUNK = 128  # vocabulary entries per chunk of the two-level CDF


def invert_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """probs: [num_rows, vocab] (unnormalized is fine), u: [num_rows] in [0, 1) -> [num_rows]: the
    first entry whose cumulative mass exceeds u times the row's total. Only entries of positive
    probability are ever returned. Two levels, in float64 where masses accumulate: chunks of
    CDF_CHUNK entries, then the entries of the chunk drawn (a float64 CDF of the whole vocabulary
    took 4.3 ms of a 64-row step's sampling, its float64 copy most of that)."""
    vocab = probs.shape[-1]
    whole = vocab // CDF_CHUNK * CDF_CHUNK
    # A chunk's mass summed in the probabilities' own dtype (128 terms: relative error ~1e-6 in fp32;
    # summing in float64 would copy the whole vocabulary to float64, most of the sampler's time).
    sums = [probs[:, :whole].unflatten(-1, (-1, CDF_CHUNK)).sum(-1)]  # [num_rows, chunks]
    if whole < vocab:
        sums.append(probs[:, whole:].sum(-1, keepdim=True))  # [num_rows, 1]: the short chunk
    chunk_cdf = torch.cat(sums, dim=-1).double().cumsum(dim=-1)  # [num_rows, num_chunks]
    target = u[:, None] * chunk_cdf[:, -1:]  # [num_rows, 1]: below the row's total mass
    chunk = torch.searchsorted(chunk_cdf, target, right=True).clamp_(max=chunk_cdf.shape[-1] - 1)  # [num_rows, 1]
    after = chunk_cdf.gather(1, chunk)  # [num_rows, 1]: mass up to the chunk's end
    before = torch.where(chunk > 0, chunk_cdf.gather(1, (chunk - 1).clamp_(min=0)), 0.0)  # [num_rows, 1]
    index = chunk * CDF_CHUNK + torch.arange(CDF_CHUNK, device=probs.device)  # [num_rows, CDF_CHUNK]
    inside = probs.gather(1, index.clamp(max=vocab - 1)).double().masked_fill_(index >= vocab, 0.0)
    inner_cdf = inside.cumsum(dim=-1)  # [num_rows, CDF_CHUNK]
    # Where u falls inside the chunk, as a share of its mass, kept below 1: summing the chunk twice
    # may round differently, and the draw must land on an entry of positive probability.
    share = ((target - before) / (after - before)).clamp_(0.0, 1.0 - 2.0**-52)  # [num_rows, 1]
    offset = torch.searchsorted(inner_cdf, share * inner_cdf[:, -1:], right=True)  # [num_rows, 1]
    return (index.gather(1, offset.clamp_(max=CDF_CHUNK - 1))).squeeze(-1).clamp_(max=vocab - 1)


def filter_logits(logits: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
    """Mask (to -inf) tokens outside top-k, outside the top-p nucleus, or below min_p * max prob."""
    if meta.top_k is not None or meta.top_p is not None:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # [num_rows, vocab] each
        rank = torch.arange(logits.shape[-1], device=logits.device)[None, :]  # [1, vocab]
        drop = torch.zeros_like(sorted_logits, dtype=torch.bool)  # [num_rows, vocab]
        if meta.top_k is not None:
            drop |= rank >= meta.top_k[:, None]
        if meta.top_p is not None:
            probs = sorted_logits.masked_fill(drop, float("-inf")).softmax(dim=-1)  # [num_rows, vocab]
            mass_before = probs.cumsum(dim=-1) - probs  # [num_rows, vocab]
            drop |= mass_before >= meta.top_p[:, None]
        drop[:, 0] = False  # the most likely token always survives
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.empty_like(logits).scatter_(-1, order, sorted_logits)
    if meta.min_p is not None:
        probs = logits.softmax(dim=-1)  # [num_rows, vocab]
        threshold = meta.min_p[:, None] * probs.max(dim=-1, keepdim=True).values  # [num_rows, 1]
        logits = logits.masked_fill(probs < threshold, float("-inf"))
    return logits


def _logprobs(final: torch.Tensor, sampled: torch.Tensor, k: int) -> tuple[list[int], list[list[Logprob]]]:
    """The sampled tokens, and per row the sampled token's logprob first, then the top-k of the sampled
    distribution; read from the device in one copy (float64 holds the ids and the float32 values exactly)."""
    logp = final.log_softmax(dim=-1)  # [num_rows, vocab]
    chosen = logp.gather(-1, sampled[:, None])  # [num_rows, 1]
    top_vals, top_ids = logp.topk(k, dim=-1) if k > 0 else (logp[:, :0], sampled[:, None][:, :0])  # [num_rows, k]
    table = torch.cat([sampled[:, None].double(), chosen.double(), top_ids.double(), top_vals.double()], dim=1)
    rows, tokens = [], []
    for token, value, *top in table.tolist():  # [num_rows, 2 + 2k]
        tokens.append(int(token))
        rows.append([Logprob(int(token), value)] + [Logprob(int(t), v) for t, v in zip(top[:k], top[k:])])
    return tokens, rows
