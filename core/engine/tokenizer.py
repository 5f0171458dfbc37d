"""Load the tokenizer on the client side, from the same directory as the weights."""

import logging

from enginetui.core.config import EngineConfig
from enginetui.core.engine.output_processor import OutputProcessor
from enginetui.core.engine.processor import Processor
from enginetui.core.models.loader import ModelLoadError, default_model_dir, resolve_model_dir

log = logging.getLogger("enginetui.tokenizer")


def load_tokenizer(config: EngineConfig, model_dir: str | None, vocab_size: int | None = None):
    """The HF tokenizer for this engine, or None when it runs on token ids only.

    Dummy (random) weights known only by name have no tokenizer of their own: they get a stand-in
    whose ids fit `vocab_size` and that decodes every id of it (random weights make gibberish from
    any tokenizer).
    """
    if config.skip_tokenizer_init:
        return None
    from transformers import AutoTokenizer

    source = resolve_model_dir(config.tokenizer) if config.tokenizer else model_dir
    if source is None and config.load_format == "dummy" and vocab_size:
        return stand_in_tokenizer(config.model, vocab_size)
    if source is None:
        raise ModelLoadError(
            f"no tokenizer for {config.model!r}: it is not available locally; pass skip_tokenizer_init=True "
            f"and token-id prompts, or --tokenizer with a local directory"
        )
    try:
        return AutoTokenizer.from_pretrained(str(source))
    except Exception as exc:
        raise ModelLoadError(f"could not load a tokenizer from {source}: {exc}") from exc


class StandInTokenizer:
    """The tokenizer of random weights that come without one: `inner` encodes, and decoding folds
    the model's ids beyond `inner`'s vocabulary into it, so every generated token shows some text
    (random weights write gibberish either way). Everything else is `inner`'s."""

    def __init__(self, inner) -> None:
        self.inner = inner  # the HF tokenizer standing in
        self.vocab_len = len(inner)  # ids of its vocabulary (len() of an HF tokenizer costs a microsecond a call)

    def decode(self, token_ids, **kwargs) -> str:
        return self.inner.decode([self.fold_token_id(token) for token in token_ids], **kwargs)

    def fold_token_id(self, token: int) -> int:
        """A model id as an id of `inner`'s vocabulary."""
        return token % self.vocab_len

    def __len__(self) -> int:
        return self.vocab_len

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def stand_in_tokenizer(model: str | None, vocab_size: int) -> StandInTokenizer:
    """The embedded default model's tokenizer when its ids fit `vocab_size`, else a byte-level one."""
    from transformers import AutoTokenizer, ByT5Tokenizer

    embedded = AutoTokenizer.from_pretrained(default_model_dir())
    if len(embedded) <= vocab_size:
        log.warning("no tokenizer for %r (random weights): using the embedded default model's", model)
        return StandInTokenizer(embedded)
    byte_level = ByT5Tokenizer(extra_ids=0)  # 256 bytes and 3 special tokens
    if len(byte_level) <= vocab_size:
        log.warning("no tokenizer for %r (random weights): using a byte-level one", model)
        return StandInTokenizer(byte_level)
    raise ModelLoadError(
        f"no tokenizer for {model!r}, and its vocabulary ({vocab_size}) is too small for a "
        f"byte-level one: pass --tokenizer with a local directory"
    )


def open_text_stages(config: EngineConfig, client, stream: bool) -> tuple[object, Processor, OutputProcessor]:
    """The tokenizer, preprocessor and output processor for a started client (`stream`: see OutputProcessor).

    If the tokenizer cannot be loaded the client is shut down before the error propagates.
    """
    try:
        tokenizer = load_tokenizer(config, client.info.model_dir, client.info.vocab_size)
    except Exception:
        client.shutdown()
        raise
    return tokenizer, Processor(tokenizer, client.info), OutputProcessor(tokenizer, stream, config.stream_interval)
