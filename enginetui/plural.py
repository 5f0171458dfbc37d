"""Counts in words, singular or plural: `count(1, "block")` is "1 block", `count(2, "block")` "2 blocks"."""


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n noun`, the noun in the plural unless n is 1 (`plural` for nouns that do not just take an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
