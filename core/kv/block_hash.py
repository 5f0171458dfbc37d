"""Chained hashes of full KV blocks: a block's identity is its tokens and everything before it.

SHA-256 (vLLM's default `prefix_caching_hash_algo`): two different prefixes sharing a hash would
share KV, so the hash must not collide in practice. It is deterministic across processes.
"""

import hashlib
from array import array

from enginetui.core.request import Request

BlockHash = bytes  # 32-byte SHA-256 digest

NONE_HASH: BlockHash = hashlib.sha256(b"enginetui-none-hash").digest()  # parent hash of a request's first block


def hash_block(parent_hash: BlockHash, tokens: list[int]) -> BlockHash:
    """Hash of one full block given its parent's hash."""
    return hashlib.sha256(parent_hash + array("q", tokens).tobytes()).digest()


def update_block_hashes(request: Request, block_size: int) -> list[BlockHash]:
    """Extend `request.block_hashes` to cover every full block of its current tokens."""
    hashes = request.block_hashes
    num_full = request.num_tokens // block_size
    while len(hashes) < num_full:
        i = len(hashes)
        parent = hashes[-1] if hashes else NONE_HASH
        hashes.append(hash_block(parent, request.tokens(i * block_size, (i + 1) * block_size)))
    return hashes
