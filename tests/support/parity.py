"""Greedy token ids from transformers and from the engine, for the same checkpoint directory."""

import random

import torch
from transformers import AutoModelForCausalLM

from enginetui.core import LLM, SamplingParams
from tests.support.event_capture import recorded_events


def mixed_prompts(n: int, vocab: int, lo: int, hi: int, seed: int = 0) -> list[list[int]]:
    """`n` prompts of lo..hi random tokens after token 2 (a BOS for the test configs)."""
    rng = random.Random(seed)
    return [[2] + [rng.randrange(4, vocab) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def hf_greedy(model_dir: str, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
    """transformers' greedy continuation of each prompt (one at a time, no padding), EOS ignored."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # like ignore_eos: EOS is an ordinary token
    outs = []
    for p in prompts:
        ids = model.generate(torch.tensor([p]), max_new_tokens=max_tokens, do_sample=False, pad_token_id=0)
        outs.append(ids[0, len(p) :].tolist())
    return outs


def engine_greedy(model_dir: str, prompts, max_tokens: int, **engine_args):
    """The engine's greedy tokens per prompt, and every step event of the run."""
    llm = LLM(model=model_dir, multiprocess=False, skip_tokenizer_init=True, dtype="float32", **engine_args)
    with recorded_events(llm.engine) as events:
        outs = llm.generate(
            prompts, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True), use_tqdm=False
        )
    llm.shutdown()
    return [o.outputs[0].token_ids for o in outs], [e for e in events if e.is_step]
