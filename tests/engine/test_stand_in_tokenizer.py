"""Dummy weights known only by name (no local directory, so no tokenizer) get a stand-in tokenizer
whose ids fit the model's vocabulary, instead of an error."""

import pytest

from enginetui.core.config import EngineConfig
from enginetui.core.engine.tokenizer import load_tokenizer
from enginetui.core.models.loader import ModelLoadError, default_model_dir

DUMMY = EngineConfig(model="facebook/opt-125m", load_format="dummy")  # not cached here: no tokenizer files


def test_a_large_vocabulary_gets_the_embedded_models_tokenizer(caplog):
    tokenizer = load_tokenizer(DUMMY, None, vocab_size=50272)
    assert len(tokenizer) == 4096 and tokenizer.name_or_path == str(default_model_dir())  # the inner one's
    ids = tokenizer.encode("Once upon a time")
    assert max(ids) < 50272 and tokenizer.decode(ids, skip_special_tokens=True) == "Once upon a time"
    assert "no tokenizer for 'facebook/opt-125m' (random weights): using the embedded default model's" in caplog.text
    # every id random weights may sample shows text: the ids past the tokenizer's 4096 fold into it
    assert tokenizer.decode([4096 + ids[1]]) == tokenizer.decode([ids[1]]) != ""
    assert tokenizer.eos_token_id == tokenizer.inner.eos_token_id


def test_a_small_vocabulary_gets_a_byte_level_tokenizer():
    tokenizer = load_tokenizer(DUMMY, None, vocab_size=512)
    ids = tokenizer.encode("naïve")
    assert len(tokenizer) == 259 and max(ids) < 512
    assert tokenizer.decode(ids, skip_special_tokens=True) == "naïve"
    assert tokenizer.decode([259 + ord("a") + 3]) == "a"  # byte ids start at 3


def test_a_vocabulary_too_small_for_bytes_is_an_error_that_names_the_flag():
    with pytest.raises(ModelLoadError, match="vocabulary \\(100\\) is too small.*--tokenizer"):
        load_tokenizer(DUMMY, None, vocab_size=100)


def test_real_weights_without_a_tokenizer_still_ask_for_one():
    with pytest.raises(ModelLoadError, match="no tokenizer for 'facebook/opt-125m'"):
        load_tokenizer(EngineConfig(model="facebook/opt-125m"), None, vocab_size=50272)


def test_random_weights_known_by_name_generate_text_without_a_tokenizer_flag():
    from enginetui.core import LLM, SamplingParams

    llm = LLM("facebook/opt-125m", load_format="dummy", multiprocess=False, num_gpu_blocks_override=8, max_model_len=64)
    try:
        out = llm.generate(["Once upon a time"], SamplingParams(max_tokens=6, temperature=0, ignore_eos=True))[0]
    finally:
        llm.shutdown()
    assert len(out.outputs[0].token_ids) == 6 and out.outputs[0].text.strip()  # gibberish, but text
