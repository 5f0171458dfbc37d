"""vLLM's wire formats built by hand, for tests: KV events (as vllm/distributed/kv_events.py encodes them) and
/metrics texts."""

import msgspec

from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.prometheus import parse_metrics


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


def reading(
    t: float,
    gen: float,
    prompt: float,
    start: float = 1.0,
    running: float = 0.0,
    hits: float = 0.0,
    queries: float = 0.0,
    ttft: tuple[float, float, float] = (0, 0, 0),
    done: float = 0.0,
    prompt_sum: float = 0.0,
    gen_sum: float = 0.0,
) -> m.MetricsSample:
    """A /metrics text like vLLM's with the numbers given (ttft: cumulative counts at le 0.1, 1, +Inf)."""
    a, b, c = ttft
    text = f"""\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0"}} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0"}} 0.25
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{{engine="0"}} {gen}
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{{engine="0"}} {prompt}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{engine="0"}} {hits}
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0"}} {queries}
# TYPE vllm:request_success counter
vllm:request_success_total{{engine="0",finished_reason="stop"}} {done}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1"}} {a}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="1.0"}} {b}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf"}} {c}
vllm:time_to_first_token_seconds_count{{engine="0"}} {c}
vllm:time_to_first_token_seconds_sum{{engine="0"}} 1.0
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{{engine="0",le="+Inf"}} {done}
vllm:request_prompt_tokens_count{{engine="0"}} {done}
vllm:request_prompt_tokens_sum{{engine="0"}} {prompt_sum}
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_bucket{{engine="0",le="+Inf"}} {done}
vllm:request_generation_tokens_count{{engine="0"}} {done}
vllm:request_generation_tokens_sum{{engine="0"}} {gen_sum}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",engine="0",num_gpu_blocks="100",enable_prefix_caching="True"}} 1.0
# TYPE process_start_time_seconds gauge
process_start_time_seconds {start}
"""
    return parse_metrics(text, t)
