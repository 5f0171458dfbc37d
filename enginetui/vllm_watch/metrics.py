"""vLLM's Prometheus `/metrics` text as samples the dashboard folds, and histogram percentiles.

vLLM labels each series with `model_name` and `engine` (the data-parallel engine index); other
labels (a finish reason, a cache source) are summed within an engine here. The names the
dashboard reads (vllm/v1/metrics/loggers.py, vLLM 0.32) are the constants below.
"""

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

RUNNING = "vllm:num_requests_running"  # gauge: requests in the running queue
WAITING = "vllm:num_requests_waiting"  # gauge: requests in the waiting queue
KV_USAGE = "vllm:kv_cache_usage_perc"  # gauge: fraction (0-1) of KV blocks in use
PREEMPTIONS = "vllm:num_preemptions_total"  # counter
PROMPT_TOKENS = "vllm:prompt_tokens_total"  # counter: prompt tokens prefilled (cached ones included)
GENERATION_TOKENS = "vllm:generation_tokens_total"  # counter: tokens generated
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"  # counter: prompt tokens looked up in the prefix cache
PREFIX_HITS = "vllm:prefix_cache_hits_total"  # counter: of those, tokens found cached
REQUESTS_DONE = "vllm:request_success_total"  # counter: finished requests (every finish reason)
TTFT = "vllm:time_to_first_token_seconds"  # histogram
ITL = "vllm:inter_token_latency_seconds"  # histogram
E2E = "vllm:e2e_request_latency_seconds"  # histogram
QUEUE_TIME = "vllm:request_queue_time_seconds"  # histogram: time in the waiting queue
REQUEST_PROMPT_TOKENS = "vllm:request_prompt_tokens"  # histogram: prompt length of finished requests
REQUEST_GENERATION_TOKENS = "vllm:request_generation_tokens"  # histogram: output length of finished requests
CACHE_CONFIG = "vllm:cache_config_info"  # gauge set to 1, its labels are the cache config
PROCESS_START = "process_start_time_seconds"  # the API server process's start (changes when it restarts)
PROCESS_CPU = "process_cpu_seconds_total"  # the API server process's CPU time
PROCESS_RSS = "process_resident_memory_bytes"  # the API server process's resident memory


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram: cumulative counts per upper bound."""

    buckets: tuple[tuple[float, float], ...]  # (upper bound `le`, observations <= it), ascending, last is +Inf
    count: float  # observations
    total: float  # sum of the observed values

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0-1) as Prometheus' histogram_quantile estimates it: linear within the
        bucket that holds it (the first bucket starts at 0); in the +Inf bucket, the largest finite
        bound. None without observations."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for upper, cumulative in self.buckets:
            if cumulative >= rank and cumulative > 0:
                if math.isinf(upper):
                    return lower
                if cumulative == below:
                    return upper
                return lower + (upper - lower) * (rank - below) / (cumulative - below)
            lower, below = upper, cumulative
        return lower

    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None

    def since(self, earlier: "Histogram | None") -> "Histogram":
        """The observations made after `earlier` (the whole histogram when the server restarted
        in between: its counts went down)."""
        if earlier is None or earlier.count > self.count or [b for b, _ in earlier.buckets] != [b for b, _ in self.buckets]:
            return self
        buckets = tuple((le, c - e) for (le, c), (_, e) in zip(self.buckets, earlier.buckets, strict=True))
        return Histogram(buckets, self.count - earlier.count, self.total - earlier.total)

    def __add__(self, other: "Histogram") -> "Histogram":
        """Two engines' histograms as one (same bounds)."""
        merged = tuple((le, a + b) for (le, a), (_, b) in zip(self.buckets, other.buckets, strict=True))
        return Histogram(merged, self.count + other.count, self.total + other.total)


@dataclass(frozen=True, slots=True)
class MetricsSample:
    """One reading of /metrics."""

    time: float  # when it was read (time.time() here)
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # gauge/counter sample name -> engine -> value
    histograms: dict[str, dict[str, Histogram]] = field(default_factory=dict)  # histogram name -> engine -> histogram
    info: dict[str, dict[str, str]] = field(default_factory=dict)  # info gauge name -> its labels (engine 0's)

    def total(self, name: str) -> float | None:
        """A gauge or counter summed over engines (None: vLLM did not report it)."""
        per = self.values.get(name)
        return sum(per.values()) if per else None

    def per_engine(self, name: str) -> dict[str, float]:
        return dict(self.values.get(name, {}))

    def histogram(self, name: str) -> Histogram | None:
        """A histogram summed over engines."""
        per = list(self.histograms.get(name, {}).values())
        if not per:
            return None
        merged = per[0]
        for h in per[1:]:
            merged = merged + h
        return merged

    @property
    def engines(self) -> list[str]:
        """The engine labels (data-parallel engine indexes), in numeric order."""
        labels = self.values.get(RUNNING, {})
        return sorted(labels, key=lambda e: (not e.isdigit(), int(e) if e.isdigit() else 0, e))

    @property
    def process_start(self) -> float | None:
        return self.total(PROCESS_START)


def parse_metrics(text: str, time: float) -> MetricsSample:
    """Parse Prometheus text exposition (raises ValueError when it is not)."""
    values: dict[str, dict[str, float]] = {}
    buckets: dict[str, dict[str, dict[float, float]]] = {}  # histogram -> engine -> le -> cumulative count
    counts: dict[str, dict[str, list[float]]] = {}  # histogram -> engine -> [count, sum]
    info: dict[str, dict[str, str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            engine = s.labels.get("engine", "")
            if family.type == "histogram":
                per = counts.setdefault(family.name, {}).setdefault(engine, [0.0, 0.0])
                if s.name.endswith("_bucket"):
                    le = float(s.labels["le"])
                    by_le = buckets.setdefault(family.name, {}).setdefault(engine, {})
                    by_le[le] = by_le.get(le, 0.0) + s.value
                elif s.name.endswith("_count"):
                    per[0] += s.value
                elif s.name.endswith("_sum"):
                    per[1] += s.value
                continue
            if s.name.endswith("_info") and engine in ("", "0"):
                info[s.name] = {k: v for k, v in s.labels.items() if k != "engine"}
            by_engine = values.setdefault(s.name, {})
            by_engine[engine] = by_engine.get(engine, 0.0) + s.value
    histograms = {
        name: {engine: Histogram(tuple(sorted(buckets.get(name, {}).get(engine, {}).items())), c, t)
               for engine, (c, t) in per.items()}
        for name, per in counts.items()
    }
    return MetricsSample(time, values, histograms, info)
