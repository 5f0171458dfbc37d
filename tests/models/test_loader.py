"""One loader for every source: local directories (safetensors or .bin), the HF cache, dummy weights."""

import os
import shutil
import time

import pytest
import torch
from transformers import OPTForCausalLM

from enginetui.core import LLM, SamplingParams
from enginetui.core.models.loader import ModelLoadError, resolve_model_dir
from tests.models.hub_cache import build_hub_cache, run_python
from tests.support.models import make_opt_dir

GREEDY = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
PROMPTS = [[2, 10, 20, 30], [2, 400, 5]]


def engine_tokens(model, **kw):
    llm = LLM(model=model, multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=32, **kw)
    try:
        return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, GREEDY, use_tqdm=False)]
    finally:
        llm.shutdown()


def test_missing_path_and_non_model_directory_fail_clearly(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        resolve_model_dir(str(tmp_path / "nope" / "deeper"))
    with pytest.raises(ModelLoadError, match="no config.json"):
        resolve_model_dir(str(tmp_path))


def test_pytorch_bin_checkpoints_load_like_safetensors(tmp_path, tiny_opt_dir):
    # Older checkpoints (facebook/opt-* among them) ship pytorch_model.bin, some without the "model." prefix.
    state = OPTForCausalLM.from_pretrained(tiny_opt_dir).state_dict()
    torch.save({k.removeprefix("model."): v for k, v in state.items()}, tmp_path / "pytorch_model.bin")
    shutil.copy(os.path.join(tiny_opt_dir, "config.json"), tmp_path / "config.json")
    assert engine_tokens(str(tmp_path)) == engine_tokens(tiny_opt_dir)


def test_dummy_weights_for_a_known_hub_name_work_offline():
    llm = LLM(
        model="facebook/opt-125m",
        load_format="dummy",
        multiprocess=False,
        skip_tokenizer_init=True,
        num_gpu_blocks_override=16,
    )
    try:
        assert llm.engine.info.vocab_size == 50272
        out = llm.generate([[2, 5, 6]], SamplingParams(max_tokens=3, ignore_eos=True), use_tqdm=False)[0]
        assert len(out.outputs[0].token_ids) == 3
    finally:
        llm.shutdown()


def test_hub_id_resolves_from_the_local_hf_cache_offline(tmp_path, tiny_opt_dir):
    build_hub_cache(str(tmp_path / "hub"), "someorg/tiny-opt", tiny_opt_dir)
    code = f"""
        from enginetui.core import LLM, SamplingParams
        llm = LLM(model="someorg/tiny-opt", multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=32)
        outs = llm.generate({PROMPTS}, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True), use_tqdm=False)
        print([o.outputs[0].token_ids for o in outs])
        print(llm.engine.info.model_dir)
    """
    result = run_python(code, {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    tokens, model_dir = result.stdout.strip().splitlines()[-2:]
    assert tokens == str(engine_tokens(tiny_opt_dir))
    assert "models--someorg--tiny-opt" in model_dir


@pytest.mark.parametrize("offline", ["1", "0"])
def test_unreachable_hub_id_fails_fast_with_what_to_do(tmp_path, offline):
    code = """
        from enginetui.core import LLM
        try:
            LLM(model="someorg/not-cached-anywhere", multiprocess=False)
        except ValueError as exc:
            print(exc)
    """
    start = time.monotonic()
    result = run_python(code, {"HF_HUB_CACHE": str(tmp_path / "empty"), "HF_HUB_OFFLINE": offline})
    elapsed = time.monotonic() - start
    assert "not in the Hugging Face cache" in result.stdout
    assert "local model directory" in result.stdout and "default model" in result.stdout
    assert elapsed < 60  # a guard against long retries, not a speed measurement


def test_fp16_weights_are_loaded_into_the_requested_dtype(tmp_path):
    d = make_opt_dir(tmp_path, seed=5)
    model = OPTForCausalLM.from_pretrained(d).to(torch.float16)
    model.save_pretrained(d)
    llm = LLM(model=d, multiprocess=False, skip_tokenizer_init=True, dtype="float32", num_gpu_blocks_override=8)
    try:
        assert llm.engine.info.dtype == "float32"
    finally:
        llm.shutdown()
