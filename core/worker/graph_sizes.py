"""Which decode batch sizes get a CUDA graph, and which graph a batch replays: vLLM's rules, no torch.

`capture_sizes` is vLLM's `VllmConfig._set_cudagraph_sizes` for one-token decodes (no speculative
decoding): by default 1, 2, 4, then every 8 up to 248, then every 16, up to
min(2 x max_num_seqs, 512) (1024 on data-center Blackwell), plus max_num_batched_tokens and
max_num_seqs where they fit; a given list is deduplicated and cut at max_num_batched_tokens.
`padded_size` is vLLM's CudagraphDispatcher padding: a batch runs the smallest captured size that
holds it, and eagerly past the largest.
"""

from bisect import bisect_left

DEFAULT_MAX_CAPTURE_SIZE = 512  # vLLM's default ceiling
BLACKWELL_MAX_CAPTURE_SIZE = 1024  # its ceiling on data-center Blackwell (compute capability 10.x)


class CaptureSizeError(ValueError):
    """A --max-cudagraph-capture-size that contradicts the --cudagraph-capture-sizes given with it."""


def capture_sizes(
    max_num_seqs: int,
    max_num_batched_tokens: int,
    sizes: list[int] | None = None,
    max_size: int | None = None,
    blackwell: bool = False,
) -> list[int]:
    """The batch sizes vLLM captures, ascending (`sizes`: --cudagraph-capture-sizes, `max_size`:
    --max-cudagraph-capture-size, both None by default); [] when none fits."""
    decode_sizes: list[int] = []
    if max_size is None:
        default_max = BLACKWELL_MAX_CAPTURE_SIZE if blackwell else DEFAULT_MAX_CAPTURE_SIZE
        max_size = min(max_num_seqs * 2, default_max)
        if max_num_seqs <= max_size:
            decode_sizes = [max_num_seqs]
    max_size = min(max_num_batched_tokens, max_size)
    if sizes is not None:
        chosen = sorted({s for s in sizes if s <= max_num_batched_tokens})
    else:
        chosen = [s for s in (1, 2, 4) if s <= max_size]
        if max_size >= 8:
            chosen += list(range(8, min(max_size + 1, 256), 8))
        if max_size >= 256:
            chosen += list(range(256, max_size + 1, 16))
        if max_num_batched_tokens <= max_size:
            chosen.append(max_num_batched_tokens)
        chosen = sorted(set(chosen + [s for s in decode_sizes if s <= max_num_batched_tokens]))
    return chosen


def check_capture_sizes(sizes: list[int] | None, max_size: int | None, max_num_batched_tokens: int) -> None:
    """vLLM's one refusal: both flags given, and the largest size kept is not the maximum given."""
    if sizes is None or max_size is None:
        return
    kept = [s for s in sizes if s <= max_num_batched_tokens]
    largest = max(kept, default=0)
    if largest != max_size:
        raise CaptureSizeError(
            f"max_cudagraph_capture_size ({max_size}) must equal the largest "
            f"cudagraph_capture_sizes entry within max_num_batched_tokens ({largest})"
        )


def padded_size(num_tokens: int, sizes: list[int]) -> int | None:
    """The captured size a batch of `num_tokens` runs padded to (`sizes` ascending); None past the largest."""
    i = bisect_left(sizes, num_tokens)
    return sizes[i] if i < len(sizes) else None
