"""bfloat16 on CPU (`dtype="bfloat16"`): the engine computes the model within bf16's error.

Greedy token parity is tested in float32. In bf16 two correct implementations can round their way
to different argmaxes, so this test is teacher-forced: transformers, in float32 on the same
bf16-rounded weights, scores the engine's own continuation, and every token the engine chose must
be (within bf16's error) the reference's best, with the logprob the engine reported for it.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM

from enginetui.core import LLM, SamplingParams
from tests.models.families import make_family_dir
from tests.support.models import make_opt_dir
from tests.support.parity import mixed_prompts

LOGPROB_TOL = 0.15  # |engine - reference| logprob, and how far below the reference's best a chosen token may be


def _model_dir(tmp_path, family: str) -> str:
    if family == "opt":  # head size 64: the kernel's bf16 runs of 32 channels
        return make_opt_dir(tmp_path / "opt", hidden_size=128, word_embed_proj_dim=128, num_attention_heads=2)
    return make_family_dir(tmp_path / family, family)  # qwen3: grouped-query attention, head size 32


@pytest.mark.parametrize("family", ["opt", "qwen3"])
def test_bf16_engine_tracks_the_fp32_reference_on_its_own_tokens(tmp_path, family):
    model_dir = _model_dir(tmp_path, family)
    prompts = mixed_prompts(6, 512, 5, 60, seed=1)
    llm = LLM(model=model_dir, multiprocess=False, skip_tokenizer_init=True, dtype="bfloat16")
    assert llm.engine.info.dtype == "bfloat16"
    outs = llm.generate(
        prompts, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, logprobs=0), use_tqdm=False
    )
    llm.shutdown()
    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).float().eval()
    worst_gap = worst_error = 0.0
    for prompt, out in zip(prompts, outs):
        tokens, logprobs = out.outputs[0].token_ids, out.outputs[0].logprobs
        with torch.no_grad():
            logits = reference(torch.tensor([prompt + tokens[:-1]])).logits[0]  # [len(prompt) + 11, vocab]
        ref = logits[len(prompt) - 1 :].log_softmax(-1)  # [12, vocab]: the distribution of each generated token
        for i, token in enumerate(tokens):
            worst_gap = max(worst_gap, (ref[i].max() - ref[i, token]).item())
            worst_error = max(worst_error, abs(logprobs[i][token] - ref[i, token].item()))
    assert worst_gap < LOGPROB_TOL and worst_error < LOGPROB_TOL, (worst_gap, worst_error)
