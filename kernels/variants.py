"""Launch variants of the attention kernel: parameters that change its speed, never its result.

kernels.gpu_check checks each one's parity and times it on a GPU; kernels.aot_check compiles
each one and reads its resource use. The GPU run decides which becomes the default.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AttentionVariant:
    """Keyword arguments of `paged_attention_triton` beyond the tensors."""

    tile_n: int | None = None  # keys per inner step (None: the kernel's DEFAULT_TILE_N, or one block if larger)
    num_warps: int = 4  # warps per program
    num_splits: int = 1  # programs sharing each query tile's keys, then combined (flash-decoding)
    block_m: int | None = None  # rows (query token x head in group) per tile (None: 16, or the group)

    def kwargs(self) -> dict:
        return {"tile_n": self.tile_n, "num_warps": self.num_warps, "num_splits": self.num_splits,
                "block_m": self.block_m}

    def __str__(self) -> str:
        tile = "default tile" if self.tile_n is None else f"tile_n {self.tile_n}"
        rows = f", {self.block_m} rows" if self.block_m else ""
        splits = f", {self.num_splits} splits" if self.num_splits > 1 else ""
        return f"{tile}{rows}, {self.num_warps} warps{splits}"


DEFAULT = AttentionVariant()
# What a GPU run compares: narrower and wider key tiles, more warps, splitting long contexts, and
# taller query tiles (for prompts: 64 rows feed the tensor cores larger dots than the default 16).
VARIANTS = [
    DEFAULT,
    AttentionVariant(tile_n=16),
    AttentionVariant(tile_n=128),
    AttentionVariant(num_warps=8),
    AttentionVariant(tile_n=128, num_warps=8),
    AttentionVariant(num_splits=4),
    AttentionVariant(num_splits=8),
    AttentionVariant(block_m=64),
    AttentionVariant(tile_n=64, block_m=64),
    AttentionVariant(block_m=64, num_warps=8),
]
