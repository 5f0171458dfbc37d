"""vLLM's KV event wire format built by hand (as vllm/distributed/kv_events.py encodes it), for tests."""

import msgspec


def stored(hashes, parent, tokens, block_size, medium="GPU", **extra) -> dict:
    """A BlockStored event as vLLM encodes it (a map tagged by "type"; its fields without default always present)."""
    return {
        "type": "BlockStored",
        "block_hashes": list(hashes),
        "parent_block_hash": parent,
        "token_ids": list(tokens),
        "block_size": block_size,
        "lora_id": None,
        "medium": medium,
        "lora_name": None,
        **extra,
    }


def removed(hashes, medium="GPU") -> dict:
    return {"type": "BlockRemoved", "block_hashes": list(hashes), "medium": medium}


def cleared() -> dict:
    return {"type": "AllBlocksCleared"}


def payload(ts: float, events: list[dict], rank: int | None = 0) -> bytes:
    """A KVEventBatch: an array [ts, events, data_parallel_rank] (the rank left out when None, as omit_defaults does)."""
    return msgspec.msgpack.encode([ts, events] + ([] if rank is None else [rank]))


def frames(seq: int, ts: float, events: list[dict], rank: int | None = 0, topic: bytes = b"") -> list[bytes]:
    """One PUB message: topic, 8-byte big-endian sequence number, payload."""
    return [topic, seq.to_bytes(8, "big"), payload(ts, events, rank)]
