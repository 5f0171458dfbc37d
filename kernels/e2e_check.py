"""End-to-end checks of the engine on a random-weight OPT: greedy parity with transformers, throughput.

Used by tools/gpu_check.py. The model is built here with `OPTForCausalLM(OPTConfig(...))` and saved
with `save_pretrained`; prompts are token-id lists, so no tokenizer is needed.
"""

import random
import tempfile
import time
from dataclasses import dataclass

import torch

# A greedy mismatch is accepted only where transformers' own top two logits are this close:
# there, rounding differences between two correct implementations may pick either token.
NEAR_TIE = 1e-3
# Bound on |engine logprob - transformers logprob| of each token both chose (float32 runs).
LOGPROB_TOL = 1e-3

# The facebook/opt-125m architecture.
OPT_125M = dict(
    vocab_size=50272,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    ffn_dim=3072,
    max_position_embeddings=2048,
    word_embed_proj_dim=768,
    do_layer_norm_before=True,
)
# A tiny OPT for the CPU smoke run.
OPT_TINY = dict(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    ffn_dim=128,
    max_position_embeddings=512,
    word_embed_proj_dim=64,
    do_layer_norm_before=True,
)


@dataclass(slots=True)
class Continuation:
    """A greedy continuation and each chosen token's logprob (from the raw logits)."""

    tokens: list[int]  # generated token ids
    logprobs: list[float]  # logprob of each generated token


@dataclass(slots=True)
class PromptParity:
    """How one prompt's greedy continuation compares."""

    prompt_len: int  # tokens in the prompt
    matched: int  # leading output tokens equal in both
    near_tie_gap: float | None  # at the first mismatch: transformers' logit gap between the two tokens
    max_logprob_diff: float  # over the matched tokens

    @property
    def ok(self) -> bool:
        """Logprobs agree, and the tokens are identical or diverge only at a near tie of transformers'."""
        return self.ok_within(NEAR_TIE, LOGPROB_TOL)

    def ok_within(self, near_tie: float, logprob_tol: float) -> bool:
        """`ok` at other tolerances (half-precision runs)."""
        tokens_ok = self.near_tie_gap is None or self.near_tie_gap < near_tie
        return tokens_ok and self.max_logprob_diff < logprob_tol


def build_random_opt(model_kwargs: dict, seed: int = 0):
    """A random-weight `OPTForCausalLM` (float32, CPU) and a temporary directory holding it."""
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(seed)
    model = OPTForCausalLM(OPTConfig(**model_kwargs)).eval()
    tmpdir = tempfile.TemporaryDirectory(prefix="enginetui-opt-")
    model.save_pretrained(tmpdir.name)
    return model, tmpdir


def random_prompts(lengths: list[int], vocab_size: int, seed: int = 0) -> list[list[int]]:
    """Prompts of these lengths, token ids drawn past the special tokens (0..3)."""
    rng = random.Random(seed)
    return [[rng.randrange(4, vocab_size) for _ in range(n)] for n in lengths]


def hf_greedy(model, prompt: list[int], max_new_tokens: int) -> Continuation:
    """transformers' greedy continuation of `prompt`, never stopping at EOS."""
    model.generation_config.eos_token_id = None  # like ignore_eos=True
    ids = torch.tensor([prompt], device=model.device)  # [1, prompt_len]
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=max_new_tokens,
        pad_token_id=model.config.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    tokens = out.sequences[0, len(prompt) :].tolist()
    if len(tokens) != max_new_tokens:
        raise RuntimeError(f"transformers generated {len(tokens)} tokens, expected {max_new_tokens}")
    # out.logits: one [1, vocab_size] tensor per generated token
    logprobs = [float(step[0].float().log_softmax(-1)[t]) for step, t in zip(out.logits, tokens)]
    return Continuation(tokens, logprobs)


