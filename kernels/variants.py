"""Launch variants of the attention kernel: parameters that change its speed, never its result.

tools/gpu_check.py checks each one's parity and times it on a GPU; tools/aot_check.py compiles
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
        return {
            "tile_n": self.tile_n,
            "num_warps": self.num_warps,
            "num_splits": self.num_splits,
            "block_m": self.block_m,
        }

    def __str__(self) -> str:
        tile = "default tile" if self.tile_n is None else f"tile_n {self.tile_n}"
        rows = f", {self.block_m} rows" if self.block_m else ""
        splits = f", {self.num_splits} splits" if self.num_splits > 1 else ""
        return f"{tile}{rows}, {self.num_warps} warps{splits}"


DEFAULT = AttentionVariant()
# Prompt-shaped steps: 64 query rows turn the half-precision dots into wgmma on sm_90; 64 keys a step
# keep such a tile spill-free at 4 warps there (aot_check; 128 keys spill 48-56 bytes). fp32 at 64 rows
# spills kilobytes: fp32 steps keep the default.
PREFILL = AttentionVariant(tile_n=64, block_m=64)


def launch_for_step(max_query_len: int | None, group: int, half_precision: bool) -> AttentionVariant:
    """The launch for one step, chosen on the host from its shape: PREFILL when its longest query
    fills PREFILL's rows (query tokens x `group` query heads per kv head) in fp16 / bf16; else the
    default 16-row tile, which fits decodes (one token a request) and short chunks."""
    if half_precision and max_query_len is not None and max_query_len * group >= PREFILL.block_m:
        return PREFILL
    return DEFAULT


# What a GPU run compares: narrower and wider key tiles, more warps, splitting long contexts, and
# taller query tiles (for prompts: 64 and 128 rows feed the tensor cores larger dots than the default 16;
# at 128 rows and 8 warps, 32 or 64 keys, h128 bf16 is wgmma and spill-free on sm_90 by aot_check).
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
    AttentionVariant(tile_n=32, block_m=128, num_warps=8),
    AttentionVariant(tile_n=64, block_m=128, num_warps=8),
]
