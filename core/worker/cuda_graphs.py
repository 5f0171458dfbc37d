"""CUDA graphs of decode steps, as vLLM's full graphs of uniform decode batches.

At start-up the runner captures its model forward once per capture size (core/worker/graph_sizes.py)
on static input and attention-metadata buffers. A later step in which every request decodes one
token copies its inputs into those buffers, fills the rest of the next captured size with padding
requests (one token at position 0 that writes no KV, slot -1, and reads one key), replays that
size's graph and keeps the real rows. Prefills, mixed steps and decodes past the largest size run
eagerly. Each row's output depends on its own inputs alone, so padding never changes a real row.

`CudaGraph` captures with torch.cuda.CUDAGraph; `EagerReplay` stands in for it where there is no
CUDA (the tests, `tools/graph_check.py --cpu-smoke`): it runs the forward again on the same static
buffers at each replay, so everything around the capture runs on CPU too.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from enginetui.core.config import EngineConfig
from enginetui.core.worker.forward_context import AttentionMetadata, set_forward_context
from enginetui.core.worker.graph_sizes import capture_sizes, padded_size


@dataclass(frozen=True, slots=True)
class GraphSetup:
    """What the runner captured at start-up (EngineInfo carries it to clients)."""

    sizes: list[int]  # decode batch sizes captured, ascending ([] when off)
    capture_s: float = 0.0  # seconds the capture took (warm-up runs included)
    off_reason: str = ""  # why none were captured ("" when some were)


def graph_plan(config: EngineConfig, device: torch.device, backend: str) -> GraphSetup:
    """The sizes to capture for this engine (capture_s 0: not yet captured), or why graphs are off."""
    if config.enforce_eager:
        return GraphSetup([], off_reason="--enforce-eager")
    if device.type != "cuda":
        return GraphSetup([], off_reason=f"CUDA graphs need a CUDA device (this engine runs on {device.type})")
    if backend != "triton":
        return GraphSetup(
            [], off_reason=f"the {backend} attention backend cannot be captured (CUDA graphs need triton)"
        )
    sizes = decode_capture_sizes(config, blackwell=torch.cuda.get_device_capability(device)[0] == 10)
    if not sizes:
        return GraphSetup([], off_reason="no capture size within --max-num-seqs and --max-num-batched-tokens")
    return GraphSetup(sizes)


def decode_capture_sizes(config: EngineConfig, blackwell: bool = False) -> list[int]:
    """vLLM's capture sizes for this configuration that a decode step can reach: one token per running
    request, so none past max_num_seqs."""
    sizes = capture_sizes(
        config.max_num_seqs,
        config.max_num_batched_tokens,
        config.cudagraph_capture_sizes,
        config.max_cudagraph_capture_size,
        blackwell,
    )
    return [s for s in sizes if s <= config.max_num_seqs]


class StaticDecodeBuffers:
    """The inputs a captured decode forward reads: the same tensors at every replay, rows
    [0, n) real, [n, size) padding."""

    def __init__(self, max_size: int, max_blocks_per_req: int, device: torch.device) -> None:
        def zeros(*shape, dtype):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.input_ids = zeros(max_size, dtype=torch.long)  # [max_size]
        self.positions = zeros(max_size, dtype=torch.long)  # [max_size]
        self.slot_mapping = zeros(max_size, dtype=torch.long)  # [max_size]
        # One token per request: query_start_loc is 0, 1, 2, ... whatever the batch, and never changes.
        self.query_start_loc = torch.arange(max_size + 1, dtype=torch.int32, device=device)  # [max_size + 1]
        self.seq_lens = zeros(max_size, dtype=torch.int32)  # [max_size]
        self.block_table = zeros(max_size, max_blocks_per_req, dtype=torch.int32)  # [max_size, max_blocks]

    @property
    def max_size(self) -> int:
        return self.input_ids.shape[0]

    def metadata(self, size: int, backend: str | None) -> AttentionMetadata:
        """Views of the first `size` rows, as a captured forward of that size reads them."""
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[:size],
            query_start_loc=self.query_start_loc[: size + 1],
            seq_lens=self.seq_lens[:size],
            block_table=self.block_table[:size],
            backend=backend,
            max_query_len=1,
        )

    def load(self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttentionMetadata, size: int) -> None:
        """Copy a decode batch of n <= size requests (one token each) into rows [0, n), pad [n, size)."""
        n = input_ids.shape[0]
        if not n <= size <= self.max_size or attn.seq_lens.shape[0] != n:
            raise ValueError(
                f"a decode batch of {n} tokens / {attn.seq_lens.shape[0]} requests does not fit "
                f"a captured size of {size} (buffers hold {self.max_size})"
            )
        self.input_ids[:n].copy_(input_ids)
        self.positions[:n].copy_(positions)
        self.slot_mapping[:n].copy_(attn.slot_mapping)
        self.seq_lens[:n].copy_(attn.seq_lens)
        self.block_table[:n, : attn.block_table.shape[1]].copy_(attn.block_table)
        self.pad(n, size)

    def pad(self, start: int, end: int) -> None:
        """Rows [start, end) become padding: token 0 at position 0, no KV write, one key read from block 0."""
        self.input_ids[start:end] = 0
        self.positions[start:end] = 0
        self.slot_mapping[start:end] = -1
        self.seq_lens[start:end] = 1
        self.block_table[start:end] = 0


class CudaGraph:
    """`forward` captured as a torch.cuda.CUDAGraph; graphs sharing `pool` (torch.cuda.graph_pool_handle())
    share their memory."""

    def __init__(self, forward: Callable[[], torch.Tensor], pool) -> None:
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.out = forward()  # the captured forward's output, rewritten by each replay

    def replay(self) -> torch.Tensor:
        self.graph.replay()
        return self.out


class EagerReplay:
    """CudaGraph's stand-in without CUDA: replay runs `forward` again, on the same static buffers."""

    def __init__(self, forward: Callable[[], torch.Tensor], pool=None) -> None:
        self.forward = forward  # what a graph would have captured
        self.out = forward()  # as a graph's output: one tensor, rewritten by each replay

    def replay(self) -> torch.Tensor:
        self.out.copy_(self.forward())
        return self.out


