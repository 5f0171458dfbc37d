"""The model contract: what the model runner, the loader and the registry rely on, and nothing more.

A model family is one subclass of `CausalLM` in one file. It implements `forward` over the step's
flat token ids and positions (attention metadata comes from the forward context),
`compute_logits` on the rows that need them, and `attention_layers`. Its module tree uses Hugging
Face's parameter names, except that parts the checkpoint holds apart are fused; the family names
them in `packed_modules_mapping`, and the fused layer's per-parameter weight loaders put each part
in place (as vLLM and nano-vllm do). `load_weights` is then the same for every family.
"""

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from enginetui.core.models.layers.attention import PagedAttention
from enginetui.core.models.layers.linear import Linear
from enginetui.core.models.layers.weight_loading import shards, weight_loader


class CausalLM(nn.Module):
    """A decoder-only language model over the paged KV cache."""

    # The Hugging Face attribute holding the base model (checkpoints of the base model alone omit it).
    base_model_prefix = "model"
    # Checkpoint name part -> (our fused parameter's name part, shard id), e.g. ".q_proj." -> (".qkv_proj.", "q").
    packed_modules_mapping: dict[str, tuple[str, str | int]] = {}
    # Checkpoint names that hold no parameter of ours (buffers that old checkpoints saved).
    ignored_weight_suffixes: tuple[str, ...] = ()

    lm_head: Linear | None  # make_lm_head's, set by each family (None: tied to the embedding)

    def __init__(self, config) -> None:
        super().__init__()
        self.config = config  # the Hugging Face config

    @property
    def tie_word_embeddings(self) -> bool:
        """The lm_head is the token embedding (no lm_head parameter of its own)."""
        return bool(getattr(self.config, "tie_word_embeddings", False))

    def make_lm_head(self, hidden: int) -> Linear | None:
        """The untied lm_head (`[vocab_size, hidden]`), or None when it is tied to the embedding."""
        return None if self.tie_word_embeddings else Linear(hidden, self.config.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """input_ids, positions: [num_tokens] -> hidden states [num_tokens, hidden]."""
        raise NotImplementedError

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [num_logits, hidden] -> logits [num_logits, vocab_size] (tied: the embedding is the head)."""
        head = self.get_input_embeddings() if self.lm_head is None else self.lm_head
        return F.linear(hidden, head.weight)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token embedding."""
        raise NotImplementedError

    def attention_layers(self) -> list[PagedAttention]:
        """Every attention layer, in order: each gets its own slice of the KV cache."""
        raise NotImplementedError

    # ---- weights ---------------------------------------------------------------------------

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load Hugging Face-named tensors, one at a time; fail on an unknown, misshapen or missing one."""
        params = dict(self.named_parameters())
        loaded: set[tuple[str, str | int | None]] = set()
        for ckpt_name, tensor in weights:
            name = self._parameter_name(ckpt_name, params)
            if name is None:
                continue
            for part, (fused, shard_id) in self.packed_modules_mapping.items():
                if part in name:
                    target = name.replace(part, fused)
                    self._load(params, target, ckpt_name, tensor, shard_id)
                    loaded.add((target, shard_id))
                    break
            else:
                self._load(params, name, ckpt_name, tensor, None)
                loaded.add((name, None))
        expected = {(n, s) for n, p in params.items() for s in (shards(p) or (None,))}
        missing = sorted(f"{n}" + (f" ({s})" if s is not None else "") for n, s in expected - loaded)
        if missing:
            raise ValueError(f"checkpoint is missing {len(missing)} weights, e.g. {missing[:3]}")

    def _parameter_name(self, ckpt_name: str, params: dict) -> str | None:
        """Our name for a checkpoint tensor (adding the base model prefix if the checkpoint omits it),
        or None for a tensor that holds no parameter."""
        if ckpt_name.endswith(self.ignored_weight_suffixes):
            return None
        if ckpt_name == "lm_head.weight" and self.tie_word_embeddings:
            return None  # the embedding already holds it
        if self._known(ckpt_name, params):
            return ckpt_name
        prefixed = f"{self.base_model_prefix}.{ckpt_name}"
        return prefixed if self._known(prefixed, params) else ckpt_name

    def _known(self, name: str, params: dict) -> bool:
        if name in params:
            return True
        return any(
            part in name and name.replace(part, fused) in params
            for part, (fused, _) in self.packed_modules_mapping.items()
        )

    @staticmethod
    def _load(params: dict, name: str, ckpt_name: str, tensor: torch.Tensor, shard_id) -> None:
        if name not in params:
            raise ValueError(f"unexpected weight {ckpt_name!r} in checkpoint")
        param = params[name]
        try:
            if shard_id is None:
                weight_loader(param)(param, tensor)
            else:
                weight_loader(param)(param, tensor, shard_id)
        except ValueError as exc:
            raise ValueError(f"weight {ckpt_name!r}: {exc}") from None
