"""WatchState: everything the vLLM dashboard shows, folded from /metrics samples, KV event
batches and the requests through the proxy.

Pure Python (no Textual, no sockets): the folding rules are unit-tested directly, and the app
redraws from this state at a bounded rate.
"""

import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from enginetui.simulate.event_sinks import EventSink
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch, short_hash
from enginetui.vllm_watch.prefix_tree import PrefixCaches
from enginetui.vllm_watch.prometheus import Histogram, MetricsSample
from enginetui.vllm_watch.requests import WatchedRequest
from enginetui.vllm_watch.sched_rebuild import RebuildSetup, SchedRebuild
from enginetui.vllm_watch.vllm_record import (
    KVBatch,
    KVGap,
    Limits,
    Link,
    Metrics,
    ProxyArrived,
    ProxyData,
    ProxyEnded,
    ProxyResponded,
    Server,
    ServerInfo,
    Tokenizer,
    VllmItem,
    Watching,
    recorded_decoder,
)

HISTORY_POINTS = 240  # sparkline points kept (one per /metrics reading)
LOG_LINES = 500  # event-log lines kept
WINDOW_S = 60.0  # the recent window of rates and latency percentiles
LATENCIES = ((m.TTFT, "TTFT"), (m.ITL, "ITL"), (m.E2E, "e2e"), (m.QUEUE_TIME, "queue"))  # histogram, label
QUANTILES = (0.5, 0.9, 0.99)
MAX_REQUESTS = 2000  # requests listed (beyond, the oldest ended ones are dropped)


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
    preempt_s: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # preemptions/s
    latency_mean: dict[str, deque[float | None]] = field(
        default_factory=dict
    )  # label -> mean over WINDOW_S (None: no observations)


@dataclass(frozen=True, slots=True)
class LatencyReading:
    """One latency histogram read out, no finer than its buckets: where each quantile's
    observation lies (a bucket's range) and the exact mean (`_sum / _count`)."""

    label: str  # TTFT | ITL | e2e | queue
    window: tuple[
        tuple[float, float] | None, ...
    ]  # QUANTILES' buckets (lower, upper] over the last WINDOW_S (None: no observations)
    window_count: int  # observations in the window
    window_mean: float | None  # their mean
    window_max: float | None  # no observation in the window was above this bucket bound (inf: beyond the last bound)
    mean: float | None  # the mean since the server started
    count: int  # observations since the server started


@dataclass(frozen=True, slots=True)
class StepReading:
    """Engine steps over the last WINDOW_S, from vllm:iteration_tokens_total."""

    steps: int  # engine steps in the window
    steps_per_s: float | None  # their rate (None: the window has one reading)
    mean_tokens: float | None  # tokens scheduled per step, mean (None: no step)
    max_tokens: float | None  # no step scheduled more than this bucket bound


@dataclass(frozen=True, slots=True)
class SchedulerLimits:
    """vLLM's scheduler limits, as given to the watcher, or read from a dev-mode server's /server_info
    (its /metrics does not publish them)."""

    max_num_seqs: int | None = None  # most requests running at once (vLLM's --max-num-seqs)
    max_num_batched_tokens: int | None = None  # token budget of one step (vLLM's --max-num-batched-tokens)
    source: str = "given"  # where they came from: given (the watcher's flags) | /server_info


