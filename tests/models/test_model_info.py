"""What the engine reports about its model (EngineInfo), as the dashboard shows it."""

import torch
from transformers import AutoModelForCausalLM

from enginetui.core import LLM
from tests.models.families import make_family_dir


def test_engine_info_describes_the_model(tmp_path):
    d = make_family_dir(tmp_path, "qwen3", seed=1, tie_word_embeddings=True, max_position_embeddings=200)
    llm = LLM(
        model=d,
        multiprocess=False,
        skip_tokenizer_init=True,
        dtype="bfloat16",
        num_gpu_blocks_override=9,
        block_size=16,
    )
    try:
        info = llm.engine.info
    finally:
        llm.shutdown()
    reference = AutoModelForCausalLM.from_pretrained(d)
    assert info.architecture == "Qwen3ForCausalLM"
    assert info.num_parameters == reference.num_parameters()  # the tied head counted once
    # 2 layers x (K and V) x 2 kv heads x head_dim 32 x 2 bytes (bfloat16).
    assert info.kv_bytes_per_token == 2 * 2 * 2 * 32 * 2
    assert info.dtype == "bfloat16" and reference.dtype == torch.float32
    assert info.max_model_len == 200
    assert info.kv_pool_tokens == 9 * 16
