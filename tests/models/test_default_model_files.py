"""The embedded default model directory is complete and loads with plain transformers."""

from __future__ import annotations

import json

import pytest
import torch

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

REQUIRED_FILES = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
]

TEXT = 'In Python, a class is defined with the "class" statement; it\'s 42 times faster.\nNew line.'


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)


@pytest.fixture(scope="module")
def model():
    from transformers import OPTForCausalLM

    m = OPTForCausalLM.from_pretrained(DEFAULT_MODEL_DIR)
    m.eval()
    return m


def test_directory_has_the_files() -> None:
    assert DEFAULT_MODEL_DIR.is_dir(), DEFAULT_MODEL_DIR
    for name in REQUIRED_FILES:
        assert (DEFAULT_MODEL_DIR / name).is_file(), name
    size = (DEFAULT_MODEL_DIR / "model.safetensors").stat().st_size
    assert 100_000 < size < 8_500_000, size


def test_config_follows_opt_conventions() -> None:
    cfg = json.loads((DEFAULT_MODEL_DIR / "config.json").read_text())
    assert cfg["model_type"] == "opt"
    assert (cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]) == (2, 2, 1)
    assert cfg["word_embed_proj_dim"] == cfg["hidden_size"]
    assert cfg["do_layer_norm_before"] is True
    assert cfg.get("dtype", cfg.get("torch_dtype")) == "float32"


def test_tokenizer_special_ids_and_roundtrip(tokenizer) -> None:
    assert tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>"]) == [0, 1, 2, 3]
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (2, 2, 1)
    ids = tokenizer(TEXT).input_ids
    assert ids[0] == 2 and 2 not in ids[1:]
    assert tokenizer.decode(ids, skip_special_tokens=True) == TEXT
    assert tokenizer.decode(ids[1:]) == TEXT
    assert len(ids) < len(TEXT) / 2  # real merges, not bytes


def test_model_loads_and_generates(tokenizer, model) -> None:
    assert model.config.vocab_size == len(tokenizer)
    ids = tokenizer("The function", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(
            ids, max_new_tokens=10, min_new_tokens=10, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )
    new = out[0, ids.shape[1] :]
    assert new.numel() == 10
    text = tokenizer.decode(new, skip_special_tokens=True)
    assert text.strip(), text
    # The tied lm_head really is the embedding (OPT ties them).
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
