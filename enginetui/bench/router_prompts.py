"""Prompts as text for a router in front of the servers (`bench serve --router-url`).

vllm-router's prefix-aware policies (cache_aware, consistent_hash) route by the prompt's text; a token-id
prompt reaches them as no text at all, so every request looks alike. Each token id of a workload's prompt is
sent as a word that the model's tokenizer reads back as exactly that one token, without special tokens: the
servers compute on the same lengths, and the prompts share text exactly where their token ids are shared.
"""

from typing import Any

MIN_WORDS = 256  # fewer single-token words than this: the vocabulary cannot spell prompts apart


def single_token_words(tokenizer: Any) -> list[str]:
    """Words of the tokenizer's vocabulary (a space, then letters) that encode to their one token alone and
    in any sequence of them, in id order."""
    words = []
    for token_id in range(len(tokenizer)):
        word = tokenizer.decode([token_id])
        if len(word) > 1 and word[0] == " " and word[1:].isalpha() and word[1:].isascii():
            if tokenizer.encode(word, add_special_tokens=False) == [token_id]:
                words.append(word)
    if len(words) < MIN_WORDS:
        raise ValueError(
            f"--router-url sends prompts as text and the model's tokenizer has {len(words)} single-token "
            f"words (of {MIN_WORDS} needed)"
        )
    return words


def prompt_text(token_ids: list[int], words: list[str]) -> str:
    """The prompt as text: token id t is the word words[t % len(words)]."""
    return "".join(words[t % len(words)] for t in token_ids)


def model_words(kwargs: dict[str, Any]) -> list[str]:
    """The single-token words of the tokenizer of the model these engine arguments name."""
    from enginetui.bench.engines import model_tokenizer_dir, model_vocab_size
    from enginetui.core.config import EngineConfig
    from enginetui.core.engine.tokenizer import load_tokenizer

    model_dir = model_tokenizer_dir(kwargs)
    if model_dir is None or kwargs.get("skip_tokenizer_init"):
        raise ValueError("--router-url sends prompts as text: the model needs a tokenizer of its own")
    return single_token_words(load_tokenizer(EngineConfig(**kwargs), str(model_dir), model_vocab_size(kwargs)))
