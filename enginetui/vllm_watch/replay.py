"""`enginetui replay FILE` on a vLLM watch recording: the vLLM dashboard fed from the file, moved
through by hand or played, with the engine replay's keys (enginetui/replay/app.py): space plays
(- and + from 0.25x to 8x), → / ← one recorded item, Home / End the ends, g jumps to a time.
Playing shortens idle stretches (vLLM running and waiting nothing, no request open) to 2 s unless
`--keep-idle`. No network: every panel is fed from the file."""

import time

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Footer, Static

from enginetui import keys
from enginetui.dashboard.widgets.palette import DIM
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.replay.controls import MAX_IDLE_S, JumpScreen, Playback, offsets_for_play, playback_keys
from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.app import WATCH_PANELS, VllmWatchApp
from enginetui.vllm_watch.recording import BatchItem, CallItem, MetricsItem, WatchItem, WatchRecording, apply_item
from enginetui.vllm_watch.state import WatchState

REPLAY_ONLY = "a replay: nothing goes to a server (it shows what happened)"
REPLAY_PANELS = [
    ("title bar", "what was watched: the server, its model, whether /metrics and the KV events answered then"),
    *((name, what) for name, what in WATCH_PANELS if name != "title bar"),
    ("replay bar", "playing or paused, the item shown (its kind), its time into the recording, the play speed"),
]
ITEM_KINDS = {MetricsItem: "/metrics reading", BatchItem: "KV events"}  # the rest: by their op / kind


def idle_after(items: list[WatchItem]) -> list[bool]:
    """Per item: nothing happens after it (vLLM's last reading runs and waits nothing, no request is
    open here or through the proxy, and no KV events came with it)."""
    busy_vllm, open_requests, proxied, idle = False, set(), 0, []
    for item in items:
        if isinstance(item, MetricsItem):
            sample = item.sample
            busy_vllm = bool((sample.total(m.RUNNING) or 0) + (sample.total(m.WAITING) or 0))
        elif isinstance(item, CallItem):
            if item.op == "add_request":
                open_requests.add(item.args[0])
            elif item.op == "proxy_arrived":
                proxied += 1
                open_requests.add(f"p{proxied}")  # WatchState.proxy_arrived's id
            elif item.op in ("end_request", "proxy_ended"):
                open_requests.discard(item.args[0])
        idle.append(not busy_vllm and not open_requests and not isinstance(item, BatchItem))
    return idle


def item_kind(item: WatchItem) -> str:
    return ITEM_KINDS.get(type(item)) or (
        item.op.replace("_", " ") if isinstance(item, CallItem) else type(item).__name__.removesuffix("Item").lower()
    )


class WatchReplayBar(Static):
    """Where the replay is: playing or paused, the item shown, its time, the speed."""

    DEFAULT_CSS = (
        "WatchReplayBar { height: 1; padding: 0 1; background: $boost; text-wrap: nowrap; text-overflow: ellipsis; }"
    )

    def show(self, app: "WatchReplayApp") -> None:
        text = Text("▶ playing" if app.playing else "⏸ replay", style="bold #98c379" if app.playing else "bold #e5c07b")
        items = app.recording.items
        kind = item_kind(items[app.shown - 1]) if app.shown else "the start"
        text.append(
            f" · item {app.shown}/{len(items)} ({kind}) · {app.seconds_at(app.shown):.1f} s of "
            f"{app.seconds_at(len(items)):.1f} s · {app.speed:g}x"
        )
        text.append(" · idle as recorded" if app.keep_idle else " · idle stretches shortened", style=DIM)
        hint = "  space play · → ← item · - + speed · g jump"
        if len(text) + len(hint) <= self.content_size.width:
            text.append(hint, style=DIM)
        self.update(text)


