"""The outside rebuild as a dashboard Engine: its scheduler's steps as StepEvents (inferred, not exact).

sched_rebuild.py steps this engine's own Scheduler as the wire says vLLM stepped; `RebuildEvents`
builds each of its steps into the same StepEvent our engine publishes (core/engine/event_builder.py,
through the simulator's builder), so `attach --vllm URL` shows a vLLM on the one dashboard as
`--probe` does. What the wire cannot tell stays out of the events: no prompt or output token ids
(each request's prompt has its length only; tokens are counted, not named), and block ids are the
rebuild's own numbering of vLLM's pool (how many a request holds is inferred; where is not known).
"""

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import msgspec

from enginetui.core.engine.events import StepEvent, as_snapshot
from enginetui.dashboard.no_input_engine import NoInputEngine
from enginetui.simulate.event_sinks import EventSink
from enginetui.vllm_probe.recording import ProbeRecording, VllmFacts
from enginetui.vllm_watch import prometheus as m

if TYPE_CHECKING:
    from enginetui.vllm_watch.state import WatchState

REBUILD_READ_ONLY = (
    "this is a real vLLM rebuilt from outside: the dashboard watches it; send requests to vLLM's own API "
    "or through the proxy (--proxy-port)"
)


DEVICE = "vLLM (rebuilt from outside)"  # a recording's device: its figures are inferred


def watch_facts(state: "WatchState") -> VllmFacts | None:
    """What the server has said of itself so far, for a recording's header (None: /v1/models has not answered)."""
    if state.server is None:
        return None
    info = state.latest.info.get(m.CACHE_CONFIG, {}) if state.latest else {}
    return VllmFacts(state.server.model, state.server.root, state.server.max_model_len, dict(info))


class RebuildEngine(NoInputEngine, EventSink):
    """Implements enginetui.dashboard.engine_link.Engine on the rebuild's events (read only)."""

    refusal = REBUILD_READ_ONLY

    def __init__(self, url: str) -> None:
        self.url = url  # the vLLM server rebuilt
        self.engine_pid = None  # vLLM runs elsewhere: no process panel figures
        self.info = None
        self.tokenizer = None  # no text: the rebuild has no token ids
        self._events: asyncio.Queue[StepEvent] = asyncio.Queue()
        self._latest: StepEvent | None = None
        self._first = asyncio.Event()
        self.recording: ProbeRecording | None = None  # --record FILE: every event goes there too
        self.tokenizer_dir: str | None = None  # the recording's tokenizer (--tokenizer DIR; else the served model's)
        self.facts_from: WatchState | None = None  # where the recording's header reads what the server said

    def start_recording(self, path: str, source: str) -> ProbeRecording:
        """Record every event from now on to `path`, in our engine's format (enginetui/flags/record.py calls it)."""
        self.recording = ProbeRecording(path, source, None, self.tokenizer_dir, device=DEVICE)
        return self.recording

    @property
    def model_name(self) -> str:
        return "vLLM (rebuilt)"

    @property
    def device(self) -> str:
        return f"vLLM · {self.url} · rebuilt from outside · watch only"

    def waiting_hint(self) -> str:
        return (
            f"waiting for the rebuild of {self.url}: it starts once vLLM's pool (/metrics), limits "
            "(--max-num-seqs, --max-num-batched-tokens, or /server_info) and max_model_len (/v1/models) are "
            "known, and steps as requests go through the proxy (--proxy-port)"
        )

    def emit(self, event: StepEvent) -> None:
        self._latest = event
        self._first.set()
        self._events.put_nowait(event)
        if self.recording is not None:
            if self.recording.facts is None and self.facts_from is not None:
                self.recording.facts = watch_facts(self.facts_from)
            self.recording.write(msgspec.msgpack.encode(event), event)

    async def snapshot(self) -> StepEvent:
        await self._first.wait()
        while not self._events.empty():  # the snapshot holds them
            self._events.get_nowait()
        assert self._latest is not None
        return as_snapshot(self._latest)

    async def events(self) -> AsyncIterator[StepEvent]:
        while True:
            yield await self._events.get()

    def shutdown(self) -> None:
        """Nothing to close: the feed's links belong to the app."""
