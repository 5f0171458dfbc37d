"""The KV event decoder: vLLM's wire format, as built by hand and as recorded from a real server."""

import base64
import json

import pytest

from enginetui.vllm_watch.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEventDecodeError,
    decode_batch,
    decode_frames,
    rank_endpoint,
    short_hash,
)
from tests.fakes.vllm_recorded import FIXTURE
from tests.fakes.vllm_wire import cleared, frames, payload, removed, stored


def test_a_batch_of_each_event_type_decodes_field_for_field():
    h1, h2 = b"\x01" * 32, b"\x02" * 32
    batch = decode_frames(
        frames(
            7,
            12.5,
            [stored([h1, h2], None, range(8), 4, group_idx=0, extra_keys=None), removed([h1]), cleared()],
            rank=3,
        )
    )
    assert (batch.seq, batch.ts, batch.data_parallel_rank, batch.num_unknown) == (7, 12.5, 3, 0)
    s, r, c = batch.events
    assert isinstance(s, BlockStored) and s.block_hashes == [h1, h2] and s.parent_block_hash is None
    assert s.token_ids == list(range(8)) and s.block_size == 4 and s.medium == "GPU" and s.group_idx == 0
    assert isinstance(r, BlockRemoved) and r.block_hashes == [h1]
    assert isinstance(c, AllBlocksCleared)


def test_int_hashes_a_missing_rank_and_unknown_event_types():
    batch = decode_batch(
        0, payload(1.0, [stored([2**63 + 5], 17, [1, 2], 2), {"type": "BlockMoved", "x": 1}], rank=None), default_rank=2
    )
    assert batch.data_parallel_rank == 2  # the rank of the endpoint it came from
    assert batch.events[0].block_hashes == [2**63 + 5] and batch.events[0].parent_block_hash == 17
    assert batch.num_unknown == 1  # skipped, not fatal
    assert short_hash(2**63 + 5) == "800000" and short_hash(b"\xab\xcd\xef\x01") == "abcdef"


def test_garbage_is_a_clear_error():
    with pytest.raises(KVEventDecodeError, match="not a vLLM KV event batch"):
        decode_batch(0, b"\x93\x01\x02")
    with pytest.raises(KVEventDecodeError, match="3 frames"):
        decode_frames([b"", b"\x00"])


def test_rank_endpoints_follow_vllms_port_offset():
    assert rank_endpoint("tcp://*:5557", 0) == "tcp://*:5557"
    assert rank_endpoint("tcp://10.0.0.2:5557", 2) == "tcp://10.0.0.2:5559"
    assert rank_endpoint("tcp://host:0", 1) == "tcp://host:0"
    assert rank_endpoint("ipc:///tmp/kv.sock", 0) == "ipc:///tmp/kv.sock"


def test_every_recorded_real_batch_decodes():
    lines = [json.loads(line) for line in (FIXTURE / "kv_frames.jsonl").read_text().splitlines()]
    kinds = set()
    for i, f in enumerate(lines):
        batch = decode_batch(f["seq"], base64.b64decode(f["payload"]))
        assert batch.seq == i and batch.data_parallel_rank == 0 and batch.num_unknown == 0
        for e in batch.events:
            kinds.add(type(e).__name__)
            if isinstance(e, BlockStored):
                assert len(e.token_ids) == len(e.block_hashes) * e.block_size
    assert kinds == {"BlockStored", "BlockRemoved", "AllBlocksCleared"}