class WatchReplayApp(Playback, VllmWatchApp, inherit_bindings=False):
    """The vLLM dashboard on a recording instead of a server."""

    TITLE = "enginetui · vLLM replay"
    AUTO_FOCUS = None  # no prompt box: a replay takes no text, only keys
    BINDINGS = [
        *playback_keys(
            "move",
            "Next",
            "the next recorded item: a /metrics reading, KV events, a request's change",
            "the previous recorded item",
            "a time into the recording (12.5s)",
        ),
        *keys.select_keys(how=""),
        keys.refused_keys(
            "ctrl+b,ctrl+x,ctrl+l,ctrl+r",
            "bursts, aborts, clearing and cache resets: not in a replay (it shows what happened)",
        ),
        keys.help_key(plain=True),
        *keys.quit_keys("quit", plain=True),
    ]

    def __init__(self, recording: WatchRecording, start_s: float = 0.0, keep_idle: bool = False, **kwargs) -> None:
        super().__init__(recording.header.url, kv_events=recording.header.kv_endpoint, **kwargs)
        self.recording = recording  # what is replayed
        self.keep_idle = keep_idle  # play idle stretches at their recorded length
        times = recording.times()
        self._times = [t - times[0] for t in times] if times else []  # seconds into the recording, per item
        # the playback clock per item (idle stretches shortened unless keep_idle); [0] is the start
        self.play_offsets = (
            [0.0, *offsets_for_play(times, idle_after(recording.items), None if keep_idle else MAX_IDLE_S)]
            if times
            else [0.0]
        )
        self.shown = 0  # items folded into the state on show
        self._start_at = sum(t <= start_s for t in self._times)  # --at: the items folded at once
        self.state = self._fresh_state()

    @property
    def replayed(self) -> int:
        """Items folded so far."""
        return self.shown

    def _fresh_state(self) -> WatchState:
        state = WatchState(self.recording.header.url, self.recording.header.kv_endpoint, limits=self.state.limits)
        state.kv_link = "off" if self.recording.header.kv_endpoint is None else "connecting"
        state.note(
            self.recording.header.created,
            "link",
            f"replay of {self.recording.path}" + (f" ({self.recording.problem})" if self.recording.problem else ""),
        )
        return state

    def on_mount(self) -> None:
        """The live app's redraw timer, without its server links (the recording holds what they did)."""
        self.query_one(PromptBar).display = False
        self.mount(WatchReplayBar(id="replay-bar"), before=self.query_one(Footer))
        self.set_interval(1 / self._redraw_hz, self._redraw_tick)
        self._fit_footer(self.size.width)
        self.show_items(self._start_at)
        if self.shown < len(self.recording.items):
            self.action_play()  # from the start, or --at: it plays (space pauses)

    # ---- showing -------------------------------------------------------------------------

    def seconds_at(self, shown: int) -> float:
        """Seconds into the recording after `shown` items."""
        return self._times[shown - 1] if shown else 0.0

    def show_items(self, count: int) -> None:
        """Show the state after the first `count` items (clamped): folded on from here, or again from the start."""
        count = max(0, min(len(self.recording.items), count))
        if count < self.shown:
            self.state, self.shown = self._fresh_state(), 0
        for item in self.recording.items[self.shown : count]:
            apply_item(self.state, item)
        self.shown = count
        if self.selected not in self.state.requests:
            self.selected = None
        self._drawn = None
        self.redraw()

    def redraw(self) -> None:
        super().redraw()
        for bar in self.query(WatchReplayBar):
            bar.show(self)

    # ---- moving --------------------------------------------------------------------------

    def action_move(self, delta: int) -> None:
        self.stop_playing()
        target = self.shown + delta
        if not 0 <= target <= len(self.recording.items):
            self._at_an_end(delta)
        else:
            self.show_items(target)

    def action_move_to(self, where: int) -> None:
        self.stop_playing()
        self.show_items(where if where >= 0 else len(self.recording.items))

    def _at_an_end(self, delta: int) -> None:
        if delta > 0:
            self.notify(
                f"end of the recording: {self.seconds_at(self.shown):.1f} s (Home goes back to the start)",
                severity="warning",
            )
        else:
            self.notify("start of the recording", severity="warning")

    def action_jump(self) -> None:
        self.stop_playing()

        def jump(text: str | None) -> None:
            if not text:
                return
            try:
                seconds = float(text.strip().lower().removesuffix("s"))
            except ValueError:
                self.notify(f"{text!r} is not a time into the recording (12.5s)", severity="error")
                return
            self.show_items(sum(t <= seconds for t in self._times))

        self.push_screen(JumpScreen("a time into the recording (12.5s)", "12.5s"), jump)

    # ---- playing (Playback) -------------------------------------------------------------

    @property
    def play_position(self) -> int:
        return self.shown

    @property
    def play_last(self) -> int:
        return len(self.recording.items)

    def play_show(self, position: int) -> None:
        self.show_items(position)

    def action_refused(self) -> None:
        self.notify(REPLAY_ONLY, severity="warning")

    def action_help(self) -> None:
        header = self.recording.header
        about = [
            ("file", self.recording.path),
            ("server", header.url),
            ("KV events", header.kv_endpoint or "not listened to"),
            (
                "recorded by",
                f"enginetui {header.enginetui_version}, "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(header.created))}",
            ),
            ("holds", f"{len(self.recording.items)} items · {self.seconds_at(len(self.recording.items)):.1f} s"),
        ]
        if self.recording.problem:
            about.append(("note", self.recording.problem))
        self.show_help(REPLAY_PANELS, about, prompt_keys=False, about_title="recording")

    def key_rows(self) -> list[tuple[str, str]]:
        """Every binding (a replay takes no text: its keys are plain)."""
        return [(self.get_key_display(b), b.tooltip) for b in self.BINDINGS if isinstance(b, Binding)]

    def _title(self) -> Text:
        return Text("replay · ", style="bold #e5c07b").append_text(super()._title())

    def _empty_requests(self) -> str:
        return "no requests at this point of the recording"

    def submit(self, prompt, settings) -> None:
        self.notify(REPLAY_ONLY, severity="warning")