class DecodeGraphs:
    """One captured forward per size, over one set of static buffers."""

    def __init__(self, model: torch.nn.Module, buffers: StaticDecodeBuffers, backend: str | None) -> None:
        self.model = model  # forward(input_ids, positions) -> hidden states
        self.buffers = buffers  # what every graph reads
        self.backend = backend  # attention backend the forward runs
        self.graphs: dict[int, CudaGraph | EagerReplay] = {}  # size -> captured forward
        self.sizes: list[int] = []  # captured sizes, ascending

    def _forward(self, size: int) -> torch.Tensor:
        """The forward a graph of `size` captures: the model over the static buffers' first rows."""
        b = self.buffers
        with set_forward_context(b.metadata(size, self.backend)):
            return self.model(b.input_ids[:size], b.positions[:size])  # [size, hidden]

    @torch.inference_mode()
    def capture(self, sizes: list[int], graph_cls: type = CudaGraph) -> float:
        """Capture every size, the largest first (the smaller ones then fit in its memory); the seconds it took.
        Every row is padding meanwhile, so capturing writes nothing into the KV cache."""
        start = time.perf_counter()
        cuda = self.buffers.input_ids.is_cuda
        pool = torch.cuda.graph_pool_handle() if cuda else None
        for size in sorted(sizes, reverse=True):
            self.buffers.pad(0, size)
            self._forward(size)  # warm-up: kernels compile and the allocator settles outside the capture
            if cuda:
                torch.cuda.synchronize()
            self.graphs[size] = graph_cls(lambda size=size: self._forward(size), pool)
        if cuda:
            torch.cuda.synchronize()
        self.sizes = sorted(self.graphs)
        return time.perf_counter() - start

    def size_for(self, num_tokens: int, num_reqs: int) -> int | None:
        """The captured size a step of `num_tokens` over `num_reqs` requests replays; None: run it eagerly
        (not every request decodes one token, or the batch is past the largest size)."""
        if num_tokens != num_reqs or not self.sizes:
            return None
        return padded_size(num_reqs, self.sizes)

    def run(self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttentionMetadata, size: int) -> torch.Tensor:
        """The hidden states of a decode batch, by replaying the graph of `size`: [num_tokens, hidden]."""
        self.buffers.load(input_ids, positions, attn, size)
        return self.graphs[size].replay()[: input_ids.shape[0]]
