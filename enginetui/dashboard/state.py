"""DashboardState: everything the screen shows, folded from step events and streamed outputs.

Pure Python (no Textual), so the folding rules are unit-tested directly. The app folds every
event it receives and redraws from this state at a bounded rate.

Requests this dashboard sent get their text from their own output streams. Any other request
(sent by an HTTP client of a server, or another dashboard) gets its prompt and text from the
events' token ids, decoded with the engine's tokenizer when the state has it.
"""

from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from enginetui.core.engine.detokenizer import IncrementalDetokenizer
from enginetui.core.engine.events import RequestAdded, RequestEnd, RequestProgress, StepEvent
from enginetui.core.outputs import RequestOutput
from enginetui.dashboard.timeline import Timeline
from enginetui.plural import count

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

LOG_LINES = 500  # event-log lines kept
HISTORY_POINTS = 240  # sparkline samples kept
ACTIVE = frozenset({"sent", "waiting", "running", "preempted"})  # status words of live requests
# RequestEnd.reason / finish_reason -> status word
_END_STATUS = {"stop": "finished", "length": "finished", "abort": "aborted", "error": "error", "rejected": "rejected"}
# status word of an ended request -> log kind
_END_KIND = {"finished": "finish", "aborted": "abort", "error": "error", "rejected": "reject"}


