"""GET /metrics: Prometheus text with vLLM 0.32's metric names, labels and histogram buckets.

Three sources, each exact: the engine's state, from a fresh snapshot at every scrape (queues, KV
usage, lifetime totals of preemptions, generated tokens and prefix-cache queries and hits); the
outputs of every request sent through a `MeteredEngine` (prompt tokens, TTFT, inter-token and
end-to-end latency, queue time, finish reason and token counts); and every message of EngineCore
outputs as AsyncLLM receives it (`observe_engine_outputs`: tokens per step, preemptions per finished
request), not the step events, which would wake the front-end a second time every step. As vLLM's,
the registry is prometheus_client's, so counters and histograms carry `_created` samples.
"""

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import StepEvent
from enginetui.core.outputs import EngineCoreOutputs, RequestOutput

# vLLM 0.32's default buckets (vllm/v1/metrics/buckets.py).
TIME_TO_FIRST_TOKEN_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
INTER_TOKEN_LATENCY_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # vLLM's FinishReason, in its order
WAITING_REASONS = ("capacity", "deferred")  # vLLM's reasons a request waits (this engine defers none)
LABELS = ("model_name", "engine")  # vLLM's labels; one engine, index "0"

# vllm:cache_config_info's labels: vLLM 0.32's CacheConfig fields (all of them, as vLLM sets them),
# with vLLM's defaults for what this engine does not have; cache_config_labels() fills in the rest.
CACHE_CONFIG_DEFAULTS = {
    "_block_size_resolved": "True",
    "block_size": "None",
    "cache_dtype": "auto",
    "cache_hit_alignment_tokens": "None",
    "effective_attention_block_size": "None",
    "enable_mamba_shared_prefix_checkpoint": "False",
    "enable_prefix_caching": "False",
    "gpu_memory_utilization": "None",
    "hash_block_size": "None",
    "is_attention_free": "False",
    "kv_cache_dtype_skip_layers": "[]",
    "kv_cache_layout": "None",
    "kv_cache_max_concurrency": "None",
    "kv_cache_memory_bytes": "None",
    "kv_cache_size_tokens": "None",
    "kv_offloading_backend": "native",
    "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "float32",
    "num_cpu_blocks": "None",
    "num_gpu_blocks": "None",
    "num_gpu_blocks_override": "None",
    "prefix_cache_retention_interval": "0",
    "prefix_caching_hash_algo": "sha256",
    "prefix_match_unit": "None",
    "replayssm_buffer_len": "16",
    "skip_page_size_padded": "None",
    "sliding_window": "None",
    "swa_bounded_replay": "True",
    "use_kda_recoverssm": "False",
    "use_replayssm": "False",
    "user_specified_block_size": "False",
}


def request_tokens_buckets(max_model_len: int) -> list[int]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to max_model_len (build_1_2_5_buckets)."""
    buckets: list[int] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_model_len:
                return buckets
            buckets.append(mantissa * scale)
        scale *= 10


def cache_config_labels(info: EngineInfo, config) -> dict[str, str]:
    """vllm:cache_config_info's labels for this engine (`config`: its EngineConfig, None when not known)."""
    tokens = info.num_blocks * info.block_size
    labels = dict(CACHE_CONFIG_DEFAULTS)
    labels.update(
        {
            "block_size": str(info.block_size),
            "effective_attention_block_size": str(info.block_size),
            "num_gpu_blocks": str(info.num_blocks),
            "kv_cache_size_tokens": str(tokens),
            "kv_cache_memory_bytes": str(tokens * info.kv_bytes_per_token),
            "kv_cache_max_concurrency": str(tokens / info.max_model_len),
        }
    )
    if config is not None:
        labels["enable_prefix_caching"] = str(config.enable_prefix_caching)
        labels["num_gpu_blocks_override"] = str(config.num_gpu_blocks_override)
        labels["user_specified_block_size"] = "True"  # --block-size always has a value here (default 16)
    return labels


