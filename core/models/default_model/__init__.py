"""The embedded default model: a tiny OPT language model that ships inside the package.

``DEFAULT_MODEL_DIR`` is a Hugging Face-format directory (``config.json``,
``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``,
``special_tokens_map.json``, ``generation_config.json``) holding a ~1.4M-parameter
OPT-architecture causal LM and its 4096-token byte-level BPE tokenizer (OPT conventions:
``<s>``=0, ``<pad>``=1, ``</s>``=2 as both bos and eos and prepended to every text,
``<unk>``=3). It was trained from scratch, offline, on English prose that ships with
CPython (``pydoc_data.topics`` and the standard library's docstrings), so ``enginetui``
runs with no network and no flags and still prints recognisable English. It knows the
register of Python documentation, not facts. ``tools/train_default_model.py`` (in the repository, not installed) rebuilds it;
``opt-tiny/TRAINING.md`` and ``opt-tiny/training_info.json`` record how it was made.
"""

from __future__ import annotations

import pathlib

DEFAULT_MODEL_DIR: pathlib.Path = pathlib.Path(__file__).resolve().parent / "opt-tiny"
"""Directory of the embedded default model, loadable with ``from_pretrained``."""

__all__ = ["DEFAULT_MODEL_DIR"]