@dataclass(slots=True)
class RequestView:
    """One request as the dashboard knows it."""

    req_id: str  # client-visible request id
    index: int  # order of first sight (stable colour in the pool grid)
    prompt: str = ""  # prompt text as submitted
    # sent (by us; not listed by the engine yet) | waiting | running | preempted | finished | rejected | aborted | error
    status: str = "waiting"
    num_prompt_tokens: int = 0  # prompt length in tokens
    num_computed_tokens: int = 0  # tokens whose KV is in the cache
    num_tokens: int = 0  # prompt + generated tokens
    num_output_tokens: int = 0  # generated tokens
    max_tokens: int = 0  # generation limit
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    num_preemptions: int = 0  # times preempted so far
    lost_tokens: int = 0  # computed tokens dropped by the latest preemption
    block_ids: list[int] = field(default_factory=list)  # block table: logical i -> physical block_ids[i]
    text: str = ""  # generated text so far ("…" first when the start was never seen)
    own: bool = False  # sent by this dashboard: its text comes from its output stream, not from events
    finish_reason: str | None = None  # stop | length | abort | error | rejected, once ended
    detail: str = ""  # why it ended or was refused, in words
    arrival_time: float | None = None  # engine received it (time.time())
    first_scheduled_time: float | None = None  # first scheduled
    first_token_time: float | None = None  # first token generated
    finished_time: float | None = None  # left the engine

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def queue_time(self) -> float | None:
        """Seconds between arrival and first scheduling."""
        return _span(self.arrival_time, self.first_scheduled_time)

    def ttft(self) -> float | None:
        """Seconds between arrival and the first token."""
        return _span(self.arrival_time, self.first_token_time)

    def tokens_per_s(self, now: float | None) -> float | None:
        """Decode rate after the first token, up to the finish (or `now` while running)."""
        end = self.finished_time if self.finished_time is not None else now
        span = _span(self.first_token_time, end)
        if span is None or span <= 0 or self.num_output_tokens < 2:
            return None
        return (self.num_output_tokens - 1) / span


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of the event log."""

    step: int  # engine step it happened in (the latest step for client-side events)
    kind: str  # admit | chunk | preempt | finish | abort | error | reject
    text: str  # what happened, after the kind word


@dataclass(slots=True)
class History:
    """Sparkline series, one point per sampling interval of engine time, idle intervals included."""

    tok_s: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # generated tokens/s
    kv_pct: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # KV pool usage %
    running: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # running requests
    waiting: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # waiting requests


@dataclass(slots=True)
class DashboardState:
    """The dashboard's model: fold `StepEvent`s and `RequestOutput`s in, read widgets' data out."""

    history_interval: float = 0.5  # seconds of engine time between sparkline samples
    latest: StepEvent | None = None  # last event folded in (None before the first)
    listed: frozenset[str] = frozenset()  # requests in the latest event's queues
    requests: dict[str, RequestView] = field(default_factory=dict)  # every request seen, in order of first sight
    log: deque[LogLine] = field(default_factory=lambda: deque(maxlen=LOG_LINES))  # event log, oldest first
    history: History = field(default_factory=History)  # sparkline series
    dropped_events: int = 0  # step events that never reached us (our queue was full)
    version: int = 0  # bumped on every change; the view redraws when it moves
    sample_time: float | None = None  # engine time at which the current sampling interval began
    sample_tokens: int = 0  # total_output_tokens when it began
    num_seen: int = 0  # requests ever seen (the next one's colour index)
    cleared: set[str] = field(default_factory=set)  # ids cleared from the list: late events about them are ignored
    tokenizer: "PreTrainedTokenizerBase | None" = (
        None  # the engine's tokenizer: decodes others' requests (None: no text for them)
    )
    decoders: dict[str, IncrementalDetokenizer] = field(default_factory=dict)  # others' live requests' text
    timeline: Timeline = field(default_factory=Timeline)  # every recent request's phases, step by step

    # ---- reading -------------------------------------------------------------------------

    @property
    def step(self) -> int:
        return self.latest.step if self.latest else 0

    @property
    def paused(self) -> bool:
        return bool(self.latest and self.latest.paused)

    @property
    def step_interval_ms(self) -> float:
        """The engine's slow-motion pace (0 = full speed)."""
        return self.latest.step_interval_ms if self.latest else 0.0

    @property
    def now(self) -> float | None:
        """Engine time of the latest event: the dashboard's clock for running requests."""
        return self.latest.time if self.latest else None

    def ordered(self) -> list[RequestView]:
        return list(self.requests.values())

    def neighbour(self, req_id: str | None, delta: int) -> str | None:
        """The request `delta` rows from `req_id` (clamped); from no selection, ↓ picks the first, ↑ the last."""
        ids = list(self.requests)
        if not ids:
            return None
        if req_id not in self.requests:
            return ids[0] if delta > 0 else ids[-1]
        return ids[max(0, min(len(ids) - 1, ids.index(req_id) + delta))]

    def clear_ended(self) -> int:
        """Forget every request that has ended (the `c` key); returns how many."""
        ended = [req_id for req_id, view in self.requests.items() if not view.active]
        for req_id in ended:
            del self.requests[req_id]
            self.timeline.lanes.pop(req_id, None)
        self.cleared.update(ended)
        self.version += 1
        return len(ended)

    def new_engine(self) -> None:
        """A new engine replaced one that died (the `r` key): its events count from the start again
        (seq, step), and nothing the old one left is any engine's state. The requests, log and
        sparklines stay."""
        self.latest = None
        self.sample_time = None  # its token count starts from 0: sampling starts again with its first event
        self.listed = frozenset()
        self.decoders.clear()  # the dead engine's live requests will never stream again
        self.timeline = Timeline()  # its steps count from 0 again: the old lanes would not line up
        self.version += 1

    # ---- client side ---------------------------------------------------------------------

    def add_request(self, req_id: str, prompt: str, max_tokens: int, arrival_time: float | None = None) -> None:
        """A request the user just submitted ("sent" until the engine lists it)."""
        view = self._view(req_id)
        view.status = "sent"
        view.prompt = prompt
        view.max_tokens = max_tokens
        view.arrival_time = arrival_time
        view.own = True
        self.version += 1

    def refuse(self, req_id: str, message: str) -> None:
        """The client refused the request before it reached the engine (invalid prompt or params)."""
        self._end(self._view(req_id), "rejected", "rejected", message)
        self.log.append(LogLine(self.step, "reject", f"{req_id} · {message}"))
        self.version += 1

    def fail(self, req_id: str, message: str) -> None:
        """The request's stream broke (engine died)."""
        view = self._view(req_id)
        if view.active:
            self._end(view, "error", "error", message)
            self.log.append(LogLine(self.step, "error", f"{req_id} · {message}"))
            self.version += 1

    def apply_output(self, out: RequestOutput) -> None:
        """Fold one cumulative streamed output."""
        view = self._view(out.request_id)
        completion = out.outputs[0]
        if view.status == "sent":  # its output outran the step event that lists it: it ran
            view.status = "running"
        view.text = completion.text
        view.num_output_tokens = max(view.num_output_tokens, len(completion.token_ids))
        view.num_prompt_tokens = len(out.prompt_token_ids)
        view.arrival_time = out.metrics.arrival_time
        view.first_scheduled_time = out.metrics.first_scheduled_time or view.first_scheduled_time
        view.first_token_time = out.metrics.first_token_time
        view.finished_time = out.metrics.finished_time
        if out.finished and view.active:
            reason = completion.finish_reason or "stop"
            self._end(view, _END_STATUS.get(reason, "finished"), reason, completion.error or view.detail)
        self.version += 1

    def apply_text(
        self, req_id: str, text: str, prompt_tokens: int | None, output_tokens: int | None, now: float, end: str = ""
    ) -> None:
        """Fold one streamed piece of a request of ours on a server that streams text and token counts, not token
        ids (a real vLLM); `end`: its finish reason, on the last piece."""
        view = self._view(req_id)
        if not view.active:
            return
        if view.status == "sent":  # its output outran the step event that lists it: it ran
            view.status = "running"
        if text or output_tokens:
            view.first_token_time = view.first_token_time or now
        view.text += text
        view.num_prompt_tokens = prompt_tokens if prompt_tokens is not None else view.num_prompt_tokens
        view.num_output_tokens = max(view.num_output_tokens, output_tokens or 0)
        if end:
            view.finished_time = now
            self._end(view, _END_STATUS.get(end, "finished"), end, "")
        self.version += 1

    # ---- engine side ---------------------------------------------------------------------

    def apply_event(self, event: StepEvent) -> None:
        """Fold one event (step, update or snapshot): what it says happened, then the state it left."""
        for added in event.added:
            if added.req_id not in self.cleared:
                self._apply_added(added)
        for progress in (*event.running, *event.waiting):
            self._apply_progress(progress)
        for req_id, token_ids in event.new_token_ids.items():
            self._apply_tokens(req_id, token_ids, event.time, event.is_snapshot)
        listed = frozenset(p.req_id for p in (*event.running, *event.waiting))
        for req_id in self.listed - listed:
            if req_id in self.requests:
                self.requests[req_id].block_ids = []  # no longer held by the scheduler: holds no blocks
        self.listed = listed
        for pre in event.preempted:
            if pre.req_id not in self.cleared:
                self._view(pre.req_id).lost_tokens = pre.lost_tokens
        for end in (*event.finished, *event.rejected):
            if end.req_id not in self.cleared:
                self._apply_end(end, event.time)
        self._log_event(event)
        self.timeline.apply(event)
        self.dropped_events += event.num_dropped_events
        self.advance(event.time)  # the intervals that ended before this event, as the events before it left them
        # Events and snapshot replies travel on different sockets: one published before a snapshot
        # was taken can arrive after it. Its news is folded, but the newer state stays the latest.
        latest = self.latest
        stale = latest is not None and (event.seq < latest.seq or (event.seq == latest.seq and not event.is_snapshot))
        if not stale:
            self.latest = event
        if self.sample_time is None:
            self.sample_time, self.sample_tokens = event.time, event.total_output_tokens
        self.version += 1

    def advance(self, now: float) -> None:
        """Close every sampling interval that ended by `now` (engine time) with a sparkline point:
        the tokens generated in it per second, and the KV use and queues the latest event left. An
        interval without events is drawn too, as the idle time it was (0 tok/s). Called with each
        event's time, and by the live dashboard on a clock, so an idle engine's sparklines go idle."""
        latest, start = self.latest, self.sample_time
        if latest is None or start is None:
            return
        closed = int((now - start) / self.history_interval + 1e-9)  # event times are sums of floats
        if closed <= 0:
            return
        h = self.history
        used = latest.num_blocks - latest.num_free_blocks
        kv = 100.0 * used / latest.num_blocks if latest.num_blocks else 0.0
        for i in range(max(0, closed - HISTORY_POINTS), closed):  # a long idle stretch: only what the series keeps
            tokens = latest.total_output_tokens - self.sample_tokens if i == 0 else 0
            h.tok_s.append(tokens / self.history_interval)
            h.kv_pct.append(kv)
            h.running.append(len(latest.running))
            h.waiting.append(len(latest.waiting))
        self.sample_time = start + closed * self.history_interval
        self.sample_tokens = latest.total_output_tokens
        self.version += 1

    def clone(self) -> "DashboardState":
        """An independent copy (replay keeps these as checkpoints to step back from)."""
        h = self.history
        return DashboardState(
            history_interval=self.history_interval,
            latest=self.latest,
            listed=self.listed,
            requests={k: replace(v, block_ids=list(v.block_ids)) for k, v in self.requests.items()},
            log=deque(self.log, maxlen=LOG_LINES),
            history=History(
                *(deque(series, maxlen=HISTORY_POINTS) for series in (h.tok_s, h.kv_pct, h.running, h.waiting))
            ),
            dropped_events=self.dropped_events,
            version=self.version,
            sample_time=self.sample_time,
            sample_tokens=self.sample_tokens,
            num_seen=self.num_seen,
            cleared=set(self.cleared),
            tokenizer=self.tokenizer,
            decoders={k: _clone_decoder(d) for k, d in self.decoders.items()},
            timeline=self.timeline.clone(),
        )

    # ---- internals -----------------------------------------------------------------------

    def _view(self, req_id: str) -> RequestView:
        view = self.requests.get(req_id)
        if view is None:
            view = self.requests[req_id] = RequestView(req_id=req_id, index=self.num_seen)
            self.num_seen += 1
        return view

    def _apply_added(self, added: RequestAdded) -> None:
        """A request reached the engine (sent by this dashboard or by anyone else)."""
        view = self._view(added.req_id)
        if view.status == "sent":  # ours: the engine has it now
            view.status = "waiting"
        if view.active:
            view.num_prompt_tokens = len(added.prompt_token_ids)
            view.num_tokens = max(view.num_tokens, view.num_prompt_tokens)
            view.max_tokens = added.max_tokens
            view.arrival_time = view.arrival_time or added.arrival_time
            if not view.own and self.tokenizer is not None:
                skip = added.sampling_params.skip_special_tokens
                view.prompt = self.tokenizer.decode(added.prompt_token_ids, skip_special_tokens=skip)  # type: ignore[assignment]  # one sequence: a str
                self.decoders[added.req_id] = IncrementalDetokenizer(self.tokenizer, skip)
                view.text = ""  # its text starts over from its first token (a late attach's greeting has them all)

    def _apply_tokens(self, req_id: str, token_ids: list[int], now: float, snapshot: bool) -> None:
        """New tokens of a request another client sent: its text grows (decoded here). `snapshot`:
        they are its output so far, from a late attach's snapshot (so `now` is not when they came)."""
        view = self.requests.get(req_id)
        if view is None or view.own or self.tokenizer is None or req_id in self.cleared:
            return
        decoder = self.decoders.get(req_id)
        # Only a step seen live that brings its first tokens says when its first token came.
        first = decoder is not None and not decoder.token_ids and not snapshot
        if decoder is None:  # running since before this dashboard looked: the start of its text is unknown
            decoder = self.decoders[req_id] = IncrementalDetokenizer(self.tokenizer, skip_special_tokens=True)
            view.text = "…"
        view.text += decoder.add(token_ids)
        if first:
            view.first_token_time = view.first_token_time or now

    def _apply_progress(self, p: RequestProgress) -> None:
        if p.req_id in self.cleared:
            return  # a stale listing of a request the user cleared
        view = self._view(p.req_id)
        if not view.active:
            return  # a stale listing after the stream already ended it
        view.status = p.status
        view.num_prompt_tokens = p.num_prompt_tokens
        view.num_computed_tokens = p.num_computed_tokens
        view.num_tokens = p.num_tokens
        view.num_output_tokens = p.num_output_tokens
        view.max_tokens = p.max_tokens
        view.num_cached_tokens = p.num_cached_tokens
        view.num_preemptions = p.num_preemptions
        view.block_ids = list(p.block_ids)
        if view.arrival_time is None:
            view.arrival_time = p.arrival_time
        if view.first_scheduled_time is None:
            view.first_scheduled_time = p.first_scheduled_time

    def _apply_end(self, end: RequestEnd, now: float) -> None:
        """The engine's word on how a request ended overrides what the stream said."""
        view = self._view(end.req_id)
        self.decoders.pop(end.req_id, None)
        if not view.own:
            view.finished_time = view.finished_time or now  # no stream of ours says when
        view.num_output_tokens = max(view.num_output_tokens, end.num_output_tokens)
        self._end(view, _END_STATUS.get(end.reason, "finished"), end.reason, end.detail)

    def _end(self, view: RequestView, status: str, reason: str, detail: str) -> None:
        if view.num_tokens:  # the engine listed it; the last listing predates the final token
            view.num_tokens = max(view.num_tokens, view.num_prompt_tokens + view.num_output_tokens)
            if reason in ("stop", "length"):
                view.num_computed_tokens = view.num_tokens - 1  # KV for all but the last sampled token
        view.status = status
        view.finish_reason = reason
        view.detail = detail
        view.block_ids = []

    def _log_event(self, event: StepEvent) -> None:
        """Log lines for what the event says happened: admissions, prefill chunks, preemptions, ends."""
        step, add = event.step, self.log.append
        listed = {r.req_id: r for r in event.running}
        admitted = set()
        for a in event.admitted:
            admitted.add(a.req_id)
            r = listed.get(a.req_id)
            if r is None:  # admitted and ended in the same step
                continue
            if a.resumed:
                sampled = 1 if a.req_id in event.new_token_ids else 0
                what = f"recompute {r.num_tokens - sampled - a.num_cached_tokens} tok"
            else:
                what = f"prompt {r.num_prompt_tokens} tok"
            cached = f" · {a.num_cached_tokens} cached" if a.num_cached_tokens else ""
            chunk = next(
                (f" · chunk {c.num_tokens}" for c in event.chunks if c.req_id == a.req_id and c.num_remaining), ""
            )
            add(LogLine(step, "admit", f"{a.req_id} · {what}{cached}{chunk}"))
        for c in event.chunks:
            if c.req_id not in admitted:
                left = f"{c.num_remaining} tok left" if c.num_remaining else "prefill done"
                add(LogLine(step, "chunk", f"{c.req_id} · +{c.num_tokens} tok · {left}"))
        for pre in event.preempted:
            what = f"{pre.req_id} · lost {pre.lost_tokens} tok · freed {count(pre.freed_blocks, 'block')}"
            add(LogLine(step, "preempt", what))
        for end in event.finished:
            kind = _END_KIND[_END_STATUS.get(end.reason, "finished")]
            reason = f" · {end.reason}" if kind == "finish" else ""
            detail = f" · {end.detail}" if end.detail else ""
            add(LogLine(step, kind, f"{end.req_id}{reason} · {end.num_output_tokens} tok{detail}"))
        for end in event.rejected:
            add(LogLine(step, "reject", f"{end.req_id} · {end.detail}"))


def _clone_decoder(decoder: IncrementalDetokenizer) -> IncrementalDetokenizer:
    copy = IncrementalDetokenizer(decoder.tokenizer, decoder.skip_special_tokens)
    copy.token_ids, copy.text = list(decoder.token_ids), decoder.text
    copy.prefix_offset, copy.read_offset = decoder.prefix_offset, decoder.read_offset
    return copy


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start
