"""Which model class implements which Hugging Face architecture."""

from transformers import PretrainedConfig

from core.models.opt import OPTForCausalLM

_ARCHITECTURES = {"OPTForCausalLM": OPTForCausalLM, "OPTModel": OPTForCausalLM}


def model_class(hf_config: PretrainedConfig):
    for arch in getattr(hf_config, "architectures", None) or []:
        if arch in _ARCHITECTURES:
            return _ARCHITECTURES[arch]
    if getattr(hf_config, "model_type", None) == "opt":
        return OPTForCausalLM
    raise ValueError(
        f"unsupported architecture {getattr(hf_config, 'architectures', None)} "
        f"(model_type {getattr(hf_config, 'model_type', None)!r}); supported: {sorted(_ARCHITECTURES)}"
    )
