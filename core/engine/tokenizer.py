"""Load the tokenizer on the client side, from the same directory as the weights."""

from core.config import EngineConfig
from core.engine.output_processor import OutputProcessor
from core.engine.processor import Processor
from core.models.loader import ModelLoadError, resolve_model_dir


def load_tokenizer(config: EngineConfig, model_dir: str | None):
    """The HF tokenizer for this engine, or None when it runs on token ids only."""
    if config.skip_tokenizer_init:
        return None
    from transformers import AutoTokenizer

    source = resolve_model_dir(config.tokenizer) if config.tokenizer else model_dir
    if source is None:
        raise ModelLoadError(
            f"no tokenizer for {config.model!r}: it is not available locally; pass skip_tokenizer_init=True "
            f"and token-id prompts, or --tokenizer with a local directory"
        )
    try:
        return AutoTokenizer.from_pretrained(str(source))
    except Exception as exc:
        raise ModelLoadError(f"could not load a tokenizer from {source}: {exc}") from exc


def open_text_stages(config: EngineConfig, client, stream: bool) -> tuple[object, Processor, OutputProcessor]:
    """The tokenizer, preprocessor and output processor for a started client (`stream`: see OutputProcessor).

    If the tokenizer cannot be loaded the client is shut down before the error propagates.
    """
    try:
        tokenizer = load_tokenizer(config, client.info.model_dir)
    except Exception:
        client.shutdown()
        raise
    return tokenizer, Processor(tokenizer, client.info), OutputProcessor(tokenizer, stream)
