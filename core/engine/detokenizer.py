"""Incremental detokenization and stop-string matching for one request.

Two detokenizers with the same face (`add`, `text`, `token_ids`): `FastIncrementalDetokenizer`
steps the Rust tokenizer's own `DecodeStream` (what vLLM 0.32 uses for fast tokenizers), several times
faster than `IncrementalDetokenizer`, which decodes a window of tokens twice per token through
`tokenizer.decode` and works with any tokenizer (and can be cloned: the dashboard's replay
keeps copies). `detokenizer_for` picks the fast one where it gives the same text.
"""

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

INVALID_PREFIX = "Invalid prefix encountered"  # how DecodeStream.step says it cannot go on


class IncrementalDetokenizer:
    """Emits only the text that new tokens add, never a half-decoded multi-byte character."""

    def __init__(self, tokenizer, skip_special_tokens: bool) -> None:
        self.tokenizer = tokenizer  # HF tokenizer (None: no text)
        self.skip_special_tokens = skip_special_tokens  # drop special tokens from text
        self.token_ids: list[int] = []  # generated tokens so far
        self.prefix_offset = 0  # start of the window decoded for context
        self.read_offset = 0  # tokens before this are already in the text
        self.text = ""  # text so far

    def add(self, new_token_ids: list[int]) -> str:
        """Append tokens; return the text they add (possibly empty while a character is incomplete)."""
        if self.tokenizer is None:
            self.token_ids.extend(new_token_ids)
            return ""
        added = []
        for token in new_token_ids:
            self.token_ids.append(token)
            decode = self.tokenizer.decode
            prefix = decode(
                self.token_ids[self.prefix_offset : self.read_offset], skip_special_tokens=self.skip_special_tokens
            )
            full = decode(self.token_ids[self.prefix_offset :], skip_special_tokens=self.skip_special_tokens)
            if len(full) > len(prefix) and not full.endswith("\ufffd"):
                added.append(full[len(prefix) :])
                self.prefix_offset = self.read_offset
                self.read_offset = len(self.token_ids)
        delta = "".join(added)
        self.text += delta
        return delta


class FastIncrementalDetokenizer:
    """Emits only the text that new tokens add, through the Rust tokenizer's DecodeStream.

    DecodeStream gives up on some byte sequences ("Invalid prefix encountered": a byte-fallback
    tokenizer whose decoded text is not a prefix of the next one's, vLLM issue 17448); the request
    then goes on with the general detokenizer, which replays its tokens once and carries on."""

    def __init__(self, tokenizer, backend: Tokenizer, skip_special_tokens: bool) -> None:
        self.tokenizer = tokenizer  # the HF tokenizer (for the general detokenizer, if it comes to that)
        self.backend = backend  # the Rust tokenizer behind it
        self.skip_special_tokens = skip_special_tokens  # drop special tokens from text
        self.fold = getattr(tokenizer, "fold_token_id", None)  # id -> an id of `backend` (a stand-in's), or None
        self.stream = DecodeStream(skip_special_tokens=skip_special_tokens)  # its window of recent tokens
        self.general: IncrementalDetokenizer | None = None  # takes over once DecodeStream gave up
        self.token_ids: list[int] = []  # generated tokens so far
        self.text = ""  # text so far

    def add(self, new_token_ids: list[int]) -> str:
        """Append tokens; return the text they add (possibly empty while a character is incomplete)."""
        added = []
        for token in new_token_ids:
            if self.general is None:
                try:
                    piece = self.stream.step(self.backend, self.fold(token) if self.fold else token)
                except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception
                    if not str(exc).startswith(INVALID_PREFIX):
                        raise
                    self.general = IncrementalDetokenizer(self.tokenizer, self.skip_special_tokens)
                    self.general.add(self.token_ids)  # the text so far, as the general one has it
            if self.general is not None:
                piece = self.general.add([token])
            self.token_ids.append(token)
            if piece:
                added.append(piece)
        delta = "".join(added)
        self.text += delta
        return delta


def detokenizer_for(tokenizer, skip_special_tokens: bool) -> FastIncrementalDetokenizer | IncrementalDetokenizer:
    """The fast detokenizer for a tokenizer with a Rust backend that decodes without the Python
    clean-up of spaces (`clean_up_tokenization_spaces`, which DecodeStream does not apply); else
    the general one (also for no tokenizer)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer) and not getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return FastIncrementalDetokenizer(tokenizer, backend, skip_special_tokens)
    return IncrementalDetokenizer(tokenizer, skip_special_tokens)


def find_stop(text: str, new_len: int, stops: list[str], include: bool) -> tuple[str, int] | None:
    """Look for a stop string ending in the last `new_len` characters of `text`.

    Returns (the stop string, where to cut the text) or None.
    """
    best = None
    for stop in stops:
        idx = text.find(stop, max(0, len(text) - new_len - len(stop) + 1))
        if idx != -1 and (best is None or idx < best[1]):
            best = (stop, idx)
    if best is None:
        return None
    stop, idx = best
    return stop, idx + len(stop) if include else idx
