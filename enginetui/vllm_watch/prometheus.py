"""vLLM's Prometheus `/metrics` text as samples the dashboard folds, and what histograms can tell.

vLLM labels each series with `model_name` and `engine` (the data-parallel engine index); other
labels (a finish reason, a cache source) are summed within an engine here. The names the
dashboard reads (vllm/v1/metrics/loggers.py, vLLM 0.32) are the constants below.
"""

import math
import re
from dataclasses import dataclass, field

RUNNING = "vllm:num_requests_running"  # gauge: requests in the running queue
WAITING = "vllm:num_requests_waiting"  # gauge: requests in the waiting queue
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"  # gauge per reason: capacity | deferred (they sum to WAITING)
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
ITERATION_TOKENS = "vllm:iteration_tokens_total"  # histogram: tokens scheduled per engine step
REQUEST_PREEMPTIONS = "vllm:request_num_preemptions"  # histogram: preemptions of each finished request
CACHE_CONFIG = "vllm:cache_config_info"  # gauge set to 1, its labels are the cache config
PROCESS_START = "process_start_time_seconds"  # the API server process's start (changes when it restarts)
PROCESS_CPU = "process_cpu_seconds_total"  # the API server process's CPU time
PROCESS_RSS = "process_resident_memory_bytes"  # the API server process's resident memory
SPLIT_LABELS = {WAITING_BY_REASON: "reason"}  # series kept per value of this label (summed over engines)


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram: cumulative counts per upper bound."""

    buckets: tuple[tuple[float, float], ...]  # (upper bound `le`, observations <= it), ascending, last is +Inf
    count: float  # observations
    total: float  # sum of the observed values

    def quantile_bucket(self, q: float) -> tuple[float, float] | None:
        """The bucket (lower, upper] that holds the q-quantile (0-1) observation: all a histogram
        knows of it (the first bucket starts at 0; the last is (largest finite bound, inf)). None
        without observations."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = max(1.0, math.ceil(q * self.count - 1e-9))  # the rank-th smallest observation
        lower = 0.0
        for upper, cumulative in self.buckets:
            if cumulative >= rank:
                return lower, upper
            lower = upper
        return lower, math.inf

    def largest_bound(self) -> float | None:
        """The upper bound of the highest bucket with an observation: no observation is larger
        (inf when some are beyond the last finite bound; None without observations)."""
        below = 0.0
        top = None
        for upper, cumulative in self.buckets:
            if cumulative > below:
                top = upper
            below = cumulative
        return top

    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None

    def since(self, earlier: "Histogram | None") -> "Histogram":
        """The observations made after `earlier` (the whole histogram when the server restarted
        in between: its counts went down)."""
        if (
            earlier is None
            or earlier.count > self.count
            or [b for b, _ in earlier.buckets] != [b for b, _ in self.buckets]
        ):
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
    split: dict[str, dict[str, float]] = field(
        default_factory=dict
    )  # SPLIT_LABELS series -> label value -> sum over engines

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


_SAMPLE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+\S+)?"
)  # name{labels} value [timestamp]
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*,?[ \t]*')  # name="value",
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}  # the escapes of a label value
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def parse_metrics(text: str, time: float) -> MetricsSample:
    """Parse Prometheus text exposition (raises ValueError when it is not). A small parser of its
    own (a line at a time, two regular expressions): the watcher reads /metrics every second, and
    prometheus_client's parser took 17 ms of CPU on vLLM's 630 lines."""
    values: dict[str, dict[str, float]] = {}
    buckets: dict[str, dict[str, dict[float, float]]] = {}  # histogram -> engine -> le -> cumulative count
    counts: dict[str, dict[str, list[float]]] = {}  # histogram -> engine -> [count, sum]
    info: dict[str, dict[str, str]] = {}
    split: dict[str, dict[str, float]] = {}
    histogram_names: set[str] = set()  # families declared `# TYPE NAME histogram`
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE" and parts[3] == "histogram":
                histogram_names.add(parts[2])
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None:
            raise ValueError(f"line {number} is not a Prometheus sample: {line[:80]!r}")
        name, label_text, value_text = match.groups()
        if name.endswith("_created"):
            continue
        labels = _labels(label_text, number) if label_text else {}
        try:
            value = float(value_text)
        except ValueError:
            raise ValueError(f"line {number}: {value_text!r} is not a number") from None
        engine = labels.get("engine", "")
        family, suffix = _histogram_family(name, histogram_names)
        if family is not None:
            per = counts.setdefault(family, {}).setdefault(engine, [0.0, 0.0])
            if suffix == "_bucket":
                le = float(labels["le"])
                by_le = buckets.setdefault(family, {}).setdefault(engine, {})
                by_le[le] = by_le.get(le, 0.0) + value
            elif suffix == "_count":
                per[0] += value
            else:
                per[1] += value
            continue
        if name.endswith("_info") and engine in ("", "0"):
            info[name] = {k: v for k, v in labels.items() if k != "engine"}
        if name in SPLIT_LABELS:
            by_label = split.setdefault(name, {})
            key = labels.get(SPLIT_LABELS[name], "")
            by_label[key] = by_label.get(key, 0.0) + value
        by_engine = values.setdefault(name, {})
        by_engine[engine] = by_engine.get(engine, 0.0) + value
    histograms = {
        name: {
            engine: Histogram(tuple(sorted(buckets.get(name, {}).get(engine, {}).items())), c, t)
            for engine, (c, t) in per.items()
        }
        for name, per in counts.items()
    }
    return MetricsSample(time, values, histograms, info, split)


def _labels(text: str, number: int) -> dict[str, str]:
    labels = {}
    at = 0
    while at < len(text):
        match = _LABEL.match(text, at)
        if match is None:
            raise ValueError(f"line {number}: bad labels {text[at : at + 40]!r}")
        value = match.group(2)
        if "\\" in value:
            value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], value)
        labels[match.group(1)] = value
        at = match.end()
    return labels


def _histogram_family(name: str, histograms: set[str]) -> tuple[str | None, str]:
    """(the histogram family, the suffix) of a histogram's sample; (None, "") for other samples."""
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in histograms:
            return name[: -len(suffix)], suffix
    return None, ""
