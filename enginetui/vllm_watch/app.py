"""The dashboard on a real vLLM server: /metrics polled about once a second, KV events followed
over ZMQ (both by feed.py), prompts streamed through /v1/completions, other clients' requests
through the proxy (proxy.py), the session recorded on request (recording.py).

Network I/O runs in workers that fold what arrives into `WatchState`; a timer redraws the
panels from it at `redraw_hz` at most (as the engine dashboard does).
"""

import asyncio
import itertools
import random
import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Footer, Static

from enginetui import keys
from enginetui.dashboard.bursts import BURST_MAX_TOKENS, burst_requests
from enginetui.dashboard.prompting_app import MODAL_ACTIONS, NARROW, PromptingApp
from enginetui.dashboard.redraw_pacer import RedrawPacer
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.settings import SamplingSettings
from enginetui.vllm_watch import panels
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch import proxy as proxy_server
from enginetui.vllm_watch.feed import ServerFeed
from enginetui.vllm_watch.recording import RecordingWatchState, WatchRecorder
from enginetui.vllm_watch.requests_panel import RequestPanel, WatchRequestsTable
from enginetui.vllm_watch.server import ServerError, VllmClient
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from enginetui.vllm_watch.tree_panel import PrefixTreePanel, TreeContext

POLL_S = 1.0  # /metrics reading interval
SILENCE_CHECK_S = 5.0  # how often to check that KV events come when vLLM caches blocks
KV_HINT = (
    'start vLLM with --kv-events-config \'{"enable_kv_cache_events": true, "publisher": "zmq", '
    '"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558"}\' and pass --kv-events '
    "(vLLM listens on a tcp://*:PORT or ipc:// endpoint; given tcp://HOST:PORT it connects out instead)"
)

# What each panel shows, one line each (the help screen's "panels" rows).
WATCH_PANELS = [
    ("title bar", "the server, its model, whether /metrics and the KV events answer"),
    ("Requests", "the prompts sent from here (and through the proxy, --proxy-port), streamed from vLLM"),
    (
        "Queues",
        "vLLM's running and waiting counts over time and now, per engine; `rebuilt:` the same queues "
        "rebuilt by this engine's scheduler from the requests seen (with vLLM's limits given)",
    ),
    ("Selected request", "the selected request's text, TTFT and tok/s as measured here"),
    ("Over time", "one point per /metrics reading: tokens/s generated and prompted, KV %, preemptions, hits"),
    ("Event log", "KV events, links going up and down, server restarts, your requests"),
    ("prefix cache", "the blocks vLLM caches, as a tree by hash chain (from its KV events)"),
    ("Server", "KV blocks in use, tokens/s, preemptions and prefix-cache hit rate, 60 s and since start"),
    (
        "Latency",
        "p50/p90/p99 of TTFT, inter-token, end-to-end and queue time (vLLM's histograms: its TTFT runs "
        "from the request's arrival in vLLM's front-end; a request's TTFT in the list runs from the "
        "proxy's arrival, or the send here, and a client's own from its send: client's ≥ proxy's ≥ vLLM's)",
    ),
]
EMPTY_REQUESTS = "no prompts yet: just type one\nand press Enter · ^b sends a burst"  # lines fit 80 columns


def tree_context(s: WatchState) -> TreeContext:
    """What the prefix tree panel shows beside the KV events, from the rest of the state."""
    hits = s.latest.per_engine(m.PREFIX_HITS) if s.latest else {}
    stale = ""
    if s.link == "down" and s.down_since is not None and s.caches.ranks:
        since = time.strftime("%H:%M:%S", time.localtime(s.down_since))
        stale = f"vLLM has not answered since {since}: the cache as it was then"
    return TreeContext(
        pool_blocks=s.config("num_gpu_blocks"),
        block_size=s.config("block_size"),
        hit_tokens={int(e): v for e, v in hits.items() if e.isdigit()},
        empty_note=_empty_tree_note(s),
        stale_note=stale,
        tokenizer_note=s.tokenizer_note,
    )


