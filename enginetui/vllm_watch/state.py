"""WatchState: everything the vLLM dashboard shows, folded from /metrics samples, KV event
batches and the streamed completions of the prompts typed here.

Pure Python (no Textual, no sockets): the folding rules are unit-tested directly, and the app
redraws from this state at a bounded rate.
"""

from collections import deque
from dataclasses import dataclass, field

from enginetui.state import RequestView
from enginetui.vllm_watch import metrics as m
from enginetui.vllm_watch.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch, short_hash
from enginetui.vllm_watch.metrics import Histogram, MetricsSample
from enginetui.vllm_watch.prefix_tree import PrefixCaches

HISTORY_POINTS = 240  # sparkline points kept (one per /metrics reading)
LOG_LINES = 500  # event-log lines kept
WINDOW_S = 60.0  # the recent window of rates and latency percentiles
LATENCIES = ((m.TTFT, "TTFT"), (m.ITL, "ITL"), (m.E2E, "e2e"), (m.QUEUE_TIME, "queue"))  # histogram, label
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server says about itself (/v1/models and the cache config on /metrics)."""

    model: str  # the served model name (what requests send as "model")
    root: str  # the model's path or hub id (where its tokenizer may be found locally)
    max_model_len: int | None  # longest sequence it serves


@dataclass(frozen=True, slots=True)
class WatchLine:
    """One line of the event log."""

    time: float  # when it happened (vLLM's clock for KV events, ours otherwise)
    kind: str  # store | evict | clear | replay | gap | link | restart | send | finish | error
    text: str  # what happened, after the kind word


@dataclass(slots=True)
class WatchHistory:
    """Sparkline series, one point per /metrics reading."""

    gen_tok_s: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # generated tokens/s
    prompt_tok_s: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # prompt tokens/s
    kv_pct: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # KV blocks in use, % (engines' mean)
    running: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # running requests
    waiting: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # waiting requests
    preempt_s: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # preemptions/s
    hit_pct: deque[float | None] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # prefix hits % since the last reading (None: no lookups)
    latency_p50: dict[str, deque[float | None]] = field(default_factory=dict)  # label -> median over WINDOW_S (None: no observations)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """One latency histogram read out."""

    label: str  # TTFT | ITL | e2e | queue
    window: tuple[float | None, ...]  # QUANTILES over the last WINDOW_S (None: no observations)
    window_count: int  # observations in the window
    lifetime: tuple[float | None, ...]  # QUANTILES since the server started
    count: int  # observations since the server started


@dataclass(slots=True)
class WatchState:
    """The vLLM dashboard's model."""

    url: str  # the server watched
    kv_endpoint: str | None  # where its KV events are published (None: not listened to)
    server: ServerInfo | None = None  # from /v1/models, once it answered
    link: str = "connecting"  # the HTTP side: connecting | up | down
    link_error: str = ""  # why it is down
    model_error: str = ""  # why /v1/models did not answer (the model is unknown until it does)
    kv_link: str = "off"  # the KV events: off | connecting | up | silent | down
    kv_error: str = ""  # why they are silent or down, in words
    latest: MetricsSample | None = None  # the last /metrics reading
    window: deque[MetricsSample] = field(default_factory=deque)  # readings of the last WINDOW_S, oldest first
    history: WatchHistory = field(default_factory=WatchHistory)
    caches: PrefixCaches = field(default_factory=PrefixCaches)  # the prefix cache of each rank
    requests: dict[str, RequestView] = field(default_factory=dict)  # prompts typed here, in order sent
    log: deque[WatchLine] = field(default_factory=lambda: deque(maxlen=LOG_LINES))  # event log, oldest first
    restarts: int = 0  # server restarts seen
    missed_batches: int = 0  # KV event batches lost for good (not in the replay buffer)
    tokens_at_attach: float | None = None  # prompt + generated tokens when first read (KV-event silence check)
    version: int = 0  # bumped on every change; the view redraws when it moves

    # ---- /metrics ------------------------------------------------------------------------

    def apply_metrics(self, sample: MetricsSample) -> None:
        """Fold one /metrics reading: rates against the previous one, series, the recent window."""
        prev = self.latest
        if prev is not None and _restarted(prev, sample):
            self.server_restarted(sample.time, "its counters started over")
            prev = None
        if self.link != "up":
            self.note(sample.time, "link", f"/metrics answers at {self.url}")
        self.link, self.link_error = "up", ""
        if self.tokens_at_attach is None:
            self.tokens_at_attach = _tokens(sample)
        h = self.history
        if prev is not None and sample.time > prev.time:
            span = sample.time - prev.time
            h.gen_tok_s.append(_delta(prev, sample, m.GENERATION_TOKENS) / span)
            h.prompt_tok_s.append(_delta(prev, sample, m.PROMPT_TOKENS) / span)
            h.preempt_s.append(_delta(prev, sample, m.PREEMPTIONS) / span)
            queries = _delta(prev, sample, m.PREFIX_QUERIES)
            h.hit_pct.append(100 * _delta(prev, sample, m.PREFIX_HITS) / queries if queries else None)
        kv = sample.per_engine(m.KV_USAGE)
        h.kv_pct.append(100 * sum(kv.values()) / len(kv) if kv else 0.0)
        h.running.append(sample.total(m.RUNNING) or 0.0)
        h.waiting.append(sample.total(m.WAITING) or 0.0)
        self.window.append(sample)
        while self.window and sample.time - self.window[0].time > WINDOW_S:
            self.window.popleft()
        self.latest = sample
        for name, label in LATENCIES:
            p50 = self.percentiles(name, label).window[0]
            h.latency_p50.setdefault(label, deque(maxlen=HISTORY_POINTS)).append(p50)
        self.version += 1

    def metrics_failed(self, when: float, reason: str) -> None:
        """A /metrics reading failed (the server is down, restarting, or not there)."""
        if self.link != "down" or self.link_error != reason:
            self.note(when, "link", f"/metrics: {reason}")
        self.link, self.link_error = "down", reason
        self.version += 1

    def server_restarted(self, when: float, why: str) -> None:
        """The server started again: its prefix cache starts empty, its counters at zero."""
        self.restarts += 1
        for rank in self.caches.ranks:
            self.caches.start_over(rank)
        self.window.clear()
        self.latest = None
        self.tokens_at_attach = None
        self.note(when, "restart", f"the server restarted ({why}): its prefix cache starts empty")

    def set_server(self, info: ServerInfo) -> None:
        self.server, self.model_error = info, ""
        self.version += 1

    def models_failed(self, when: float, reason: str) -> None:
        """/v1/models did not answer (a wrong API key, not a vLLM server)."""
        if reason != self.model_error:
            self.note(when, "link", f"/v1/models: {reason}")
        self.model_error = reason
        self.version += 1

    # ---- derived readings ----------------------------------------------------------------

    def percentiles(self, name: str, label: str) -> Percentiles:
        """A latency histogram's percentiles over the window and since the server started."""
        now = self.latest.histogram(name) if self.latest else None
        if now is None:
            empty = tuple(None for _ in QUANTILES)
            return Percentiles(label, empty, 0, empty, 0)
        start = self.window[0].histogram(name) if len(self.window) > 1 else None
        recent: Histogram = now.since(start) if start is not None else now
        return Percentiles(label, tuple(recent.quantile(q) for q in QUANTILES), int(recent.count),
                           tuple(now.quantile(q) for q in QUANTILES), int(now.count))

    def hit_rate(self, recent: bool) -> float | None:
        """Prefix-cache hits / lookups (tokens), over the window or since the server started."""
        if self.latest is None:
            return None
        start = self.window[0] if recent and len(self.window) > 1 else None
        queries = _delta(start, self.latest, m.PREFIX_QUERIES)
        return _delta(start, self.latest, m.PREFIX_HITS) / queries if queries else None

    def config(self, key: str) -> str | None:
        """A field of vLLM's cache config (vllm:cache_config_info labels), e.g. block_size."""
        info = self.latest.info.get(m.CACHE_CONFIG, {}) if self.latest else {}
        value = info.get(key)
        return None if value in (None, "None") else value

    def kv_events_missing(self) -> bool:
        """True when vLLM has served enough tokens since we attached to fill a block, yet no KV
        event batch arrived: it publishes none where we listen."""
        block = self.config("block_size")
        if self.kv_endpoint is None or self.latest is None or self.tokens_at_attach is None or not block:
            return False
        if any(c.num_batches for c in self.caches.ranks.values()):
            return False
        done = self.latest.histogram(m.REQUEST_PROMPT_TOKENS)
        outs = self.latest.histogram(m.REQUEST_GENERATION_TOKENS)
        if done is None or outs is None or done.count <= 0:
            return False
        # Some finished request had at least the mean length; a full block of it was cached.
        mean_tokens = (done.total + outs.total) / done.count
        return _tokens(self.latest) > self.tokens_at_attach and mean_tokens >= int(block)

    # ---- KV events -----------------------------------------------------------------------

    def apply_batch(self, batch: KVEventBatch, replayed: bool = False) -> None:
        """Fold one KV event batch into its rank's tree and log what it did."""
        cache = self.caches.apply(batch)
        rank = f"rank {batch.data_parallel_rank} · " if len(self.caches.ranks) > 1 else ""
        via = " (replayed)" if replayed else ""
        for event in batch.events:
            if isinstance(event, BlockStored):
                first = cache.blocks.get((event.medium, event.group_idx, event.block_hashes[0]))
                text = f" {first.text!r}" if first is not None and first.text is not None else ""
                chain = short_hash(event.block_hashes[0])
                self.note(batch.ts, "store", f"{rank}{len(event.block_hashes)} block(s) from {chain}{text}{via}")
            elif isinstance(event, BlockRemoved):
                hashes = " ".join(short_hash(h) for h in event.block_hashes)
                self.note(batch.ts, "evict", f"{rank}{hashes}{via}")
            elif isinstance(event, AllBlocksCleared):
                self.note(batch.ts, "clear", f"{rank}the prefix cache was reset{via}")
        if batch.num_unknown:
            self.note(batch.ts, "gap", f"{rank}{batch.num_unknown} event(s) of an unknown type skipped")
        if self.kv_link != "up":
            self.kv_link, self.kv_error = "up", ""
        self.version += 1

    def kv_status(self, when: float, status: str, message: str) -> None:
        """The KV event link changed: connecting | up | silent | down, and why. Silent (vLLM caches
        blocks but publishes none here) stays until a batch arrives."""
        if self.kv_link == "silent" and status == "connecting":
            return
        if (status, message) != (self.kv_link, self.kv_error):
            self.note(when, "link", f"KV events: {message}" if message else f"KV events {status}")
        self.kv_link, self.kv_error = status, message
        self.version += 1

    def batches_missed(self, when: float, rank: int, first: int, last: int) -> None:
        """Batches first..last never arrived and the replay buffer did not have them."""
        self.missed_batches += last - first + 1
        self.note(when, "gap", f"rank {rank}: batches {first}-{last} lost (not in the replay buffer): "
                               "blocks they stored are missing from the tree")

    def publisher_restarted(self, when: float, rank: int) -> None:
        """Rank `rank`'s sequence numbers started over: a new publisher, with an empty cache."""
        self.caches.start_over(rank)
        self.note(when, "restart", f"rank {rank}: KV events start over at a new publisher: tree cleared")
        self.version += 1

    # ---- prompts typed here --------------------------------------------------------------

    def add_request(self, req_id: str, prompt: str, max_tokens: int, when: float) -> RequestView:
        view = self.requests[req_id] = RequestView(req_id=req_id, index=len(self.requests), prompt=prompt,
                                                   max_tokens=max_tokens, arrival_time=when)
        self.note(when, "send", f"{req_id} · {prompt[:60]!r}")
        self.version += 1
        return view

    def apply_chunk(self, req_id: str, text: str, prompt_tokens: int | None, output_tokens: int | None,
                    when: float) -> None:
        """A streamed piece of a completion (vLLM's `usage` counts every chunk)."""
        view = self.requests[req_id]
        if not view.active:
            return
        view.status = "running"
        view.text += text
        view.first_token_time = view.first_token_time or when
        if prompt_tokens is not None:
            view.num_prompt_tokens = prompt_tokens
        view.num_output_tokens = output_tokens if output_tokens is not None else view.num_output_tokens + 1
        view.num_tokens = view.num_prompt_tokens + view.num_output_tokens
        view.num_computed_tokens = view.num_tokens - 1  # vLLM holds KV for all but the last sampled token
        self.version += 1

    def end_request(self, req_id: str, status: str, reason: str, detail: str, when: float) -> None:
        """The completion ended: finished (stop / length), aborted, rejected or error."""
        view = self.requests[req_id]
        if not view.active:
            return
        view.status, view.finish_reason, view.detail, view.finished_time = status, reason, detail, when
        kind = "finish" if status == "finished" else "error"
        self.note(when, kind, f"{req_id} · {reason} · {view.num_output_tokens} tok" + (f" · {detail}" if detail else ""))
        self.version += 1

    def clear_ended(self) -> int:
        ended = [k for k, v in self.requests.items() if not v.active]
        for k in ended:
            del self.requests[k]
        self.version += 1
        return len(ended)

    # ---- log -----------------------------------------------------------------------------

    def note(self, when: float, kind: str, text: str) -> None:
        self.log.append(WatchLine(when, kind, text))
        self.version += 1


def _delta(earlier: MetricsSample | None, later: MetricsSample, name: str) -> float:
    """How much a counter grew between two readings (since the start without an earlier one)."""
    now = later.total(name) or 0.0
    before = (earlier.total(name) or 0.0) if earlier is not None else 0.0
    return max(0.0, now - before)


def _tokens(sample: MetricsSample) -> float:
    return (sample.total(m.PROMPT_TOKENS) or 0.0) + (sample.total(m.GENERATION_TOKENS) or 0.0)


def _restarted(prev: MetricsSample, now: MetricsSample) -> bool:
    """A new server process, or counters that went down."""
    if prev.process_start is not None and now.process_start is not None and now.process_start != prev.process_start:
        return True
    return any((now.total(name) or 0.0) < (prev.total(name) or 0.0)
               for name in (m.PROMPT_TOKENS, m.GENERATION_TOKENS, m.REQUESTS_DONE))
