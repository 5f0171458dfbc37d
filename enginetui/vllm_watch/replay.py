"""`enginetui replay FILE` on a vLLM watch recording: the dashboard replays the session at the pace
it was recorded (from `--at SECONDS` into it, the items before folded at once), then holds its
last state. No network: every panel is fed from the file."""

import asyncio

from enginetui.vllm_watch.app import VllmWatchApp
from enginetui.vllm_watch.recording import WatchRecording, apply_item


class WatchReplayApp(VllmWatchApp):
    """The vLLM dashboard fed from a recording instead of a server."""

    def __init__(self, recording: WatchRecording, start_s: float = 0.0, speed: float = 1.0, **kwargs) -> None:
        super().__init__(recording.header.url, kv_events=recording.header.kv_endpoint, **kwargs)
        self.recording = recording  # what is replayed
        self.start_s = start_s  # seconds into the recording folded at once
        self.speed = speed  # replay pace (1: as recorded)
        self.replayed = 0  # items folded so far
        self.state.kv_link = "off" if recording.header.kv_endpoint is None else "connecting"

    def on_mount(self) -> None:
        super().on_mount()
        self.state.note(self.recording.header.created, "link", f"replay of {self.recording.path}"
                        + (f" ({self.recording.problem})" if self.recording.problem else ""))
        self.run_worker(self._feed(), group="replay", exit_on_error=False)

    async def _feed(self) -> None:
        items = self.recording.items
        times = self.recording.times()
        origin = times[0] if times else 0.0
        loop = asyncio.get_running_loop()
        began = loop.time() - self.start_s / self.speed
        for item, when in zip(items, times, strict=True):
            wait = began + (when - origin) / self.speed - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            apply_item(self.state, item)
            self.replayed += 1

    # ---- nothing goes out ----------------------------------------------------------------

    def _poll_metrics(self) -> None:  # type: ignore[override]  # the live app's is a worker; this one does nothing
        """A replay reads no server."""

    def _follow_rank(self, rank: int) -> None:
        """A replay listens to no KV events."""

    def _serve_proxy(self, host: str, port: int) -> None:  # type: ignore[override]  # the live app's is a worker
        """A replay serves no proxy."""

    def _check_kv_silence(self) -> None:
        """The recording says what the links did."""

    def submit(self, prompt, settings) -> None:
        self.notify("a replay: prompts go to no server", severity="warning")