class ServerMetrics:
    """The server's Prometheus registry and the rules that feed it."""

    def __init__(self, model_name: str, info: EngineInfo, config=None) -> None:
        """`info`: the served engine's; `config`: its EngineConfig (None: not known; cache labels get defaults)."""
        self.registry = CollectorRegistry()  # this server's metrics only (not the process-global one)
        labels = {"model_name": model_name, "engine": "0"}

        def make(kind, name: str, doc: str, **kwargs):
            return kind(name, doc, LABELS, registry=self.registry, **kwargs).labels(**labels)

        self.running = make(Gauge, "vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = make(Gauge, "vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        by_reason = Gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
            "status). Sum of all reasons equals vllm:num_requests_waiting.",
            (*LABELS, "reason"),
            registry=self.registry,
        )
        self.waiting_by_reason = {reason: by_reason.labels(**labels, reason=reason) for reason in WAITING_REASONS}
        self.kv_usage = make(Gauge, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.preemptions = make(Counter, "vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = make(Counter, "vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = make(Counter, "vllm:generation_tokens", "Number of generation tokens processed.")
        self.prefix_queries = make(
            Counter, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = make(
            Counter, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*LABELS, "finished_reason"),
            registry=self.registry,
        )
        self.success = {reason: success.labels(**labels, finished_reason=reason) for reason in FINISH_REASONS}
        token_buckets = request_tokens_buckets(info.max_model_len)
        self.request_prompt_tokens = make(
            Histogram, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", buckets=token_buckets
        )
        self.request_generation_tokens = make(
            Histogram, "vllm:request_generation_tokens", "Number of generation tokens processed.", buckets=token_buckets
        )
        self.iteration_tokens = make(
            Histogram,
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            buckets=ITERATION_TOKENS_BUCKETS,
        )
        self.ttft = make(
            Histogram,
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            buckets=TIME_TO_FIRST_TOKEN_BUCKETS,
        )
        self.itl = make(
            Histogram,
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            buckets=INTER_TOKEN_LATENCY_BUCKETS,
        )
        self.e2e = make(
            Histogram,
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            buckets=REQUEST_LATENCY_BUCKETS,
        )
        self.queue_time = make(
            Histogram,
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            buckets=REQUEST_LATENCY_BUCKETS,
        )
        self.request_preemptions = make(
            Histogram,
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            buckets=REQUEST_NUM_PREEMPTIONS_BUCKETS,
        )
        cache = cache_config_labels(info, config)
        Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            (*cache, "engine"),
            registry=self.registry,
        ).labels(**cache, engine="0").set(1)
        # Engine-lifetime totals already counted (counters grow by the difference).
        self._totals = {"preemptions": 0, "generation": 0, "queries": 0, "hits": 0}

    def observe_state(self, event: StepEvent) -> None:
        """Gauges from the engine's current state; counters up to its lifetime totals."""
        self.running.set(len(event.running))
        self.waiting.set(len(event.waiting))
        self.waiting_by_reason["capacity"].set(len(event.waiting))
        self.waiting_by_reason["deferred"].set(0)
        used = event.num_blocks - event.num_free_blocks
        self.kv_usage.set(used / event.num_blocks if event.num_blocks else 0.0)
        self._grow("preemptions", self.preemptions, event.total_preemptions)
        self._grow("generation", self.generation_tokens, event.total_output_tokens)
        self._grow("queries", self.prefix_queries, event.prefix_cache_queries)
        self._grow("hits", self.prefix_hits, event.prefix_cache_hits)

    def observe_engine_outputs(self, outputs: EngineCoreOutputs) -> None:
        """One message of EngineCore outputs, every request's (the server's and anyone else's on the
        same engine): the step's tokens, and the preemptions of each request that ended in it."""
        if outputs.num_scheduled_tokens:
            self.iteration_tokens.observe(outputs.num_scheduled_tokens)
        for out in outputs.outputs:
            if out.finish_reason is not None and out.finish_reason != "rejected":
                self.request_preemptions.observe(out.num_preemptions)

    def observe_output(self, seen: "RequestSeen", out: RequestOutput) -> None:
        """One streamed output of a request; `seen` is what earlier outputs of it showed."""
        m = out.metrics
        if m.first_token_time is not None and not seen.first_token:
            seen.first_token = True
            self.prompt_tokens.inc(len(out.prompt_token_ids))
            self.ttft.observe(max(0.0, m.first_token_time - m.arrival_time))
        elif (
            m.last_token_time is not None
            and seen.last_token_time is not None
            and m.last_token_time > seen.last_token_time
        ):
            # Under a stream interval an output carries several tokens: the gap is shared out among them.
            new_tokens = max(1, sum(len(c.token_ids) - seen.tokens.get(c.index, 0) for c in out.outputs))
            for _ in range(new_tokens):
                self.itl.observe((m.last_token_time - seen.last_token_time) / new_tokens)
        seen.last_token_time = m.last_token_time
        seen.tokens.update((c.index, len(c.token_ids)) for c in out.outputs)
        for c in out.outputs:
            if c.finish_reason in self.success and c.index not in seen.finished:
                seen.finished.add(c.index)
                self.success[c.finish_reason].inc()
                self.request_prompt_tokens.observe(len(out.prompt_token_ids))
                self.request_generation_tokens.observe(len(c.token_ids))
        if out.finished and m.finished_time is not None:
            self.e2e.observe(max(0.0, m.finished_time - m.arrival_time))
            if m.queue_time is not None:
                self.queue_time.observe(max(0.0, m.queue_time))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def _grow(self, key: str, counter: Counter, total: int) -> None:
        if total > self._totals[key]:
            counter.inc(total - self._totals[key])
            self._totals[key] = total


@dataclass(slots=True)
class RequestSeen:
    """What the metrics have seen of one request."""

    first_token: bool = False  # its first token was counted
    last_token_time: float | None = None  # when its latest token reached the client
    tokens: dict[int, int] = field(default_factory=dict)  # tokens seen so far, per completion index
    finished: set[int] = field(default_factory=set)  # completions whose end was counted


class MeteredEngine:
    """The server's engine: an engine (AsyncLLM, or anything with its interface) whose generate()
    feeds ServerMetrics and whose open requests are known, so a stopping server can end them;
    everything else is the engine's own."""

    def __init__(self, engine, metrics: ServerMetrics) -> None:
        self.engine = engine  # the wrapped engine
        self.metrics = metrics  # where request timings go
        engine.output_observers.append(metrics.observe_engine_outputs)  # every step's outputs, as they arrive
        self.open: set[str] = set()  # request ids whose generate() has not ended

    def __getattr__(self, name: str):
        return getattr(self.engine, name)

    async def generate(self, prompt, params, request_id: str, priority: int = 0) -> AsyncGenerator[RequestOutput, None]:
        seen = RequestSeen()
        self.open.add(request_id)
        stream = self.engine.generate(prompt, params, request_id, priority)
        try:
            async for out in stream:
                self.metrics.observe_output(seen, out)
                yield out
        finally:
            self.open.discard(request_id)
            await stream.aclose()  # closed early (the client left): the engine's stream aborts the request now

    async def abort_open(self) -> int:
        """Abort every open request (the server is stopping): each answer ends with finish_reason
        "abort", as vLLM's do. Returns how many there were."""
        ids = sorted(self.open)
        for request_id in ids:
            await self.engine.abort(request_id)
        return len(ids)
