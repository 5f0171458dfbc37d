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

    def kwargs(self) -> dict:
        return {"tile_n": self.tile_n, "num_warps": self.num_warps, "num_splits": self.num_splits}

    def __str__(self) -> str:
        tile = "default tile" if self.tile_n is None else f"tile_n {self.tile_n}"
        splits = f", {self.num_splits} splits" if self.num_splits > 1 else ""
        return f"{tile}, {self.num_warps} warps{splits}"


DEFAULT = AttentionVariant()
# What a GPU run compares: narrower and wider key tiles, more warps, and splitting long contexts.
VARIANTS = [
    DEFAULT,
    AttentionVariant(tile_n=16),
    AttentionVariant(tile_n=128),
    AttentionVariant(num_warps=8),
    AttentionVariant(tile_n=128, num_warps=8),
    AttentionVariant(num_splits=4),
    AttentionVariant(num_splits=8),
]
