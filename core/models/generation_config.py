"""The model's generation defaults, read as vLLM reads them (its `generation_config="auto"`).

`generation_config.json` (else the generation fields of config.json) supplies the EOS ids (one id
or a list: Llama 3 lists several) and default sampling parameters. Only the fields that differ
from transformers' `GenerationConfig()` defaults count, as in vLLM's `get_diff_sampling_param`.
"""

from dataclasses import dataclass
from pathlib import Path

from transformers import GenerationConfig, PretrainedConfig

# Generation-config fields that become SamplingParams defaults (HF name -> SamplingParams name).
SAMPLING_FIELDS = {
    "repetition_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "max_new_tokens": "max_tokens",
}


@dataclass(frozen=True, slots=True)
class GenerationDefaults:
    """What the model's generation config says about stopping and sampling."""

    eos_token_ids: list[int]  # every id that ends generation (empty: none known)
    sampling: dict[str, int | float]  # SamplingParams keyword -> default, used when a request gives no params


def generation_defaults(model_dir: Path | None, hf_config: PretrainedConfig) -> GenerationDefaults:
    """The defaults from `model_dir/generation_config.json`, else from the model's config."""
    gen = None
    if model_dir is not None:
        try:
            gen = GenerationConfig.from_pretrained(model_dir)
        except OSError:  # no generation_config.json
            gen = None
    if gen is None:
        gen = GenerationConfig.from_model_config(hf_config)
    diff = gen.to_diff_dict()
    eos = diff.get("eos_token_id")
    eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(dict.fromkeys(eos))
    sampling = {ours: diff[hf] for hf, ours in SAMPLING_FIELDS.items() if diff.get(hf) is not None}
    return GenerationDefaults(eos_token_ids=eos_ids, sampling=sampling)
