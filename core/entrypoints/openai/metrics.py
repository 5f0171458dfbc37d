"""GET /metrics: Prometheus text with vLLM's metric names, labels and histogram buckets.

Two sources, each exact:
- the engine's state, read from a fresh snapshot (a StepEvent) at every scrape: running and
  waiting requests, KV usage, and the engine-lifetime totals of preemptions, generated tokens and
  prefix-cache queries / hits (counters advance by the growth of those totals);
- the request outputs of every request sent through a `MeteredEngine` (the server's routes, and
  the dashboard of `enginetui --serve`): prompt tokens, time to first token, inter-token
  latency, end-to-end latency, from the timings each RequestOutput carries.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from core.engine.events import StepEvent
from core.outputs import RequestOutput

# vLLM 0.32's default buckets (vllm/v1/metrics/buckets.py).
TIME_TO_FIRST_TOKEN_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                               7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
INTER_TOKEN_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                               10.0, 20.0, 40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                           240.0, 480.0, 960.0, 1920.0, 7680.0)
LABELS = ("model_name", "engine")  # vLLM's labels; one engine, index "0"


class ServerMetrics:
    """The server's Prometheus registry and the rules that feed it."""

    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()  # this server's metrics only (not the process-global one)
        labels = {"model_name": model_name, "engine": "0"}

        def make(kind, name: str, doc: str, **kwargs):
            return kind(name, doc, LABELS, registry=self.registry, **kwargs).labels(**labels)

        self.running = make(Gauge, "vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = make(Gauge, "vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = make(Gauge, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.preemptions = make(Counter, "vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = make(Counter, "vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = make(Counter, "vllm:generation_tokens", "Number of generation tokens processed.")
        self.prefix_queries = make(Counter, "vllm:prefix_cache_queries",
                                   "Prefix cache queries, in terms of number of queried tokens.")
        self.prefix_hits = make(Counter, "vllm:prefix_cache_hits",
                                "Prefix cache hits, in terms of number of cached tokens.")
        self.ttft = make(Histogram, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         buckets=TIME_TO_FIRST_TOKEN_BUCKETS)
        self.itl = make(Histogram, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        buckets=INTER_TOKEN_LATENCY_BUCKETS)
        self.e2e = make(Histogram, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                        buckets=REQUEST_LATENCY_BUCKETS)
        # Engine-lifetime totals already counted (counters grow by the difference).
        self._totals = {"preemptions": 0, "generation": 0, "queries": 0, "hits": 0}

    def observe_state(self, event: StepEvent) -> None:
        """Gauges from the engine's current state; counters up to its lifetime totals."""
        self.running.set(len(event.running))
        self.waiting.set(len(event.waiting))
        used = event.num_blocks - event.num_free_blocks
        self.kv_usage.set(used / event.num_blocks if event.num_blocks else 0.0)
        self._grow("preemptions", self.preemptions, event.total_preemptions)
        self._grow("generation", self.generation_tokens, event.total_output_tokens)
        self._grow("queries", self.prefix_queries, event.prefix_cache_queries)
        self._grow("hits", self.prefix_hits, event.prefix_cache_hits)

    def observe_output(self, seen: "RequestSeen", out: RequestOutput) -> None:
        """One streamed output of a request; `seen` is what earlier outputs of it showed."""
        m = out.metrics
        if m.first_token_time is not None and not seen.first_token:
            seen.first_token = True
            self.prompt_tokens.inc(len(out.prompt_token_ids))
            self.ttft.observe(max(0.0, m.first_token_time - m.arrival_time))
        elif m.last_token_time is not None and seen.last_token_time is not None and m.last_token_time > seen.last_token_time:
            self.itl.observe(m.last_token_time - seen.last_token_time)
        seen.last_token_time = m.last_token_time
        if out.finished and m.finished_time is not None:
            self.e2e.observe(max(0.0, m.finished_time - m.arrival_time))

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


class MeteredEngine:
    """An engine (AsyncLLM, or anything with its interface) whose generate() feeds ServerMetrics;
    everything else is the engine's own."""

    def __init__(self, engine, metrics: ServerMetrics) -> None:
        self.engine = engine  # the wrapped engine
        self.metrics = metrics  # where request timings go

    def __getattr__(self, name: str):
        return getattr(self.engine, name)

    async def generate(self, prompt, params, request_id: str, priority: int = 0) -> AsyncIterator[RequestOutput]:
        seen = RequestSeen()
        async for out in self.engine.generate(prompt, params, request_id, priority):
            self.metrics.observe_output(seen, out)
            yield out
