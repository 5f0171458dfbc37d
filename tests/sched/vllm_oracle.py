"""Run request traces through vLLM's own V1 scheduler and write what it did, step by step.

Runs in vLLM's interpreter (not ours): `python vllm_oracle.py TRACES.json RESULTS.json`.
The traces and the per-step record are described in tests/sched/traces.py; this file must not
import anything from this repository. The scheduler is built without a model, as vLLM's own tests
do (tests/v1/core/utils.py): a model config (read from a local HF directory, no weights), a KV
cache config with one full-attention group, and fake model outputs: a request samples its next
trace token whenever its scheduled tokens reach the end of its sequence.
vLLM's pool has one more block than ours (its block 0 is a null placeholder), so its block ids
are written minus one. A trace with `async_scheduling` runs vLLM's AsyncScheduler the way its
EngineCore.step_with_batch_queue does (a batch queue of depth 2; see tests/sched/traces.py).
"""

import json
import sys
from collections import deque

import torch
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

EOS = 1  # traces.EOS
MAX_STEPS = 600  # traces.MAX_STEPS


def build_vllm_config(model_dir: str) -> VllmConfig:
    """One VllmConfig for every trace; run_trace sets each trace's scheduler fields on it."""
    scheduler_config = SchedulerConfig(
        max_num_seqs=16,
        max_num_batched_tokens=256,
        max_model_len=256,
        enable_chunked_prefill=True,
        async_scheduling=False,
        is_encoder_decoder=False,
    )
    model_config = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=256)
    return VllmConfig(scheduler_config=scheduler_config, model_config=model_config, cache_config=CacheConfig())


def make_scheduler(vllm_config: VllmConfig, config: dict, classes: tuple = (Scheduler, AsyncScheduler)) -> Scheduler:
    """`classes`: the (synchronous, asynchronous) scheduler classes to build (vLLM's, or subclasses)."""
    sc = vllm_config.scheduler_config
    sc.max_num_batched_tokens = config["max_num_batched_tokens"]
    sc.max_num_seqs = config["max_num_seqs"]
    sc.policy = config["policy"]
    sc.enable_chunked_prefill = config["enable_chunked_prefill"]
    sc.long_prefill_token_threshold = config["long_prefill_token_threshold"]
    sc.scheduler_reserve_full_isl = config["scheduler_reserve_full_isl"]
    sc.async_scheduling = config["async_scheduling"]
    vllm_config.model_config.max_model_len = config["max_model_len"]
    cache = vllm_config.cache_config
    cache.block_size = config["block_size"]
    cache.enable_prefix_caching = config["enable_prefix_caching"]
    cache.num_gpu_blocks = config["num_blocks"] + 1  # + vLLM's null block
    spec = FullAttentionSpec(block_size=config["block_size"], num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv_config = KVCacheConfig(
        num_blocks=cache.num_gpu_blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)]
    )
    scheduler_class = classes[1] if config["async_scheduling"] else classes[0]
    return scheduler_class(
        vllm_config=vllm_config,
        kv_cache_config=kv_config,
        block_size=config["block_size"],
        structured_output_manager=StructuredOutputManager(vllm_config),
        log_stats=True,
    )


