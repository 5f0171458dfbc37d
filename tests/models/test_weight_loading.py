"""Weight loading through the model contract: sharded safetensors, meta-device build in the target
dtype, and clear errors for checkpoints that do not fit the model."""

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, OPTForCausalLM

import enginetui.core.models.registry as registry
from enginetui.core import LLM, SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.core.models.loader import ModelLoadError, load_hf_config, load_model
from enginetui.core.models.registry import ARCHITECTURES
from tests.models.families import make_family_dir
from tests.models.hub_cache import build_hub_cache, run_python
from tests.support.models import make_opt_dir
from tests.support.parity import hf_greedy

PROMPTS = [[2, 10, 20, 30], [2, 400, 5]]


def engine_tokens(model_dir, **kw):
    llm = LLM(model=str(model_dir), multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=32, **kw)
    try:
        params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, params, use_tqdm=False)]
    finally:
        llm.shutdown()


def test_sharded_safetensors_with_an_index_load_like_one_file(tmp_path, tiny_opt_dir):
    sharded = tmp_path / "sharded"
    OPTForCausalLM.from_pretrained(tiny_opt_dir).save_pretrained(sharded, max_shard_size="40KB")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    assert engine_tokens(sharded) == engine_tokens(tiny_opt_dir)

    # A stray safetensors file that the index does not name is not read.
    save_file({"junk": torch.zeros(3)}, str(sharded / "not-in-index.safetensors"))
    assert engine_tokens(sharded) == engine_tokens(tiny_opt_dir)

    first = sorted(set(index["weight_map"].values()))[0]
    os.remove(sharded / first)
    with pytest.raises(ModelLoadError, match=f"names shards that are not there: {first}"):
        engine_tokens(sharded)


def test_model_is_built_on_meta_and_materialized_in_the_target_dtype(monkeypatch, tiny_opt_dir):
    seen = {}
    real_class = registry.model_class  # what the loader builds from (imported when it loads)

    def spy(hf_config):
        cls = real_class(hf_config)

        class Spy(cls):
            def __init__(self, cfg):
                super().__init__(cfg)
                seen["built"] = {p.device.type for p in self.parameters()}
                seen["default dtype"] = torch.get_default_dtype()

        return Spy

    monkeypatch.setattr(registry, "model_class", spy)
    config = EngineConfig(model=tiny_opt_dir, dtype="bfloat16")
    hf_config, model_dir = load_hf_config(config)
    model = load_model(config, hf_config, model_dir)
    assert seen["built"] == {"meta"}
    assert {(p.device.type, p.dtype) for p in model.parameters()} == {("cpu", torch.bfloat16)}
    assert seen["default dtype"] == torch.float32  # never changed: other threads may be building tensors
    # The fused q/k/v rows hold the checkpoint's separate projections.
    state = load_file(os.path.join(model_dir, "model.safetensors"))
    qkv = model.model.decoder.layers[1].self_attn.qkv_proj.weight  # [3 * hidden, hidden]
    expected = torch.cat([state[f"model.decoder.layers.1.self_attn.{x}_proj.weight"] for x in "qkv"])
    assert torch.equal(qkv, expected.to(torch.bfloat16))


def rewrite_checkpoint(model_dir, edit) -> None:
    path = os.path.join(model_dir, "model.safetensors")
    state = load_file(path)
    edit(state)
    save_file(state, path, metadata={"format": "pt"})


@pytest.mark.parametrize(
    "edit,message",
    [
        (
            lambda s: s.pop("model.decoder.layers.0.self_attn.k_proj.weight"),
            r"missing 1 weights, e.g. \['model.decoder.layers.0.self_attn.qkv_proj.weight \(k\)'\]",
        ),
        (lambda s: s.pop("model.decoder.final_layer_norm.bias"), "missing 1 weights"),
        (lambda s: s.update({"model.decoder.extra.weight": torch.zeros(2)}), "unexpected weight 'model.decoder.extra"),
        (
            lambda s: s.update({"model.decoder.layers.0.fc1.weight": torch.zeros(3, 3)}),
            r"weight 'model.decoder.layers.0.fc1.weight': shape \(3, 3\) does not fit parameter of shape \(128, 64\)",
        ),
        (
            lambda s: s.update({"model.decoder.layers.0.self_attn.v_proj.bias": torch.zeros(5)}),
            r"v_proj.bias': shape \(5,\) does not fit parameter of shape \(64,\)",
        ),
    ],
    ids=["missing-shard", "missing-param", "unexpected", "misshapen", "misshapen-shard"],
)
def test_checkpoints_that_do_not_fit_fail_with_the_weight_named(tmp_path, tiny_opt_dir, edit, message):
    d = shutil.copytree(tiny_opt_dir, tmp_path / "m")
    rewrite_checkpoint(d, edit)
    with pytest.raises(ValueError, match=message):
        engine_tokens(d)


def test_unsupported_architecture_is_refused_with_the_supported_list(tmp_path):
    d = make_opt_dir(tmp_path, seed=1)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["architectures"] = ["FalconForCausalLM"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    supported = ", ".join(ARCHITECTURES)
    with pytest.raises(
        ValueError, match=f"architecture FalconForCausalLM is not supported; supported architectures: {supported}$"
    ):
        engine_tokens(d)


def test_sharded_llama_from_the_hf_cache_layout_matches_transformers(tmp_path):
    """A hub id resolved offline to a cache snapshot holding safetensors shards and their index."""
    model_dir = make_family_dir(tmp_path / "llama", "llama", seed=7)
    sharded = tmp_path / "sharded"
    AutoModelForCausalLM.from_pretrained(model_dir).save_pretrained(sharded, max_shard_size="60KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    build_hub_cache(str(tmp_path / "hub"), "someorg/tiny-llama", str(sharded))
    code = f"""
        from enginetui.core import LLM, SamplingParams
        llm = LLM(model="someorg/tiny-llama", multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=32)
        outs = llm.generate({PROMPTS}, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True), use_tqdm=False)
        print([o.outputs[0].token_ids for o in outs])
    """
    result = run_python(code, {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(hf_greedy(model_dir, PROMPTS, 6))


def test_gpt2_hub_format_without_prefix_and_with_mask_buffers_loads(tmp_path):
    """The `gpt2` checkpoint's own format: names without "transformer.", Conv1D weights `[in, out]`,
    and the causal-mask buffers `h.N.attn.bias` / `h.N.attn.masked_bias` saved beside them."""
    d = make_family_dir(tmp_path / "gpt2", "gpt2", seed=3)
    expected = hf_greedy(d, PROMPTS, 6)

    def to_hub_format(state):
        for name in list(state):
            state[name.removeprefix("transformer.")] = state.pop(name)
        for i in range(2):
            state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 256, 256))
            state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)

    rewrite_checkpoint(d, to_hub_format)
    assert "h.0.attn.c_attn.weight" in load_file(os.path.join(d, "model.safetensors"))
    assert engine_tokens(d) == expected
