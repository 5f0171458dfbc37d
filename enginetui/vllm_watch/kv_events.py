"""vLLM's KV cache events as they travel over ZMQ (vllm/distributed/kv_events.py, vLLM 0.32).

Each message on the PUB socket has three frames: the topic (vLLM's `topic`, "" by default), the
batch's sequence number (8 bytes, big-endian, counting from 0 per publisher) and the msgpack
payload: a `KVEventBatch`, encoded as an array `[ts, events, data_parallel_rank]` whose events
are maps tagged by `"type"`. The structs below mirror vLLM's field for field, keeping only what a
viewer reads; fields vLLM adds later are ignored, and an event of a type this module does not
know is counted, not fatal.
"""

from dataclasses import dataclass

import msgspec

# A block's hash as vLLM publishes it: 32 bytes of SHA-256 by default, or a 64-bit int when
# vLLM runs with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1.
BlockHash = bytes | int

END_OF_REPLAY = (-1).to_bytes(8, "big", signed=True)  # the replay socket's last sequence frame


class BlockStored(msgspec.Struct, tag=True, gc=False):
    """Full blocks entered the prefix cache: one chain, parent first."""

    block_hashes: list[BlockHash]  # the stored blocks, in chain order
    parent_block_hash: BlockHash | None  # the block before the first (None: the chain starts at a prompt's start)
    token_ids: list[int]  # the blocks' tokens, block_size per hash, in order
    block_size: int  # tokens per block
    medium: str | None = None  # where the blocks live: "GPU" (device memory, also on CPU builds), "CPU" (offload tier)
    lora_name: str | None = None  # LoRA adapter whose tokens these are (None: the base model)
    group_idx: int | None = None  # KV cache group (hybrid models have several; None or 0 otherwise)


class BlockRemoved(msgspec.Struct, tag=True, gc=False):
    """Blocks left the prefix cache (evicted to make room, or their hash replaced)."""

    block_hashes: list[BlockHash]  # the removed blocks
    medium: str | None = None  # as BlockStored.medium
    group_idx: int | None = None  # as BlockStored.group_idx


class AllBlocksCleared(msgspec.Struct, tag=True, gc=False):
    """The whole prefix cache was reset (vLLM's reset_prefix_cache)."""


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared


class _WireBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float  # when vLLM sent the batch (Unix time)
    events: list[msgspec.Raw]  # decoded one by one, so an unknown event type skips only itself
    data_parallel_rank: int | None = None  # the sending engine's rank (None: one engine)


@dataclass(frozen=True, slots=True)
class KVEventBatch:
    """One engine step's KV events from one publisher."""

    seq: int  # the publisher's sequence number (0, 1, 2, ...; restarts at 0 with the server)
    ts: float  # when vLLM published it (time.time() on the server)
    events: tuple[KVEvent, ...]  # in the order they happened
    data_parallel_rank: int  # which data-parallel engine published it (0 without data parallelism)
    num_unknown: int = 0  # events of a type this module does not know (skipped)


class KVEventDecodeError(ValueError):
    """A message that is not a vLLM KV event batch."""


_batch_decoder = msgspec.msgpack.Decoder(_WireBatch)
_event_decoder = msgspec.msgpack.Decoder(KVEvent)


def decode_batch(seq: int, payload: bytes, default_rank: int = 0) -> KVEventBatch:
    """One batch from its sequence number and msgpack payload; `default_rank` when vLLM sent none."""
    try:
        wire = _batch_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise KVEventDecodeError(f"not a vLLM KV event batch ({exc})") from exc
    events: list[KVEvent] = []
    unknown = 0
    for raw in wire.events:
        try:
            events.append(_event_decoder.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError):
            unknown += 1
    rank = default_rank if wire.data_parallel_rank is None else wire.data_parallel_rank
    return KVEventBatch(seq=seq, ts=wire.ts, events=tuple(events), data_parallel_rank=rank, num_unknown=unknown)


def decode_frames(frames: list[bytes], default_rank: int = 0) -> KVEventBatch:
    """A batch from the frames of one PUB (or replay) message: topic, sequence number, payload."""
    if len(frames) != 3 or len(frames[1]) != 8:
        raise KVEventDecodeError(f"expected 3 frames (topic, 8-byte sequence, payload), got {len(frames)}")
    return decode_batch(int.from_bytes(frames[1], "big"), frames[2], default_rank)


def short_hash(block_hash: BlockHash, digits: int = 6) -> str:
    """The first hex digits of a hash: enough to tell blocks apart on screen."""
    if isinstance(block_hash, int):
        return f"{block_hash & (2**64 - 1):016x}"[:digits]
    return block_hash.hex()[:digits]


def rank_endpoint(endpoint: str, rank: int) -> str:
    """The endpoint data-parallel rank `rank` publishes on: vLLM adds the rank to a tcp port
    (`offset_endpoint_port`); rank 0 and port 0 keep the endpoint as given."""
    if rank == 0 or not endpoint.startswith("tcp://"):
        return endpoint
    base, _, port = endpoint.rpartition(":")
    return endpoint if int(port) == 0 else f"{base}:{int(port) + rank}"
