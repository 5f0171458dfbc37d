"""`enginetui attach --vllm URL [--probe ADDR]`: the one dashboard on a real vLLM, plus what only a vLLM has.

The engine's panels are EngineTUI's on step events: the probe's (attach.py: exact) or, without a
probe, the outside rebuild's (vllm_watch/rebuild_engine.py: inferred from /metrics and the proxied
streams). Beside them, one column of vLLM's own: vllm_watch's feed reads the server's /metrics (and
its KV events; the proxy passes clients' requests through) into a WatchState, where the rebuild runs.
With the probe, each /metrics reading and the rebuild's state for it are scored against the probe's
state then (oracle.py); without it, the rebuild is scored against /metrics alone.
"""

import asyncio
import time
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import Static
from textual.worker import Worker

from enginetui import keys
from enginetui.core.engine.events import StepEvent
from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.bursts import BURST_MAX_TOKENS, burst_requests
from enginetui.dashboard.prompting_app import MODAL_ACTIONS
from enginetui.dashboard.state import LOG_LINES, LogLine
from enginetui.dashboard.widgets.event_log import EventLog
from enginetui.dashboard.widgets.model_panel import ModelPanel
from enginetui.dashboard.widgets.palette import DIM
from enginetui.dashboard.widgets.process_panel import ProcessPanel
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.plural import count
from enginetui.serve.request_names import RequestNames
from enginetui.settings import SamplingSettings
from enginetui.vllm_probe.attach import ProbeEngine, ProbeWatchTUI
from enginetui.vllm_probe.oracle import ProbeTruth, Scores
from enginetui.vllm_watch import panels, vllm_record
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch import proxy as proxy_server
from enginetui.vllm_watch.feed import POLL_S, SILENCE_CHECK_S, ServerFeed
from enginetui.vllm_watch.rebuild_engine import RebuildEngine
from enginetui.vllm_watch.reconstruct import TOLERANCE
from enginetui.vllm_watch.requests import OWN_PREFIX, own_name_in_vllm
from enginetui.vllm_watch.requests_panel import WatchRequestsTable
from enginetui.vllm_watch.server import ServerError, VllmClient
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from enginetui.vllm_watch.tree_panel import PrefixTreePanel

if TYPE_CHECKING:
    _AppBase = EngineTUI  # type-checked as the dashboard it is mixed into
else:
    _AppBase = object

STEPS_KEPT = 4096  # recent steps' times kept to place vLLM's log lines among the engine's
OWN_LOG = frozenset({"send", "finish"})  # vLLM's log lines the engine's log has already (a request's start, end)
EXACT = "#98c379"  # the probe's figures
REBUILT = "#e5c07b"  # the rebuild's


class OwnNames(RequestNames):
    """The probe's events with vLLM's ids of the prompts sent from this dashboard (cmpl-enginetui-rN-0-…) as the
    dashboard named them (rN), so each is one row; `ours(name)`: the dashboard sent a prompt so named."""

    def __init__(self, ours: Callable[[str], bool]) -> None:
        super().__init__(tag="")
        self.ours = ours

    def local(self, engine_id: str) -> str:
        name = own_name_in_vllm(engine_id)
        return name if name and self.ours(name) else engine_id


