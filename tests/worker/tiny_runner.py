"""A one-layer OPT model runner on the CPU, and the scheduler's data for a new request of consecutive tokens."""

import torch
from transformers import OPTConfig

from enginetui.core.models.opt import OPTForCausalLM
from enginetui.core.sampling_params import SamplingParams
from enginetui.core.sched.output import NewRequestData
from enginetui.core.worker.model_runner import ModelRunner


def make_runner(block_size=16, device="cpu", dtype=torch.float32):
    cfg = OPTConfig(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=64,
        max_position_embeddings=128,
        word_embed_proj_dim=32,
    )
    return ModelRunner(
        OPTForCausalLM(cfg).to(device=device, dtype=dtype),
        num_blocks=32,
        block_size=block_size,
        max_num_reqs=8,
        max_model_len=128,
        dtype=dtype,
        device=torch.device(device),
        seed=0,
    )


def new_req(req_id, n_tokens, n_computed, blocks):
    return NewRequestData(
        req_id=req_id,
        token_ids=list(range(10, 10 + n_tokens)),
        num_prompt_tokens=n_tokens,
        sampling_params=SamplingParams(temperature=0),
        eos_token_ids=[2],
        block_ids=blocks,
        num_computed_tokens=n_computed,
    )
