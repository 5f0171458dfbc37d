"""Ceiling division of integers, the one copy: blocks for a token count, chunks for a length."""


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for integers (b > 0), without floats: cdiv(17, 16) == 2, cdiv(16, 16) == 1."""
    return -(-a // b)
