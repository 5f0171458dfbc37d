"""Incremental detokenization and stop-string matching for one request."""


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
            prefix = decode(self.token_ids[self.prefix_offset : self.read_offset], skip_special_tokens=self.skip_special_tokens)
            full = decode(self.token_ids[self.prefix_offset :], skip_special_tokens=self.skip_special_tokens)
            if len(full) > len(prefix) and not full.endswith("\ufffd"):
                added.append(full[len(prefix) :])
                self.prefix_offset = self.read_offset
                self.read_offset = len(self.token_ids)
        delta = "".join(added)
        self.text += delta
        return delta


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
