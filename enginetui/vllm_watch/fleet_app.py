"""The fleet dashboard: several vLLM replicas at once, each read by its own feeds (feed.py), a panel
per replica and the fleet's cached prefixes (fleet.py). Redraws at `redraw_hz` at most, and only
what changed."""

import time
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Footer, Static

from enginetui import keys
from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.vllm_watch.feed import POLL_S, SILENCE_CHECK_S, ServerFeed
from enginetui.vllm_watch.fleet import REPLICA_NAMES, fleet_text, replica_text
from enginetui.vllm_watch.server import VllmClient
from enginetui.vllm_watch.state import WatchState


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica to watch."""

    url: str  # its OpenAI server
    kv_events: str | None  # its KV events endpoint (None: not listened to)
    kv_replay: str | None = None  # its replay endpoint (None: no catching up)


REFUSAL = "not on a real vLLM fleet (watched, not driven)"
PANELS = [  # the help screen's line per panel
    ("title", "how many replicas answer"),
    (
        "replica A, B, …",
        "its server, /metrics and KV-event links; running, waiting, KV use, blocks cached, prefix hits, mean TTFT",
    ),
    ("fleet", "which prefixes are cached where: a mark per replica holding each one"),
]


class FleetApp(App[None]):
    """Watch several vLLM servers: which holds what, and how each is doing."""

    CSS_PATH = [Path(__file__).parent.parent / "dashboard" / "app.tcss", Path(__file__).with_name("fleet.tcss")]
    TITLE = "enginetui · vLLM fleet"
    AUTO_FOCUS = None
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        keys.refused_keys(f"{keys.CONTROLS},{keys.PLAIN_PLAYBACK}", f"play, pause, step and speed: {REFUSAL}"),
        keys.help_key(plain=True),
        *keys.quit_keys("stop watching and quit (vLLM keeps serving)", plain=True),
    ]

    def __init__(
        self,
        replicas: list[Replica],
        *,
        api_key: str | None = None,
        tokenizer: str | None = None,
        redraw_hz: float = 4.0,
        poll_s: float = POLL_S,
        silence_check_s: float = SILENCE_CHECK_S,
    ) -> None:
        super().__init__()
        self.names = list(REPLICA_NAMES[: len(replicas)])  # each replica's letter
        self.states = [WatchState(r.url.rstrip("/"), r.kv_events) for r in replicas]  # one per replica
        self.clients = [VllmClient(r.url, api_key) for r in replicas]
        start = lambda coro: self.run_worker(coro, group="feeds", exit_on_error=False)  # noqa: E731
        self.feeds = [
            ServerFeed(
                state, client, start, kv_events=r.kv_events, kv_replay=r.kv_replay, tokenizer=tokenizer, poll_s=poll_s
            )
            for state, client, r in zip(self.states, self.clients, replicas, strict=True)
        ]
        self._redraw_hz = redraw_hz  # most redraws per second
        self._silence_check_s = silence_check_s
        self._drawn: tuple | None = None  # the states' versions on screen

    @property
    def replicas(self) -> list[tuple[str, WatchState]]:
        return list(zip(self.names, self.states, strict=True))

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-title")
        with Vertical(id="fleet-replicas"):
            for name in self.names:
                yield Static(id=f"replica-{name}", classes="panel replica")
        with VerticalScroll(id="fleet-prefixes", classes="panel"):
            yield Static(id="fleet-prefixes-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#fleet-prefixes").border_title = "Fleet · which prefixes are cached where"
        for name, _ in self.replicas:
            self.query_one(f"#replica-{name}").border_title = f"replica {name}"
        for feed, state in zip(self.feeds, self.states, strict=True):
            self.run_worker(feed.poll_metrics(), group="feeds", exit_on_error=False)
            if feed.kv_events:
                feed.follow_rank(0)
            else:
                state.kv_status(time.time(), "off", "not listened to: pass --kv-events ENDPOINT per --vllm URL")
        self.set_interval(1 / self._redraw_hz, self.redraw)
        self.set_interval(self._silence_check_s, self._check_kv_silence)
        self.redraw()

    def _check_kv_silence(self) -> None:
        for feed in self.feeds:
            feed.check_kv_silence()

    def redraw(self) -> None:
        key = tuple(state.version for state in self.states)
        if key == self._drawn:
            return
        try:
            title = self.query_one("#fleet-title", Static)
        except NoMatches:  # a last tick while the app closes
            return
        self._drawn = key
        up = sum(state.link == "up" for state in self.states)
        title.update(Text(f"enginetui · vLLM fleet · {up}/{len(self.states)} replicas answer", style="bold"))
        width = max(20, self.size.width - 4)
        for name, state in self.replicas:
            self.query_one(f"#replica-{name}", Static).update(replica_text(name, state, width))
        self.query_one("#fleet-prefixes-body", Static).update(fleet_text(self.replicas, width))

    def action_refused(self) -> None:
        self.notify(f"play, pause, step and speed: {REFUSAL}", severity="warning")

    def action_help(self) -> None:
        """Open the help screen (the dashboard's), or close it if it is open."""
        if isinstance(self.screen, HelpScreen):
            self.screen.action_close()
            return
        about = [(name, state.url) for name, state in self.replicas]
        self.push_screen(
            HelpScreen(keys.key_rows(self, self.BINDINGS), PANELS, about, prompt_keys=False, about_title="fleet")
        )

    async def on_unmount(self) -> None:
        for client in self.clients:
            await client.close()