def compare(model, prompt: list[int], expected: Continuation, actual: Continuation) -> PromptParity:
    """Where `actual` (engine) departs from `expected` (transformers), and by how close a call."""
    pairs = list(zip(expected.tokens, actual.tokens))
    matched = next((i for i, (a, b) in enumerate(pairs) if a != b), len(pairs))
    lp_diff = max((abs(a - b) for a, b in zip(expected.logprobs[:matched], actual.logprobs[:matched])), default=0.0)
    if matched == len(expected.tokens) == len(actual.tokens):
        return PromptParity(len(prompt), matched, None, lp_diff)
    if matched == len(pairs):  # one is a prefix of the other: a length bug, never a tie
        return PromptParity(len(prompt), matched, float("inf"), lp_diff)
    ids = torch.tensor([prompt + expected.tokens[:matched]], device=model.device)  # [1, prompt_len + matched]
    with torch.no_grad():
        logits = model(ids).logits[0, -1].float()  # [vocab_size]
    gap = float(logits[expected.tokens[matched]] - logits[actual.tokens[matched]])
    return PromptParity(len(prompt), matched, gap, lp_diff)


def engine_greedy(llm, prompts: list[list[int]], max_tokens: int) -> list[Continuation]:
    """The engine's greedy continuation of each prompt (ignoring EOS), with logprobs."""
    from enginetui.core import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, logprobs=0)
    outs = llm.generate(prompts, params, use_tqdm=False)
    return [
        Continuation(list(c.token_ids), [step[t] for step, t in zip(c.logprobs, c.token_ids)])
        for c in (o.outputs[0] for o in outs)
    ]


def engine_tokens_per_s(llm, prompts: list[list[int]], max_tokens: int) -> tuple[float, int]:
    """(output tokens per second, output tokens) of one greedy `generate` over `prompts`."""
    from enginetui.core import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    start = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    generated = sum(len(o.outputs[0].token_ids) for o in outs)
    return generated / (time.perf_counter() - start), generated


def seeded_sampling_is_batch_independent(llm, vocab_size: int, max_tokens: int) -> bool:
    """A seeded request with every sampling option on gives the same tokens alone and inside a batch
    of other sampled and greedy requests (the sampler's generators run on the engine's device)."""
    from enginetui.core import SamplingParams

    seeded = SamplingParams(
        temperature=0.9,
        top_k=50,
        top_p=0.9,
        min_p=0.01,
        presence_penalty=0.5,
        repetition_penalty=1.1,
        seed=42,
        max_tokens=max_tokens,
        ignore_eos=True,
        logprobs=2,
    )
    others = [SamplingParams(temperature=t, max_tokens=max_tokens, ignore_eos=True) for t in (0.0, 1.0, 0.7)]
    prompt, *other_prompts = random_prompts([9, 5, 30, 17], vocab_size, seed=2)
    alone = llm.generate([prompt], seeded, use_tqdm=False)[0].outputs[0].token_ids
    batch = llm.generate(
        other_prompts[:2] + [prompt] + other_prompts[2:], others[:2] + [seeded] + others[2:], use_tqdm=False
    )
    return list(alone) == list(batch[2].outputs[0].token_ids) and len(alone) == max_tokens


@dataclass(slots=True)
class E2EResult:
    """What `run_e2e` found."""

    parity: list[PromptParity]  # greedy parity, one per prompt
    seeded_ok: bool  # seeded sampling gave the same tokens alone and in a batch
    tokens_per_s: float  # engine output tokens per second on the throughput batch
    generated: int  # output tokens of the throughput batch


def run_e2e(
    model_kwargs: dict,
    device: str,
    prompt_lens: list[int],
    max_tokens: int,
    throughput: tuple[int, int, int],
    num_blocks: int,
) -> E2EResult:
    """Greedy parity per prompt, seeded sampling, then engine throughput on
    (num_prompts, prompt_len, max_tokens)."""
    from enginetui.core import LLM

    model, tmpdir = build_random_opt(model_kwargs)
    with tmpdir:
        prompts = random_prompts(prompt_lens, model_kwargs["vocab_size"])
        with LLM(
            model=tmpdir.name,
            device=device,
            dtype="float32",
            skip_tokenizer_init=True,
            num_gpu_blocks_override=num_blocks,
        ) as llm:
            actual = engine_greedy(llm, prompts, max_tokens)
            seeded_ok = seeded_sampling_is_batch_independent(llm, model_kwargs["vocab_size"], max_tokens)
            num_prompts, prompt_len, out_len = throughput
            batch = random_prompts([prompt_len] * num_prompts, model_kwargs["vocab_size"], seed=1)
            tok_s, generated = engine_tokens_per_s(llm, batch, out_len)
    model.to(device)
    parity = [compare(model, p, hf_greedy(model, p, max_tokens), a) for p, a in zip(prompts, actual)]
    return E2EResult(parity, seeded_ok, tok_s, generated)
