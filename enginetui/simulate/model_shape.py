"""A model's architecture as the step-time models need it, from any Hugging Face `config.json`.

`load_model_shape("llama-3.1-8b")` reads a config shipped in `configs/` (written from the public
configs of Llama-3.1-8B, Llama-3.1-70B, Qwen3-8B and OPT-125m); a directory (or a config.json
path) reads that file. Only the numbers are read: no weights, no transformers import.
"""

import json
from dataclasses import dataclass
from pathlib import Path

CONFIGS_DIR = Path(__file__).resolve().parent / "configs"  # the shipped config files


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A decoder-only transformer's sizes."""

    name: str  # what it was loaded as ("llama-3.1-8b", or the directory)
    architecture: str  # HF architectures[0], e.g. "LlamaForCausalLM"
    num_layers: int  # decoder layers
    hidden_size: int  # residual stream width
    num_heads: int  # query heads
    num_kv_heads: int  # key/value heads (grouped-query attention)
    head_dim: int  # width of one head
    intermediate_size: int  # MLP hidden width
    gated_mlp: bool  # SiLU-and-mul MLP (gate, up, down: 3 matrices) rather than fc1/fc2 (2)
    vocab_size: int  # embedding rows and lm_head columns
    tie_word_embeddings: bool  # lm_head shares the embedding's weights
    max_position_embeddings: int  # longest sequence the model was built for

    @property
    def layer_params(self) -> int:
        """Weights of one decoder layer's matrices (norms and biases are negligible)."""
        q_out = self.num_heads * self.head_dim
        kv_out = self.num_kv_heads * self.head_dim
        attention = self.hidden_size * (q_out + 2 * kv_out) + q_out * self.hidden_size
        mlp = (3 if self.gated_mlp else 2) * self.hidden_size * self.intermediate_size
        return attention + mlp

    @property
    def num_params(self) -> int:
        """All weights: the layers, the embedding and (untied) lm_head."""
        embedding = self.vocab_size * self.hidden_size
        return self.num_layers * self.layer_params + embedding * (1 if self.tie_word_embeddings else 2)

    @property
    def matmul_params(self) -> int:
        """Weights every token multiplies through (the layers; lm_head is counted per sampled row)."""
        return self.num_layers * self.layer_params

    @property
    def kv_elements_per_token(self) -> int:
        """K and V values one token keeps in every layer."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim


def shipped_models() -> list[str]:
    """Names of the configs that ship with enginetui."""
    return sorted(p.stem for p in CONFIGS_DIR.glob("*.json"))


def load_model_shape(model: str) -> ModelShape:
    """A shipped config by name (case-insensitive, an `org/` prefix ignored), else a directory holding
    config.json, else a config.json path. Raises ValueError with the choices when none matches."""
    name = model.rsplit("/", 1)[-1].lower()
    shipped = CONFIGS_DIR / f"{name}.json"
    path = Path(model).expanduser()
    if shipped.is_file() and not path.exists():
        return shape_from_config(json.loads(shipped.read_text()), name)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ValueError(
            f"model {model!r}: not a shipped config ({', '.join(shipped_models())}) and no config.json at {path}"
        )
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    return shape_from_config(config, model)


def shape_from_config(config: dict, name: str) -> ModelShape:
    """The sizes from a config.json's fields (Llama / Qwen / Mistral names, OPT's and GPT-2's too)."""
    text = config.get("text_config")
    if isinstance(text, dict):  # multimodal wrappers keep the language model's sizes here
        config = {**config, **text}

    def first(*keys: str, default=None):
        for key in keys:
            if config.get(key) is not None:
                return config[key]
        if default is None:
            raise ValueError(f"model {name!r}: config.json has none of {', '.join(keys)}")
        return default

    hidden = int(first("hidden_size", "n_embd", "d_model"))
    heads = int(first("num_attention_heads", "n_head"))
    model_type = config.get("model_type", "")
    gated = model_type not in ("opt", "gpt2", "gpt_neox", "gptj", "bloom", "falcon")
    return ModelShape(
        name=name,
        architecture=(config.get("architectures") or [model_type or "unknown"])[0],
        num_layers=int(first("num_hidden_layers", "n_layer")),
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=int(first("num_key_value_heads", default=heads)),
        head_dim=int(first("head_dim", default=hidden // heads)),
        intermediate_size=int(first("intermediate_size", "ffn_dim", "n_inner", default=4 * hidden)),
        gated_mlp=gated,
        vocab_size=int(first("vocab_size")),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", model_type in ("opt", "gpt2"))),
        max_position_embeddings=int(first("max_position_embeddings", "n_positions", "max_seq_len")),
    )
