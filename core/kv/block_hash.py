"""Chained hashes of full KV blocks: a block's identity is its tokens and everything before it."""

from core.request import Request

NONE_HASH = 0  # parent hash of a request's first block


def hash_block(parent_hash: int, tokens: list[int]) -> int:
    """Hash of one full block given its parent's hash (deterministic across processes)."""
    return hash((parent_hash, tuple(tokens)))


def update_block_hashes(request: Request, block_size: int) -> list[int]:
    """Extend `request.block_hashes` to cover every full block of its current tokens."""
    hashes = request.block_hashes
    num_full = request.num_tokens // block_size
    while len(hashes) < num_full:
        i = len(hashes)
        parent = hashes[-1] if hashes else NONE_HASH
        hashes.append(hash_block(parent, request.tokens(i * block_size, (i + 1) * block_size)))
    return hashes
