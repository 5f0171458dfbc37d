"""Which model class implements which Hugging Face architecture; anything else is refused."""

from transformers import PretrainedConfig

from enginetui.core.models.contract import CausalLM
from enginetui.core.models.gpt2 import GPT2LMHeadModel
from enginetui.core.models.llama import LlamaForCausalLM
from enginetui.core.models.mistral import MistralForCausalLM
from enginetui.core.models.opt import OPTForCausalLM
from enginetui.core.models.qwen2 import Qwen2ForCausalLM
from enginetui.core.models.qwen3 import Qwen3ForCausalLM

ARCHITECTURES: dict[str, type[CausalLM]] = {  # config.json "architectures" entry -> our class
    "LlamaForCausalLM": LlamaForCausalLM,
    "MistralForCausalLM": MistralForCausalLM,
    "Qwen2ForCausalLM": Qwen2ForCausalLM,
    "Qwen3ForCausalLM": Qwen3ForCausalLM,
    "GPT2LMHeadModel": GPT2LMHeadModel,
    "OPTForCausalLM": OPTForCausalLM,
    "OPTModel": OPTForCausalLM,  # some facebook/opt-* configs name the base model
}
# Configs that name no architecture, by model_type.
_MODEL_TYPES = {
    "gpt2": GPT2LMHeadModel,
    "llama": LlamaForCausalLM,
    "mistral": MistralForCausalLM,
    "opt": OPTForCausalLM,
    "qwen2": Qwen2ForCausalLM,
    "qwen3": Qwen3ForCausalLM,
}


class UnsupportedArchitecture(ValueError):
    """The config names no architecture this engine implements."""


def model_class(hf_config: PretrainedConfig) -> type[CausalLM]:
    architectures = getattr(hf_config, "architectures", None) or []
    for arch in architectures:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    model_type = getattr(hf_config, "model_type", None)
    if not architectures and model_type in _MODEL_TYPES:
        return _MODEL_TYPES[model_type]
    raise UnsupportedArchitecture(
        f"model architecture {', '.join(architectures) or f'(none; model_type {model_type!r})'} is not supported; "
        f"supported architectures: {', '.join(ARCHITECTURES)}"
    )