@dataclass(slots=True)
class WatchState:
    """The vLLM dashboard's model."""

    url: str  # the server watched
    kv_endpoint: str | None  # where its KV events are published (None: not listened to)
    server: ServerInfo | None = None  # from /v1/models, once it answered
    link: str = "connecting"  # the HTTP side: connecting | up | down
    link_error: str = ""  # why it is down
    down_since: float | None = None  # when /metrics stopped answering (None: it answers, or never did)
    model_error: str = ""  # why /v1/models did not answer (the model is unknown until it does)
    tokenizer_note: str = ""  # why cached blocks show token ids, not text ("" : decoded, or not tried yet)
    kv_link: str = "off"  # the KV events: off | connecting | up | silent | down
    kv_error: str = ""  # why they are silent or down, in words
    latest: MetricsSample | None = None  # the last /metrics reading
    window: deque[MetricsSample] = field(default_factory=deque)  # readings of the last WINDOW_S, oldest first
    history: WatchHistory = field(
        default_factory=WatchHistory
    )  # the sparklines' series, the last HISTORY_POINTS readings
    caches: PrefixCaches = field(default_factory=PrefixCaches)  # the prefix cache of each rank
    requests: dict[str, WatchedRequest] = field(default_factory=dict)  # through the proxy, in order of arrival
    requests_seen: int = 0  # requests ever listed (their colour index)
    proxied: int = 0  # requests passed through the proxy
    proxy_url: str | None = None  # where the proxy serves vLLM's API (None: no proxy)
    proxy_error: str = ""  # why the proxy is not serving
    log: deque[WatchLine] = field(default_factory=lambda: deque(maxlen=LOG_LINES))  # event log, oldest first
    limits: SchedulerLimits = field(default_factory=SchedulerLimits)  # vLLM's scheduler limits, where given
    rebuild: SchedRebuild | None = None  # vLLM's scheduler rebuilt with this engine's (None: its config not known yet)
    rebuild_sinks: list[EventSink] = field(default_factory=list)  # where the rebuild's steps go as StepEvents
    rebuild_counts: tuple[int, int] = (0, 0)  # (events, steps) of the rebuilds before this one (a restart's)
    restarts: int = 0  # server restarts seen
    missed_batches: int = 0  # KV event batches lost for good (not in the replay buffer)
    batches_seen: int = 0  # KV event batches received since we attached, across restarts (the endpoint works)
    tokens_at_attach: float | None = None  # prompt + generated tokens when first read (KV-event silence check)
    version: int = 0  # bumped on every change; the view redraws when it moves
    recorder: Callable[[VllmItem], None] | None = None  # told each thing received, to record it (vllm_record.py)

    # ---- /metrics ------------------------------------------------------------------------

    def apply_metrics(self, sample: MetricsSample) -> None:
        """Fold one /metrics reading: rates against the previous one, series, the recent window."""
        if self.recorder is not None:
            self.recorder(Metrics(sample))
        prev = self.latest
        if prev is not None and _restarted(prev, sample):
            self.server_restarted(sample.time, "its counters started over", sample.process_start)
            prev = None
        if self.link != "up":
            self.note(sample.time, "link", f"/metrics answers at {self.url}")
        self.link, self.link_error, self.down_since = "up", "", None
        if self.tokens_at_attach is None:
            self.tokens_at_attach = _tokens(sample)
        h = self.history
        if prev is not None and sample.time > prev.time:
            span = sample.time - prev.time
            h.gen_tok_s.append(_delta(prev, sample, m.GENERATION_TOKENS) / span)
            h.prompt_tok_s.append(_delta(prev, sample, m.PROMPT_TOKENS) / span)
            h.preempt_s.append(_delta(prev, sample, m.PREEMPTIONS) / span)
        self.window.append(sample)
        self._rebuild_step(sample)
        while self.window and sample.time - self.window[0].time > WINDOW_S:
            self.window.popleft()
        self.latest = sample
        for name, label in LATENCIES:
            mean = self.latency(name, label).window_mean
            h.latency_mean.setdefault(label, deque(maxlen=HISTORY_POINTS)).append(mean)
        self.version += 1

    def _rebuild_step(self, sample: MetricsSample) -> None:
        """Start the scheduler rebuild once vLLM's pool and limits are known; hand it the reading."""
        if self.rebuild is None:
            setup = self._rebuild_setup()
            if setup is None:
                return
            self.rebuild = SchedRebuild(setup, sinks=self.rebuild_sinks)
            if self.rebuild.events is not None:  # a new server's rebuild numbers its events on
                self.rebuild.events.seq, self.rebuild.events.step = self.rebuild_counts
            for view in self.requests.values():
                self.rebuild.track(view)
        kv = sample.per_engine(m.KV_USAGE)  # one engine's pool (the rebuild is one scheduler)
        steps = sample.histograms.get(m.ITERATION_TOKENS, {})  # one engine's steps with outputs
        self.rebuild.reading(
            sample.time,
            sample.total(m.RUNNING) or 0.0,
            sample.total(m.WAITING) or 0.0,
            sample.total(m.PREEMPTIONS) or 0.0,
            next(iter(kv.values())) if len(kv) == 1 else None,
            self._cached_blocks(),
            next(iter(steps.values())).count if len(steps) == 1 else None,
        )
        self.rebuild.advance()

    def _cached_blocks(self) -> int | None:
        """The blocks vLLM has cached, by its KV events (None: none heard, or more than one rank)."""
        if len(self.caches.ranks) != 1:
            return None
        cache = next(iter(self.caches.ranks.values()))
        return cache.num_cached if cache.num_batches else None

    def _rebuild_setup(self) -> RebuildSetup | None:
        """vLLM's configuration for the rebuild: its pool (/metrics), its limits (given), its max_model_len
        (/v1/models); None until all are known."""
        limits, blocks, size = self.limits, self.config("num_gpu_blocks"), self.config("block_size")
        if not (
            limits.max_num_seqs
            and limits.max_num_batched_tokens
            and blocks
            and size
            and self.server
            and self.server.max_model_len
        ):
            return None
        # vLLM's block pool keeps one of its blocks as the null block (never handed to a request)
        return RebuildSetup(
            int(blocks) - 1,
            int(size),
            self.config("enable_prefix_caching") == "True",
            limits.max_num_seqs,
            limits.max_num_batched_tokens,
            self.server.max_model_len,
        )

    def metrics_failed(self, when: float, reason: str) -> None:
        """A /metrics reading failed (the server is down, restarting, or not there)."""
        if self.recorder is not None:
            self.recorder(Link(when, "metrics", "down", reason))
        if self.link != "down" or self.link_error != reason:
            self.note(when, "link", f"/metrics: {reason}")
        if self.link != "down" and self.latest is not None:
            self.down_since = when
        self.link, self.link_error = "down", reason
        self.version += 1

    def server_restarted(self, when: float, why: str, started: float | None = None) -> None:
        """The server started again (at `started` on its clock, when known): its prefix cache starts
        empty, its counters at zero. A rank whose batches already came from the new server (the KV
        events can tell the restart before /metrics does) keeps them."""
        self.restarts += 1
        for rank, cache in list(self.caches.ranks.items()):
            if started is None or cache.last_ts is None or cache.last_ts < started:
                self.caches.start_over(rank)
        self.window.clear()
        self.latest = None
        if self.rebuild is not None and self.rebuild.events is not None:
            self.rebuild_counts = (self.rebuild.events.seq, self.rebuild.events.step)
        self.rebuild = None  # a new server: its scheduler starts empty (rebuilt again from the next reading)
        self.tokens_at_attach = 0.0  # the new server counts its tokens from zero
        self.note(when, "restart", f"the server restarted ({why}): its prefix cache starts empty")

    def set_server(self, info: ServerInfo) -> None:
        if self.recorder is not None:
            self.recorder(Server(time.time(), info))
        self.server, self.model_error = info, ""
        self.version += 1

    def tokenizer_loaded(self, when: float, decoded: bool, how: str) -> None:
        """The served model's tokenizer was looked for: found (`decoded`) or not, and how, in words."""
        if self.recorder is not None:
            self.recorder(Link(when, "tokenizer", "decoded" if decoded else "", how))
        self.tokenizer_note = "" if decoded else how
        self.note(when, "link", how)

    def proxy_listening(self, when: float, url: str | None, error: str = "") -> None:
        """The proxy serves vLLM's API at `url`, or cannot (`error`)."""
        if self.recorder is not None:
            self.recorder(Link(when, "proxy", url or "", error))
        self.proxy_url, self.proxy_error = url, error
        self.note(when, "error" if error else "link", error or f"proxy: vLLM's API at {url}, passed to {self.url}")

    def limits_read(self, when: float, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        """The server said its scheduler limits (/server_info): they fill those not given."""
        if self.recorder is not None:
            self.recorder(Limits(when, max_num_seqs, max_num_batched_tokens))
        given = self.limits
        self.limits = SchedulerLimits(
            given.max_num_seqs or max_num_seqs, given.max_num_batched_tokens or max_num_batched_tokens, "/server_info"
        )
        self.note(
            when, "link", f"/server_info: max_num_seqs {max_num_seqs}, max_num_batched_tokens {max_num_batched_tokens}"
        )
        self.version += 1

    def models_failed(self, when: float, reason: str) -> None:
        """/v1/models did not answer (a wrong API key, not a vLLM server)."""
        if self.recorder is not None:
            self.recorder(Link(when, "models", "failed", reason))
        if reason != self.model_error:
            self.note(when, "link", f"/v1/models: {reason}")
        self.model_error = reason
        self.version += 1

    @classmethod
    def from_recorded(cls, items: list[VllmItem], **fields) -> "WatchState":
        """The state after folding a recording's items (its first says the server watched), as it was live."""
        first = items[0] if items and isinstance(items[0], Watching) else Watching(0.0, "", None)
        state = cls(first.url, first.kv_endpoint, **fields)
        for item in items:
            state.apply_recorded(item)
        return state

    def start_recording(self, recorder: Callable[[VllmItem], None]) -> None:
        """From now on tell `recorder` each thing received, first what is watched."""
        self.recorder = recorder
        recorder(Watching(time.time(), self.url, self.kv_endpoint))

    def keep_tokenizer(self, directory: str) -> None:
        """The served model's tokenizer was loaded from `directory`: recorded (its tokenizer.json), so a
        replay decodes the cached blocks with it."""
        path = Path(directory) / "tokenizer.json"
        if self.recorder is not None and path.is_file():
            self.recorder(Tokenizer(time.time(), zlib.compress(path.read_bytes(), 6)))

    def apply_recorded(self, item: VllmItem) -> None:
        """Fold one recorded item (vllm_record.py), as it was folded live (and record it as it is, if recording)."""
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder(item)
        try:
            self._fold(item)
        finally:
            self.recorder = recorder

    def _fold(self, item: VllmItem) -> None:
        match item:
            case Metrics(sample):
                self.apply_metrics(sample)
            case KVBatch(_, batch, replayed):
                self.apply_batch(batch, replayed)
            case Server(_, info):
                self.set_server(info)
            case Tokenizer(_, tokenizer_json):
                self.caches.set_decoder(recorded_decoder(tokenizer_json))
            case Limits(t, seqs, tokens):
                self.limits_read(t, seqs, tokens)
            case KVGap(t, rank, -1, -1):
                self.publisher_restarted(t, rank)
            case KVGap(t, rank, first, last):
                self.batches_missed(t, rank, first, last)
            case ProxyArrived(t, method, path, body, client):
                self.proxy_arrived(method, path, body, client, t)
            case ProxyResponded(t, req_id, status):
                self.proxy_responded(req_id, status, t)
            case ProxyData(t, req_id, data):
                self.proxy_data(req_id, data, t)
            case ProxyEnded(t, req_id, error):
                self.proxy_ended(req_id, error, t)
            case Link(t, "metrics", _, message):
                self.metrics_failed(t, message)
            case Link(t, "models", _, message):
                self.models_failed(t, message)
            case Link(t, "tokenizer", status, message):
                self.tokenizer_loaded(t, status == "decoded", message)
            case Link(t, "proxy", url, message):
                self.proxy_listening(t, url or None, message)
            case Link(t, "kv", status, message):
                self.kv_status(t, status, message)

    # ---- derived readings ----------------------------------------------------------------

    def latency(self, name: str, label: str) -> LatencyReading:
        """A latency histogram over the window and since the server started, as finely as its buckets allow."""
        now = self.latest.histogram(name) if self.latest else None
        if now is None:
            return LatencyReading(label, tuple(None for _ in QUANTILES), 0, None, None, None, 0)
        recent = self._recent(name) or now
        return LatencyReading(
            label,
            tuple(recent.quantile_bucket(q) for q in QUANTILES),
            int(recent.count),
            recent.mean(),
            recent.largest_bound(),
            now.mean(),
            int(now.count),
        )

    def steps(self) -> StepReading | None:
        """Engine steps and their tokens over the window (None: vLLM publishes no iteration_tokens_total)."""
        recent = self._recent(m.ITERATION_TOKENS)
        if recent is None:
            return None
        span = self.window[-1].time - self.window[0].time if len(self.window) > 1 else 0.0
        return StepReading(
            int(recent.count), recent.count / span if span > 0 else None, recent.mean(), recent.largest_bound()
        )

    def waiting_by_reason(self) -> dict[str, float]:
        """The waiting requests per reason (capacity | deferred) in the last reading ({}: not published)."""
        return dict(self.latest.split.get(m.WAITING_BY_REASON, {})) if self.latest else {}

    def _recent(self, name: str) -> Histogram | None:
        """A histogram's observations over the window (since the server started, with one reading)."""
        now = self.latest.histogram(name) if self.latest else None
        if now is None:
            return None
        start = self.window[0].histogram(name) if len(self.window) > 1 else None
        return now.since(start) if start is not None else now

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
        if self.batches_seen:
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
        if self.recorder is not None:
            self.recorder(KVBatch(time.time(), batch, replayed))
        cache = self.caches.apply(batch)
        self.batches_seen += 1
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
        if self.recorder is not None:
            self.recorder(Link(when, "kv", status, message))
        if self.kv_link == "silent" and status == "connecting":
            return
        if (status, message) != (self.kv_link, self.kv_error):
            self.note(when, "link", f"KV events: {message}" if message else f"KV events {status}")
        self.kv_link, self.kv_error = status, message
        self.version += 1

    def batches_missed(self, when: float, rank: int, first: int, last: int) -> None:
        """Batches first..last never arrived and the replay buffer did not have them."""
        if self.recorder is not None:
            self.recorder(KVGap(when, rank, first, last))
        self.missed_batches += last - first + 1
        self.note(
            when,
            "gap",
            f"rank {rank}: batches {first}-{last} lost (not in the replay buffer): "
            "blocks they stored are missing from the tree",
        )

    def publisher_restarted(self, when: float, rank: int) -> None:
        """Rank `rank`'s sequence numbers started over: a new publisher, with an empty cache."""
        if self.recorder is not None:
            self.recorder(KVGap(when, rank, -1, -1))
        self.caches.start_over(rank)
        self.note(when, "restart", f"rank {rank}: KV events start over at a new publisher: tree cleared")
        self.version += 1

    # ---- requests through the proxy --------------------------------------

    def proxy_arrived(self, method: str, path: str, body: bytes, client: str, when: float) -> str:
        """A request came through the proxy (ProxyReport)."""
        if self.recorder is not None:
            self.recorder(ProxyArrived(when, method, path, body, client))
        route = path.split("?", 1)[0]
        view = WatchedRequest(
            req_id="",
            index=self._next_index(),
            source=client,
            method=method,
            route=route,
            arrival=when,
            prompt=f"{method} {path}",
        )
        view.read_body(body)
        self.proxied += 1
        req_id = view.own_name if view.own_name and view.own_name not in self.requests else f"p{self.proxied}"
        view.req_id = req_id  # a dashboard's own prompt keeps its name there (rN), so its rebuilt steps are its
        self._add(view)
        if view.generates:
            self.note(when, "send", f"{req_id} from {client} · {route} · {view.prompt[:50]!r}")
        return req_id

    def proxy_responded(self, req_id: str, status: int, when: float) -> None:
        if self.recorder is not None:
            self.recorder(ProxyResponded(when, req_id, status))
        view = self.requests.get(req_id)
        if view is not None:
            view.respond(status, when)
            self.version += 1

    def proxy_data(self, req_id: str, data: bytes, when: float) -> None:
        if self.recorder is not None:
            self.recorder(ProxyData(when, req_id, data))
        view = self.requests.get(req_id)
        if view is not None and view.active:
            view.read(data, when)
            self.version += 1

    def proxy_ended(self, req_id: str, error: str, when: float) -> None:
        if self.recorder is not None:
            self.recorder(ProxyEnded(when, req_id, error))
        view = self.requests.get(req_id)
        if view is not None and view.active:
            view.end(when, error)
            self._ended(view)

    def _next_index(self) -> int:
        self.requests_seen += 1
        return self.requests_seen - 1

    def _add(self, view: WatchedRequest) -> WatchedRequest:
        self.requests[view.req_id] = view
        if self.rebuild is not None:
            self.rebuild.track(view)
        if len(self.requests) > MAX_REQUESTS:  # the oldest ended ones go first
            for old in [k for k, v in self.requests.items() if not v.active][: len(self.requests) - MAX_REQUESTS]:
                del self.requests[old]
        self.version += 1
        return view

    def _ended(self, view: WatchedRequest) -> None:
        if view.generates:
            kind = "finish" if view.status == "finished" else "error"
            what = view.finish_reason or view.status
            self.note(
                view.finished or view.arrival,
                kind,
                f"{view.req_id} · {what} · {view.tokens_text()}" + (f" · {view.detail}" if view.detail else ""),
            )
        self.version += 1

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
    return any(
        (now.total(name) or 0.0) < (prev.total(name) or 0.0)
        for name in (m.PROMPT_TOKENS, m.GENERATION_TOKENS, m.REQUESTS_DONE)
    )
