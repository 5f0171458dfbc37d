"""`enginetui attach --probe ADDR`: the dashboard on a real vLLM, fed by its probe's step events.

The probe (enginetui/vllm_probe/schedulers.py) publishes the same StepEvents our engine does, so the
dashboard is the same app with the same screens; only the engine differs: it subscribes to the probe's
socket and takes nothing in (prompts go to vLLM's own API; every key that would change an engine
says so). Its first event is vLLM's next step: an idle vLLM shows nothing until it works.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, ClassVar

import zmq
import zmq.asyncio

from enginetui import keys
from enginetui.core.engine.events import MissedEvents, StepEvent, as_snapshot, decode_event
from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.no_input_engine import NoInputEngine
from enginetui.vllm_probe.recording import ProbeRecording, VllmFacts

if TYPE_CHECKING:
    from enginetui.vllm_watch.rebuild_engine import RebuildEngine

PROBE_READ_ONLY = (
    "this is a real vLLM seen through its probe: the dashboard watches it; send requests to vLLM's own API"
)


class ProbeRestarted(RuntimeError):
    """The probe's events started over (vLLM restarted): its state no longer continues the one shown."""


class ProbeEngine(NoInputEngine):
    """Implements enginetui.dashboard.engine_link.Engine on a vLLM probe's event socket (read only)."""

    refusal = PROBE_READ_ONLY

    def __init__(self, address: str) -> None:
        self.address = address  # the probe's ENGINETUI_PROBE endpoint (tcp://HOST:PORT or ipc://PATH)
        self.engine_pid = None  # vLLM's engine runs elsewhere: no process panel figures
        self.info = None  # vLLM's model is not on the events
        self.tokenizer = None  # no text for vLLM's requests: the events carry token ids
        self.missed = MissedEvents()  # events lost at this subscriber's full queue
        self._sock: zmq.asyncio.Socket | None = None  # opened in the app's event loop
        self._latest: StepEvent | None = None  # the latest event taken
        self._reading = asyncio.Lock()  # one reader of the socket at a time (snapshot() may be asked twice at once)
        self.watchers: list[Callable[[StepEvent, float], None]] = []  # told each event taken, and when (time.time())
        self.recording: ProbeRecording | None = None  # --record FILE: every event taken is written there
        self.facts: VllmFacts | None = None  # what vLLM's server said, for the recording's header (--vllm URL)
        self.tokenizer_dir: str | None = None  # the recording's tokenizer (--tokenizer DIR; else the served model's)

    @property
    def model_name(self) -> str:
        return "vLLM (probe)"

    @property
    def device(self) -> str:
        return f"vLLM · probe {self.address} · watch only"

    def waiting_hint(self) -> str:
        return f"waiting for vLLM's next step\n(its probe: {self.address})"

    async def snapshot(self) -> StepEvent:
        """The first event (waits for vLLM's next step); asked again, the latest state without its news."""
        async with self._reading:
            if self._latest is None:
                self._latest = await self._next()
                return self._latest
        return as_snapshot(self._latest)

    async def events(self) -> AsyncIterator[StepEvent]:
        while True:
            async with self._reading:
                event = await self._next()
            yield event

    def shutdown(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)

    def start_recording(self, path: str, source: str) -> ProbeRecording:
        """Record every event taken from now on to `path` (enginetui/flags/record.py calls it)."""
        self.recording = ProbeRecording(path, source, self.facts, self.tokenizer_dir)
        return self.recording

    async def _next(self) -> StepEvent:
        if self._sock is None:
            self._sock = zmq.asyncio.Context.instance().socket(zmq.SUB)
            self._sock.setsockopt(zmq.LINGER, 0)
            if self.recording is not None:  # however far the dashboard falls behind, the recording loses nothing here
                self._sock.setsockopt(zmq.RCVHWM, 0)
            self._sock.connect(self.address)
            self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        data = await self._sock.recv()
        arrived = time.time()
        event = decode_event(data)
        if self.missed.last_seq is not None and event.seq <= self.missed.last_seq:
            raise ProbeRestarted(f"the probe at {self.address} started over (vLLM restarted?): attach again")
        self._latest = self.missed.mark(event)
        if self.recording is not None:
            self.recording.write(data, event)
        for watcher in self.watchers:
            watcher(self._latest, arrived)
        return self._latest


class ProbeWatchTUI(EngineTUI, inherit_bindings=False):
    """The dashboard following a real vLLM through its probe (or, in with_vllm.py, its rebuild)."""

    AUTO_FOCUS: ClassVar[str | None] = None  # no prompt box: vLLM takes its prompts on its own API
    BINDINGS = [
        keys.timeline_key(plain=True),
        *keys.select_keys(),
        keys.refused_keys(
            "ctrl+b,ctrl+x,ctrl+l,ctrl+p,ctrl+s,pagedown,pageup",
            "bursts, aborts, clearing, pause, step and slow motion: not on a real vLLM (watched, not driven)",
        ),
        keys.help_key(plain=True),
        *keys.quit_keys("stop watching and quit (vLLM keeps serving)", plain=True),
    ]

    def __init__(self, engine: "ProbeEngine | RebuildEngine", **kwargs) -> None:
        super().__init__(engine, **kwargs)
        self.vllm_engine = engine  # the probe's events, or the outside rebuild's (with_vllm.py)

    def on_mount(self) -> None:  # Textual runs EngineTUI's on_mount too
        self.take_no_input()

    def _sample_process(self) -> None:
        """vLLM's engine process is not this machine's to read."""

    def _empty_hint(self) -> str:
        return self.vllm_engine.waiting_hint()