def run_trace(vllm_config: VllmConfig, trace: dict, classes: tuple = (Scheduler, AsyncScheduler)) -> list[dict]:
    config = trace["config"]
    s = make_scheduler(vllm_config, config, classes)
    hasher = get_request_block_hasher(config["block_size"], sha256)
    outputs: dict[str, list[int]] = {}  # request id -> the tokens it samples, in order
    emitted: set[str] = set()  # requests that have produced a token
    stats = [0, 0, 0, 0]
    records = []
    steps = trace["steps"]
    is_async = config["async_scheduling"]
    in_flight: deque = deque()  # (scheduler output, ids of requests it samples), newest first
    step = 0
    while step < MAX_STEPS and (
        step < len(steps) or (s.has_requests() if is_async else s.has_unfinished_requests()) or in_flight
    ):
        record = {"aborted": [], "reset": [], "cached": {}, "finished": [], "sched": [], "preempted": [], "stale": []}
        for action in steps[step] if step < len(steps) else []:
            if action["op"] == "add":
                outputs[action["id"]] = action["outputs"]
                params = SamplingParams(max_tokens=action["max_tokens"], stop_token_ids=action["stop_token_ids"])
                params.update_from_generation_config({}, eos_token_id=EOS)
                s.add_request(
                    Request(
                        action["id"],
                        list(action["prompt"]),
                        params,
                        None,
                        arrival_time=action["arrival"],
                        priority=action["priority"],
                        block_hasher=hasher,
                    )
                )
            elif action["op"] == "abort":
                record["aborted"] += [
                    r.request_id for r in s.finish_requests(action["id"], RequestStatus.FINISHED_ABORTED)
                ]
            else:
                record["reset"].append(s.reset_prefix_cache())
        apply = not is_async
        if not is_async or s.has_requests():  # EngineCore.step_with_batch_queue
            out = s.schedule()
            record["sched"] = [[req_id, n] for req_id, n in out.num_scheduled_tokens.items()]
            record["preempted"] = sorted(out.preempted_req_ids)
            in_flight.appendleft((out, [r for r in out.num_scheduled_tokens if not s.requests[r].is_prefill_chunk]))
            apply = apply or len(in_flight) == 2 or not (out.total_num_scheduled_tokens > 0 or s.has_requests())
        elif in_flight:
            apply = True
        if apply:
            apply_oldest(s, in_flight.pop(), outputs, emitted, stats, record)
        manager = s.kv_cache_manager.coordinator.single_type_managers[0]
        record.update(
            running=[r.request_id for r in s.running],
            waiting=[r.request_id for r in s.waiting]
            + [r.request_id for r in getattr(s, "kv_holding_waiting", ())],  # a queue since 0.32
            computed={r.request_id: r.num_computed_tokens for r in s.requests.values()},
            blocks={
                req_id: [b.block_id - 1 for b in blocks] for req_id, blocks in manager.req_to_blocks.items() if blocks
            },
            free=s.kv_cache_manager.block_pool.get_num_free_blocks(),
            stats=list(stats),
            placeholders={
                r.request_id: r.num_output_placeholders for r in s.requests.values() if r.num_output_placeholders
            },
        )
        record["finished"].sort()
        records.append(record)
        step += 1
    return records


def apply_oldest(s: Scheduler, oldest: tuple, outputs: dict, emitted: set, stats: list, record: dict) -> None:
    """The oldest step in flight returns: each request it samples for (still live) gets its next trace token."""
    out, samplers = oldest
    record["stale"] = sorted(
        r for r in out.num_scheduled_tokens if r in s.requests and s.requests[r].num_stale_output_tokens
    )
    req_ids = list(out.num_scheduled_tokens)
    sampled = []
    for req_id in req_ids:
        request = s.requests.get(req_id)
        token = []
        if req_id in samplers and request is not None:
            tokens = outputs[req_id]
            token = [tokens[request.num_output_tokens] if request.num_output_tokens < len(tokens) else EOS]
        sampled.append(token)
    runner_output = ModelRunnerOutput(
        req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)}, sampled_token_ids=sampled
    )
    for engine_outputs in s.update_from_output(out, runner_output).values():
        if engine_outputs.scheduler_stats is not None:  # this step's prefix-cache lookups
            prefix_stats = engine_outputs.scheduler_stats.prefix_cache_stats
            stats[0] += prefix_stats.queries
            stats[1] += prefix_stats.hits
            stats[2] += prefix_stats.preempted_queries
            stats[3] += prefix_stats.preempted_hits
        for o in engine_outputs.outputs:
            if o.finish_reason is not None:
                record["finished"].append([o.request_id, str(o.finish_reason)])
            if o.new_token_ids and o.request_id not in emitted:
                emitted.add(o.request_id)
                record["cached"][o.request_id] = o.prefill_stats.num_cached_tokens


def main() -> None:
    traces_path, results_path, model_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(traces_path) as f:
        traces = json.load(f)
    init_none_hash(sha256)
    vllm_config = build_vllm_config(model_dir)
    results = [run_trace(vllm_config, trace) for trace in traces]
    with open(results_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