class ProbeFeed(ServerFeed):
    """vllm_watch's feed of one server, each /metrics reading (and the rebuild's checks) scored against the probe."""

    def __init__(self, truth: ProbeTruth, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.truth = truth  # the probe's states

    async def read_metrics(self):
        sample = await super().read_metrics()
        if sample is not None:
            self.truth.reading(sample)
        self.truth.score_rebuild(self.state.rebuild)
        return sample


class VllmColumn(_AppBase):
    """Mixed into a dashboard app before its EngineTUI: vLLM's column (/metrics, latency, prefix tree, the proxy's
    requests, the exact or INFERRED panel) beside the engine's panels, drawn from the WatchState `vllm` (and the
    probe's `truth`, None without a probe): live (VllmTUI) or folded from a recording's V frames (replay)."""

    CSS_PATH = [  # type: ignore[assignment]  # Textual takes a list too; EngineTUI names one file
        Path(__file__).parent.parent / "dashboard" / "app.tcss",
        Path(__file__).with_name("with_vllm.tcss"),
    ]
    vllm: WatchState
    truth: ProbeTruth | None
    _vllm_drawn: tuple | None = None  # what the vLLM column shows (redrawn when it changes)

    def compose_beside(self) -> ComposeResult:
        with Vertical(id="vllm"):
            yield Static(id="vllm-status")
            if self.truth is not None:
                yield panels.TextPanel(
                    lambda state, width: oracle_text(self.truth or ProbeTruth(), state, self.state.latest, width),
                    "vLLM · exact (probe) · rebuilt",
                    id="vllm-oracle",
                    classes="panel",
                )
            else:
                yield panels.TextPanel(
                    lambda state, width: inferred_text(state, self.state.latest, width),
                    "vLLM · INFERRED: rebuilt from outside (no probe)",
                    id="vllm-oracle",
                    classes="panel",
                )
            yield panels.TextPanel(
                panels.server_text, "vLLM /metrics · KV pool · rates", id="vllm-metrics", classes="panel"
            )
            yield panels.TextPanel(
                panels.latency_text,
                "vLLM latency (its histograms: a quantile is the bucket that holds it) · last 60 s",
                id="vllm-latency",
                classes="panel",
            )
            yield PrefixTreePanel(id="vllm-tree", classes="panel")
            yield WatchRequestsTable(id="vllm-requests", classes="panel")

    def redraw(self) -> None:
        drawn = self._drawn
        super().redraw()  # the app's EngineTUI's
        if self._drawn != drawn:  # it drew the engine's log and model anew: vLLM's part goes back in
            self._show_log_and_model()
        self._redraw_column()

    def _step_at(self, when: float) -> int:
        """The engine step shown at time `when` (where a line of vLLM's log falls among the engine's)."""
        raise NotImplementedError

    def _show_log_and_model(self) -> None:
        """The event log with vLLM's own lines (KV stores and evictions, resets, links) among the engine's, at
        the step each came in; the Model panel from /v1/models and /metrics where the events carry no model."""
        lines = [LogLine(self._step_at(w.time), w.kind, w.text) for w in self.vllm.log if w.kind not in OWN_LOG]
        if lines:
            merged = sorted([*self.state.log, *lines], key=lambda line: line.step)  # stable: the engine's first
            latest = self.state.latest
            self.query_one(EventLog).show(merged[-LOG_LINES:], latest.total_preemptions if latest else 0)
        if self.engine.info is None and self.vllm.server is not None:
            self.query_one(ModelPanel).show_items(served_model(self.vllm))

    def _redraw_column(self) -> None:
        latest = self.state.latest
        scored = (self.truth.metrics.count, self.truth.rebuild.count) if self.truth else None
        key = (self.vllm.version, scored, latest.seq if latest else None)
        if key == self._vllm_drawn:
            return
        try:
            tree, requests = self.query_one(PrefixTreePanel), self.query_one(WatchRequestsTable)
            status = self.query_one("#vllm-status", Static)
        except NoMatches:  # a last timer tick while the app closes
            return
        self._vllm_drawn = key
        self._show_log_and_model()
        status.update(panels.title_text(self.vllm))
        for panel in self.query(panels.TextPanel):
            panel.show(self.vllm)
        tree.show(self.vllm.caches, panels.tree_context(self.vllm))
        requests.show(list(self.vllm.requests.values()), None, self._proxy_hint())

    def on_requests_table_clicked(self, message: RequestsTable.Clicked) -> None:
        if message.req_id not in self.state.requests:  # a row of the proxy's list: no panel of the probe's has it
            message.prevent_default()

    def _proxy_hint(self) -> str:
        if self.vllm.proxy_url:
            return f"requests through the proxy at {self.vllm.proxy_url}"
        return self.vllm.proxy_error or "requests through a proxy: pass --proxy-port PORT"


class VllmTUI(VllmColumn, ProbeWatchTUI, inherit_bindings=False):
    """The dashboard on a real vLLM (its probe's events, or the rebuild's), with its /metrics, prefix cache,
    proxy and rebuild beside it; prompts typed here go to vLLM (through the proxy when there is one)."""

    AUTO_FOCUS: ClassVar[str | None] = "#prompt"  # typing is typing (enginetui/keys.py)
    BINDINGS = [
        keys.burst_key(
            "send vLLM a burst of synthetic requests (through the proxy when there is one): they ignore EOS and "
            f"generate {BURST_MAX_TOKENS[0]}-{BURST_MAX_TOKENS[1]} tokens each"
        ),
        keys.abort_key("abort the selected request sent from here (closes its stream: vLLM aborts it)"),
        keys.CLEAR,
        Binding(
            "ctrl+r",
            "reset_cache",
            "Reset cache",
            tooltip="reset vLLM's prefix cache (POST /reset_prefix_cache: vLLM serves it with VLLM_SERVER_DEV_MODE=1)",
        ),
        keys.timeline_key(),
        *keys.select_keys(),
        keys.refused_keys(
            "ctrl+p,ctrl+s,pagedown,pageup",
            "pause, step and slow motion: not on a real vLLM (sent prompts, not stepped)",
        ),
        keys.help_key(),
        *keys.quit_keys("stop watching and quit (vLLM keeps serving)"),
    ]
    DRIVING_ACTIONS = frozenset({"burst", "abort", "clear", "reset_cache"})  # apply whatever the engine's phase

    def __init__(
        self,
        engine: ProbeEngine | RebuildEngine,
        url: str,
        *,
        kv_events: str | None,
        kv_replay: str | None = None,
        api_key: str | None = None,
        tokenizer: str | None = None,
        proxy: tuple[str, int] | None = None,
        poll_s: float = POLL_S,
        silence_check_s: float = SILENCE_CHECK_S,
        limits: SchedulerLimits | None = None,
        **kwargs,
    ) -> None:
        super().__init__(engine, **kwargs)
        self.url = url.rstrip("/")  # the server watched
        # what vllm_watch reads of it; without the probe, its rebuild's steps are the engine's events
        self.vllm = WatchState(
            self.url,
            kv_events,
            limits=limits or SchedulerLimits(),
            rebuild_sinks=[engine] if isinstance(engine, RebuildEngine) else [],
        )
        self.truth = ProbeTruth() if isinstance(engine, ProbeEngine) else None  # the probe's states (None: no probe)
        self.client = VllmClient(self.url, api_key)
        feed_args = (
            self.vllm,
            self.client,
            lambda coro: self.run_worker(coro, group="kv", exit_on_error=False),
        )
        recording = engine.recording  # --record FILE: what vLLM adds goes there beside the events
        if recording is not None:
            self.vllm.start_recording(lambda item: recording.write_vllm(vllm_record.encode(item)))
        feed_kwargs = dict(
            kv_events=kv_events,
            kv_replay=kv_replay,
            tokenizer=tokenizer,
            poll_s=poll_s,
            on_tokenizer=self.vllm.keep_tokenizer,
        )
        self.feed = (
            ServerFeed(*feed_args, **feed_kwargs)  # type: ignore[arg-type]
            if self.truth is None
            else ProbeFeed(self.truth, *feed_args, **feed_kwargs)
        )
        self.proxy = proxy  # (host, port) to serve vLLM's API on, passing requests through (None: no proxy)
        self._silence_check_s = silence_check_s  # how often to check that KV events come
        self._steps_seen: list[tuple[float, int]] = []  # (time, step) of the recent steps
        self._sending: dict[str, Worker] = {}  # request id -> the worker streaming a prompt sent from here
        self._names: OwnNames | None = None  # the probe's ids of prompts sent from here -> their rows (None: no probe)
        if isinstance(engine, ProbeEngine):
            engine.watchers.append(self._probe_event)
            self._names = OwnNames(self._sent_here)

    def on_mount(self) -> None:  # Textual runs ProbeWatchTUI's and EngineTUI's on_mount too
        self.query_one(WatchRequestsTable).border_subtitle = "watch only"  # not the engine's keys: vLLM's own clients
        self.set_interval(1 / self._redraw_hz, self._column_tick)
        self.set_interval(self._silence_check_s, self.feed.check_kv_silence)
        self._poll_metrics()
        if self.proxy is not None:
            self._serve_proxy(*self.proxy)
        if self.vllm.kv_endpoint:
            self.feed.follow_rank(0)
        else:
            self.vllm.kv_status(
                time.time(), "off", "not listened to: pass --kv-events ENDPOINT to see the prefix cache"
            )

    def _sent_here(self, name: str) -> bool:
        view = self.state.requests.get(name)
        return view is not None and view.own

    def _follow(self, event: StepEvent) -> None:
        if self._names is not None:
            event = self._names.local_event(event)
        super()._follow(event)
        if event.kind == "step":
            self._steps_seen.append((event.time, event.step))
            if len(self._steps_seen) > 2 * STEPS_KEPT:
                del self._steps_seen[:STEPS_KEPT]

    def _step_at(self, when: float) -> int:
        at = bisect_right(self._steps_seen, when, key=lambda seen: seen[0])
        return self._steps_seen[at - 1][1] if at else self.state.step

    def take_no_input(self) -> None:
        """Prompts typed here go to vLLM: the prompt box stays; vLLM's engine process is not this machine's."""
        self.query_one(ProcessPanel).display = False

    def _empty_hint(self) -> str:
        where = (
            f"to vLLM through the proxy ({self.vllm.proxy_url})" if self.vllm.proxy_url else "to vLLM's /v1/completions"
        )
        return f"{super()._empty_hint()}\n\ntype a prompt, Enter sends it {where} · ^b sends a burst"

    # ---- driving vLLM: prompts, bursts, aborts, its prefix cache ----------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The keys that drive vLLM apply whether or not the engine's panels have a step yet."""
        if action in self.DRIVING_ACTIONS:
            return len(self.screen_stack) == 1 or action in MODAL_ACTIONS
        return super().check_action(action, parameters)

    def action_refused(self) -> None:
        self.notify(
            "pause, step and slow motion: not on a real vLLM (this dashboard sends it prompts; it does not step it)",
            severity="warning",
        )

    def submit(self, prompt: str, settings: SamplingSettings) -> None:
        """Send one prompt to vLLM as rN (through the proxy when it listens, so the rebuild sees it); its text
        streams into the requests panel."""
        server = self.vllm.server
        if server is None:
            self.notify(f"vLLM at {self.url} has not answered /v1/models yet: nothing sent", severity="warning")
            return
        req_id = f"r{next(self._ids)}"
        self.state.add_request(req_id, prompt, settings.max_tokens, time.time())
        shown = self.state.requests.get(self.selected or "")
        if shown is None or not shown.active:  # nothing live selected: follow the new request
            self.selected = req_id
        self._sending[req_id] = self._send(req_id, server.model, prompt, settings)
        self.feed.wake()  # vLLM has work: read /metrics at the busy interval

    @work(group="requests", exit_on_error=False)
    async def _send(self, req_id: str, model: str, prompt: str, settings: SamplingSettings) -> None:
        state = self.state
        try:
            chunks = self.client.complete(
                model, prompt, settings, via=self.vllm.proxy_url, request_id=OWN_PREFIX + req_id
            )
            async for chunk in chunks:
                end = chunk.finish_reason or ""
                state.apply_text(req_id, chunk.text, chunk.prompt_tokens, chunk.output_tokens, time.time(), end)
            state.fail(req_id, "the stream ended without a finish reason")
        except asyncio.CancelledError:
            state.apply_text(req_id, "", None, None, time.time(), "abort")  # its stream closed: vLLM aborts it
            raise
        except ValueError as exc:  # vLLM refused it
            self._refuse(req_id, str(exc))
        except ServerError as exc:
            state.fail(req_id, str(exc))
            self.notify(f"{req_id}: {exc}", severity="error")
        finally:
            self._sending.pop(req_id, None)

    def burst(self, count: int) -> None:
        for prompt, settings in burst_requests(self._rng, self.query_one(PromptBar).settings, count):
            self.submit(prompt, settings)

    def action_abort(self) -> None:
        view = self.state.requests.get(self.selected or "")
        sending = self._sending.get(self.selected or "")
        if view is None:
            self.notify("select a request with ↑↓ first", severity="warning")
        elif sending is not None:
            sending.cancel()
        elif view.active:
            self.notify(f"{view.req_id} was not sent from here: its client aborts it", severity="warning")
        else:
            self.notify(f"{view.req_id} is already {view.status}", severity="warning")

    @work(group="control", exit_on_error=False)
    async def action_reset_cache(self) -> None:
        """POST /reset_prefix_cache; vLLM's AllBlocksCleared KV event then empties the prefix tree."""
        try:
            await self.client.reset_prefix_cache()
        except ServerError as exc:
            self.notify(str(exc), severity="error")
            return
        self.vllm.note(time.time(), "reset", "vLLM reset its prefix cache (asked from here)")
        self.notify("vLLM reset its prefix cache (its AllBlocksCleared KV event comes with its next step)")

    def _probe_event(self, event: StepEvent, arrived: float) -> None:
        assert self.truth is not None  # told by the probe's engine only
        self.truth.event(event, arrived)
        if self.vllm.limits.source == "given" and not self.vllm.limits.max_num_seqs:
            # the rebuild needs vLLM's limits, which /metrics lacks and every probe event carries
            self.vllm.limits = SchedulerLimits(event.max_num_seqs, event.token_budget, "probe")
            self.vllm.version += 1
        if event.running or event.waiting:
            self.feed.wake()  # vLLM works: read /metrics at the busy interval

    def _column_tick(self) -> None:
        """vLLM's column changes without the engine's state (a /metrics reading, a KV batch): its own timer."""
        if self.pacer.may_draw():
            self._redraw_column()

    def about(self) -> list[tuple[str, str]]:
        server = (
            "vLLM server",
            f"{self.url}: its /metrics, KV events ({self.vllm.kv_endpoint or 'not listened to'}) "
            f"and proxy ({self.vllm.proxy_url or 'off: --proxy-port PORT'}) in the right-hand column",
        )
        if self.truth is None:
            return [
                *super().about(),
                server,
                (
                    "inferred",
                    "no probe: the engine's panels show vLLM's scheduler as this engine's scheduler rebuilds it from "
                    "the requests through the proxy, vLLM's /metrics and its KV events, checked against /metrics at "
                    f"every reading (±{TOLERANCE}); vLLM's other clients, token ids, text and block ids are not known "
                    "from outside (--probe ADDR shows them exactly)",
                ),
            ]
        return [
            *super().about(),
            server,
            (
                "exact / rebuilt",
                "exact (probe): from the probe's events; /metrics: vLLM's gauges; rebuilt: the outside "
                f"rebuild from the proxy's requests, each scored against the probe at every /metrics reading (±{TOLERANCE})",
            ),
        ]

    @work(group="metrics", exit_on_error=False)
    async def _poll_metrics(self) -> None:
        await self.feed.poll_metrics()

    @work(group="proxy", exit_on_error=False)
    async def _serve_proxy(self, host: str, port: int) -> None:
        """Serve vLLM's API on host:port, every request passed through and listed (vllm_watch/proxy.py)."""
        await proxy_server.listen_and_serve(self.url, self.vllm, host, port, self.feed.wake)

    @on(events.Unmount)
    async def _close_client(self) -> None:
        await self.client.close()


def served_model(watch: WatchState) -> list[Text]:
    """The Model panel's facts from vLLM's server: its /v1/models card and the pool on /metrics."""
    assert watch.server is not None
    items = [Text(watch.server.model, style="bold")]
    if watch.server.max_model_len:
        items.append(Text(f"context {watch.server.max_model_len:,} tok"))
    blocks, block_size = watch.config("num_gpu_blocks"), watch.config("block_size")
    if blocks and block_size:
        items.append(Text(f"pool {int(blocks) * int(block_size):,} tok"))
    return [*items, Text("from /v1/models and /metrics", style=DIM)]


def oracle_text(truth: ProbeTruth, watch: WatchState, latest: StepEvent | None, width: int) -> Text:
    """The probe's figures (exact), vLLM's /metrics and the rebuild's, each with its agreement with the probe."""
    head = Text("exact (probe): ", style=f"bold {EXACT}")
    exact: list[str | Text] = [head]
    if latest is None:
        head.append("waiting for vLLM's next step", style=DIM)
    else:
        head.append(f"running {len(latest.running)}")
        used = latest.num_blocks - latest.num_free_blocks
        exact += [f"waiting {len(latest.waiting)}", f"KV {used}/{latest.num_blocks} blocks", f"step {latest.step}"]
    rows: list[list[str | Text]] = [exact]
    reading = watch.latest
    if reading is not None:
        kv = reading.per_engine(m.KV_USAGE)
        metrics: list[str | Text] = [
            Text("/metrics: ", style="bold").append(f"running {reading.total(m.RUNNING) or 0:.0f}"),
            f"waiting {reading.total(m.WAITING) or 0:.0f}",
        ]
        if kv:
            metrics.append(f"KV {100 * max(kv.values()):.0f}%")
        if truth.metrics.count:
            metrics.append(_agreement("equal to the probe", truth.metrics))
        rows.append(metrics)
    rows.append(rebuild_row(truth, watch))
    return panels.figure_lines(*rows, width=width)


def inferred_text(watch: WatchState, latest: StepEvent | None, width: int) -> Text:
    """The rebuild's figures (inferred), vLLM's /metrics beside them, and how often the two agreed."""
    head = Text("INFERRED (rebuilt from outside): ", style=f"bold {REBUILT}")
    rows: list[list[str | Text]] = []
    if latest is None:
        rows.append([head.append(_why_no_rebuild(watch), style=DIM)])
    else:
        used = latest.num_blocks - latest.num_free_blocks
        rows.append(
            [
                head.append(f"running {len(latest.running)}"),
                f"waiting {len(latest.waiting)}",
                f"KV {used}/{latest.num_blocks} blocks",
                f"step {latest.step}",
            ]
        )
    text = panels.figure_lines(*rows, width=width)
    if watch.latest is not None:
        text.append("\n").append_text(panels.why_text(watch, watch.latest, width))
    if watch.rebuild is not None and watch.rebuild.checks:
        text.append("\n").append_text(panels.rebuild_text(watch.rebuild, width))
    unseen = "it sees only requests through the proxy: vLLM's other clients are not in it"
    if not watch.proxy_url:
        unseen = "no proxy (--proxy-port PORT): it sees no request"
    note = panels.figure_lines([f"{unseen} · no token ids or text · block ids its own"], width=width)
    note.stylize(DIM)
    return text.append("\n").append_text(note)


def _why_no_rebuild(watch: WatchState) -> str:
    if watch.rebuild is not None:
        return "no step rebuilt yet (a step shows once its tokens went by the proxy)"
    missing = [
        what
        for what, known in (
            ("vLLM's pool (/metrics)", watch.config("num_gpu_blocks")),
            (
                "its limits (--max-num-seqs and --max-num-batched-tokens, or /server_info)",
                watch.limits.max_num_seqs and watch.limits.max_num_batched_tokens,
            ),
            ("max_model_len (/v1/models)", watch.server and watch.server.max_model_len),
        )
        if not known
    ]
    return "not yet: it needs " + ", ".join(missing) if missing else "starting"


def rebuild_row(truth: ProbeTruth, watch: WatchState) -> list[str | Text]:
    """The rebuild's agreement with the probe, or why there is none yet."""
    scores = truth.rebuild
    if scores.count:
        head = Text(
            f"rebuilt, {100 * scores.agreeing / scores.count:.0f}% agreement with the probe over ", style=REBUILT
        )
        row: list[str | Text] = [head.append(count(scores.count, "reading"))]
        shares = [(name, scores.share(name)) for name in ("running", "waiting", "blocks")]
        row.append(
            f"within ±{TOLERANCE}: "
            + ", ".join(
                f"{'KV' if name == 'blocks' else name} {100 * share:.0f}%"
                for name, share in shares
                if share is not None
            )
        )
        last = scores.comparisons[-1]
        row.append(f"now running {last.running:.0f}, waiting {last.waiting:.0f}, KV {last.blocks:.0f} blocks")
    elif watch.rebuild is None:
        row = [
            Text("rebuilt: ", style=REBUILT),
            "not yet: it needs vLLM's pool (/metrics), limits (probe) and max_model_len (/v1/models)",
        ]
    else:
        row = [Text("rebuilt: ", style=REBUILT), "no reading scored yet"]
    if not watch.proxy_url:
        row.append(Text("the rebuild sees only requests through the proxy (--proxy-port PORT)", style=DIM))
    return row


def _agreement(what: str, scores: Scores) -> str:
    return f"{what} on {scores.agreeing}/{count(scores.count, 'reading')} ({100 * scores.agreeing / scores.count:.0f}%)"