def _empty_tree_note(s: WatchState) -> str:
    if s.kv_link == "off":
        return f"KV events are not listened to: {KV_HINT}"
    if s.link != "up" and s.server is None:
        return f"waiting for vLLM at {s.url} (its KV events: {s.kv_endpoint})"
    if s.kv_error and s.kv_link != "up":
        return f"{s.kv_error}\n{KV_HINT}"
    return f"listening on {s.kv_endpoint}: nothing cached yet (a block is cached once a request has a full block of tokens)"


class VllmWatchApp(PromptingApp, App[None], inherit_bindings=False):
    """Watch one vLLM server: its queues, KV pool, rates, latencies and prefix cache; send it prompts."""

    CSS_PATH = [Path(__file__).parent.parent / "dashboard" / "app.tcss", Path(__file__).with_name("watch.tcss")]
    TITLE = "enginetui · vLLM"
    AUTO_FOCUS: ClassVar[str | None] = "#prompt"  # typing is typing (enginetui/keys.py)
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        keys.burst_key(
            "send a burst of synthetic requests (they ignore EOS, "
            f"{BURST_MAX_TOKENS[0]}-{BURST_MAX_TOKENS[1]} tokens each)"
        ),
        keys.abort_key("abort the selected request (closes its stream: vLLM aborts it)"),
        keys.CLEAR,
        Binding(
            "ctrl+r", "reset_cache", "Reset cache", tooltip="reset vLLM's prefix cache (needs VLLM_SERVER_DEV_MODE=1)"
        ),
        *keys.select_keys(how=""),
        keys.help_key(),
        *keys.quit_keys("quit (the server keeps running)"),
    ]
    # Screen classes by terminal size, as the engine dashboard's (watch.tcss lays each out); its
    # module is not imported: it loads the engine (torch), which a watcher has no use for
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-medium"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(
        self,
        url: str,
        *,
        kv_events: str | None,
        kv_replay: str | None = None,
        api_key: str | None = None,
        tokenizer: str | None = None,
        burst_size: int = 8,
        redraw_hz: float = 10.0,
        max_cpu_share: float = 0.0,
        seed: int = 0,
        poll_s: float = POLL_S,
        silence_check_s: float = SILENCE_CHECK_S,
        limits: SchedulerLimits | None = None,
        proxy: tuple[str, int] | None = None,
        record: str | None = None,
    ) -> None:
        super().__init__()
        self.url = url.rstrip("/")  # the server watched
        self.kv_events = kv_events  # its KV events PUB endpoint, rank 0's (None: don't listen)
        self.kv_replay = kv_replay  # its replay endpoint, rank 0's (None: no catching up)
        self.tokenizer = tokenizer  # where to load the tokenizer from (None: the served model's path)
        self.client = VllmClient(url, api_key)  # the HTTP calls
        self.recorder = WatchRecorder(record, self.url, kv_events) if record else None  # --record FILE
        self.state: WatchState
        if self.recorder is not None:
            self.state = RecordingWatchState(self.url, kv_events, self.recorder, limits=limits or SchedulerLimits())
        else:
            self.state = WatchState(self.url, kv_events, limits=limits or SchedulerLimits())
        self.feed = ServerFeed(
            self.state,
            self.client,
            lambda coro: self.run_worker(coro, group="kv", exit_on_error=False),
            kv_events=kv_events,
            kv_replay=kv_replay,
            tokenizer=tokenizer,
            poll_s=poll_s,
            on_tokenizer=self.recorder.write_tokenizer if self.recorder else None,
        )
        self.proxy = proxy  # (host, port) to serve vLLM's API on, passing requests through (None: no proxy)
        self._burst_size = burst_size  # requests per `b`
        self._redraw_hz = redraw_hz  # most redraws per second
        self.pacer = RedrawPacer(max_cpu_share)  # holds timer redraws back while the app is over its CPU budget
        self._silence_check_s = silence_check_s  # how often to check that KV events come
        self._rng = random.Random(seed)  # burst prompts and lengths
        self._ids = itertools.count(1)  # request id numbers
        self.selected: str | None = None  # the request shown in full
        self._drawn: tuple[int, str | None] | None = None  # (state version, selected) on screen
        self._streams: dict[str, asyncio.Task] = {}  # live request id -> its streaming task

    def compose(self) -> ComposeResult:
        yield Static(id="watch-title")
        with Horizontal(id="watch-main"):
            with Vertical(id="watch-left"):
                yield WatchRequestsTable(id="watch-requests", classes="panel")
                yield panels.TextPanel(panels.queues_text, "Queues · over time", id="watch-queues", classes="panel")
                yield RequestPanel(
                    "your prompts go to vLLM's /v1/completions: just type one, Enter sends it; "
                    "requests through the proxy (--proxy-port) are listed too",
                    id="watch-detail",
                    classes="panel",
                )
                yield panels.TextPanel(
                    panels.series_text, "Over time · one point per /metrics reading", id="watch-series", classes="panel"
                )
                yield panels.LogPanel(id="watch-log", classes="panel")
            with Vertical(id="watch-right"):
                yield PrefixTreePanel(id="watch-tree", classes="panel")
                yield panels.TextPanel(
                    panels.server_text, "Server · KV pool · rates", id="watch-server", classes="panel"
                )
                yield panels.TextPanel(
                    panels.latency_text,
                    "Latency (vLLM histograms: a quantile is the bucket that holds it) · last 60 s",
                    id="watch-latency",
                    classes="panel",
                )
        yield PromptBar(id="prompt-bar")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1 / self._redraw_hz, self._redraw_tick)
        self.set_interval(self._silence_check_s, self._check_kv_silence)
        self._fit_footer(self.size.width)
        self.redraw()
        self._poll_metrics()
        if self.proxy is not None:
            self._serve_proxy(*self.proxy)
        if self.kv_events:
            self._follow_rank(0)
        else:
            self.state.kv_status(
                time.time(), "off", "not listened to: pass --kv-events ENDPOINT to see the prefix cache"
            )

    # ---- keys and drawing ----------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Over the help screen only help and quit apply."""
        return len(self.screen_stack) == 1 or action in MODAL_ACTIONS

    def _draw_key(self) -> tuple[int, str | None]:
        """What a redraw shows: (state version, selected request)."""
        return self.state.version, self.selected

    def redraw(self) -> None:
        key = self._draw_key()
        if key == self._drawn:
            return
        try:
            title = self.query_one("#watch-title", Static)
        except NoMatches:  # a last tick while the app closes
            return
        s = self.state
        if self.selected is None and s.requests:  # the first request to come is shown in full
            self.selected = next(iter(s.requests))
            key = self._draw_key()
        self._drawn = key
        heading = self._title()
        if heading != title.content:
            title.update(heading)
        self.query_one(WatchRequestsTable).show(list(s.requests.values()), self.selected, self._empty_requests())
        self.query_one(RequestPanel).show(s.requests.get(self.selected or ""))
        for panel in self.query(panels.TextPanel):
            panel.show(s)
        self.query_one(PrefixTreePanel).show(s.caches, self._tree_context())

    def _title(self) -> Text:
        return panels.title_text(self.state)

    def _empty_requests(self) -> str:
        """What the requests panel says before the first request."""
        return EMPTY_REQUESTS

    def _tree_context(self) -> TreeContext:
        return tree_context(self.state)

    # ---- /metrics, /v1/models and KV events (feed.py) ------------------------------------

    @work(group="metrics", exit_on_error=False)
    async def _poll_metrics(self) -> None:
        await self.feed.poll_metrics()

    def _check_kv_silence(self) -> None:
        self.feed.check_kv_silence()

    def _follow_rank(self, rank: int) -> None:
        self.feed.follow_rank(rank)

    # ---- the proxy -----------------------------------------------------------------------

    @work(group="proxy", exit_on_error=False)
    async def _serve_proxy(self, host: str, port: int) -> None:
        """Serve vLLM's API on host:port, every request passed through and listed (see proxy.py)."""
        await proxy_server.listen_and_serve(self.url, self.state, host, port, self.feed.wake)

    # ---- prompts -------------------------------------------------------------------------

    def submit(self, prompt: str, settings: SamplingSettings) -> None:
        """Send one prompt to /v1/completions as r1, r2, ...; its text streams into the requests panel."""
        if self.state.server is None:
            self.notify(f"vLLM at {self.url} has not answered yet", severity="warning")
            return
        req_id = f"r{next(self._ids)}"
        self.state.add_request(req_id, prompt, settings.max_tokens, time.time())
        shown = self.state.requests.get(self.selected or "")
        if shown is None or not shown.active:
            self.selected = req_id
        self._streams[req_id] = asyncio.ensure_future(self._stream(req_id, self.state.server.model, prompt, settings))
        self.feed.wake()  # the server has work: read /metrics at the busy interval

    async def _stream(self, req_id: str, model: str, prompt: str, settings: SamplingSettings) -> None:
        state = self.state
        try:
            async for chunk in self.client.complete(model, prompt, settings):
                state.apply_chunk(req_id, chunk.text, chunk.prompt_tokens, chunk.output_tokens, time.time())
                if chunk.finish_reason:
                    state.end_request(req_id, "finished", chunk.finish_reason, "", time.time())
            state.end_request(req_id, "error", "error", "the stream ended without a finish reason", time.time())
        except asyncio.CancelledError:
            state.end_request(req_id, "aborted", "abort", "stream closed here", time.time())
        except ValueError as exc:
            state.end_request(req_id, "rejected", "rejected", str(exc), time.time())
        except ServerError as exc:
            state.end_request(req_id, "error", "error", str(exc), time.time())
        finally:
            self._streams.pop(req_id, None)

    def burst(self, count: int) -> None:
        for prompt, settings in burst_requests(self._rng, self.query_one(PromptBar).settings, count):
            self.submit(prompt, settings)

    # ---- actions -------------------------------------------------------------------------

    def action_burst(self) -> None:
        self.burst(self._burst_size)

    def action_abort(self) -> None:
        task = self._streams.get(self.selected or "")
        if task is None:
            self.notify("select a live request with ↑↓ first", severity="warning")
        else:
            task.cancel()

    def action_clear(self) -> None:
        if not self.state.clear_ended():
            self.notify("no ended requests to clear", severity="warning")
        if self.selected not in self.state.requests:
            self.selected = next(iter(self.state.requests), None)

    def action_select(self, delta: int) -> None:
        ids = list(self.state.requests)
        if ids:
            at = ids.index(self.selected) if self.selected in ids else (-1 if delta > 0 else len(ids))
            self.selected = ids[max(0, min(len(ids) - 1, at + delta))]

    @work(group="control", exit_on_error=False)
    async def action_reset_cache(self) -> None:
        try:
            await self.client.reset_prefix_cache()
            self.notify("vLLM reset its prefix cache (its AllBlocksCleared event comes with its next step)")
        except ServerError as exc:
            self.notify(str(exc), severity="error")

    def action_help(self) -> None:
        about = [
            ("server", self.url),
            ("KV events", self.kv_events or "not listened to"),
            ("replay", self.kv_replay or "none: batches missed while away are lost"),
            ("proxy", self.state.proxy_url or "off: pass --proxy-port PORT to list every client's requests"),
            (
                "not published by vLLM",
                "which requests run or wait, per-request block tables, step times, the engine process",
            ),
            (
                "vLLM's limits",
                "not on /metrics, and the rebuild needs them: pass --max-num-seqs and "
                "--max-num-batched-tokens as vLLM got them, or start vLLM with "
                "VLLM_SERVER_DEV_MODE=1 and they are read from its /server_info",
            ),
        ]
        self.show_help(WATCH_PANELS, about)

    async def action_quit(self) -> None:
        for task in list(self._streams.values()):
            task.cancel()
        self.exit()

    async def on_unmount(self) -> None:
        await self.client.close()
        if self.recorder is not None:
            self.recorder.close()
