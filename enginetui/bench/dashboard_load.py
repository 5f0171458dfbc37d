"""The dashboard as a benchmark's competing load: `python -m enginetui.bench.dashboard_load`.

Runs the real dashboard app (`enginetui.dashboard.app.EngineTUI`, every panel, its default redraw rate, CPU budget and
process probe) on an engine it does not own: `EventObserver` follows the step events of a running
EngineCore (its PUB address) and refuses anything that would change the engine. Started by
`enginetui.bench.competing` on a pseudo-terminal. It touches `--ready-file` once its first frame
with the engine's state is drawn, and on SIGTERM quits and writes `--stats-file` (JSON of
`competing.DashboardCost`): its CPU time and its redraw cost while attached.
"""

import argparse
import asyncio
import json
import resource
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import zmq
import zmq.asyncio

from enginetui.core.engine.core_client import SUB_RCVHWM
from enginetui.core.engine.events import MissedEvents, StepEvent, decode_event
from enginetui.dashboard.app import EngineTUI
from enginetui.flags.dashboard import DEFAULT_MAX_CPU_PCT

READ_ONLY = "this dashboard only watches the engine (benchmark load)"


class EventObserver:
    """The dashboard's `Engine` protocol over an engine's step events only (read-only)."""

    def __init__(self, events_address: str, engine_pid: int | None) -> None:
        self.engine_pid = engine_pid  # the EngineCore process the process panel samples
        self.model_name = "benchmark"  # shown in the title bar
        self.device = "cpu"  # shown in the process panel
        self.info = None  # the model is not known from the events: the model panel says so
        self.tokenizer = None  # requests' text is not decoded (the load is the events and the drawing)
        self.events_seen = 0  # step events received (updates and snapshots excluded)
        self.missed = MissedEvents()  # step events the publisher dropped for us
        self._ctx = zmq.asyncio.Context()
        self._sock = self._ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.RCVHWM, SUB_RCVHWM)  # as the dashboard's own subscriber
        self._sock.connect(events_address)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")

    async def snapshot(self) -> StepEvent:
        """The greeting snapshot every new subscriber gets (the first message)."""
        return await self._next()

    async def events(self) -> AsyncIterator[StepEvent]:
        while True:
            yield await self._next()

    async def _next(self) -> StepEvent:
        event = decode_event(await self._sock.recv())
        self.events_seen += event.is_step
        return self.missed.mark(event)

    def generate(self, prompt, params, request_id):
        raise ValueError(READ_ONLY)

    async def abort(self, request_id: str) -> None:
        raise RuntimeError(READ_ONLY)

    async def pause(self) -> None:
        raise RuntimeError(READ_ONLY)

    async def resume(self) -> None:
        raise RuntimeError(READ_ONLY)

    async def step_once(self) -> None:
        raise RuntimeError(READ_ONLY)

    async def set_step_interval(self, seconds: float) -> None:
        raise RuntimeError(READ_ONLY)

    def shutdown(self) -> None:
        self._sock.close(linger=0)
        self._ctx.term()


class MeteredDashboard(EngineTUI):
    """The dashboard, timing its redraws; ready once a frame shows the engine's state."""

    def __init__(self, observer: EventObserver, ready_file: Path) -> None:
        super().__init__(observer, max_cpu_share=DEFAULT_MAX_CPU_PCT / 100)  # as `enginetui` draws by default
        self.ready_file = ready_file  # touched once the first engine frame is drawn
        self.redraws = 0  # redraws that pushed new state into the widgets
        self.redraw_s = 0.0  # time spent in those
        self.attached_at: float | None = None  # monotonic time of the first engine frame
        self.cpu_at_attach = 0.0  # process CPU seconds then

    def on_mount(self) -> None:
        super().on_mount()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.exit)

    def redraw(self) -> None:
        before = self._drawn
        start = time.perf_counter()
        super().redraw()
        if self._drawn != before:
            self.redraw_s += time.perf_counter() - start
            self.redraws += 1
        if self.attached_at is None and self.phase == "ready" and self._drawn is not None:
            self.attached_at = time.monotonic()
            self.cpu_at_attach = _cpu_seconds()
            self.redraws, self.redraw_s = 0, 0.0
            self.ready_file.touch()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", required=True, help="EngineCore's step-event address (ipc://...)")
    parser.add_argument("--engine-pid", type=int, help="EngineCore's process id (for the process panel)")
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--stats-file", type=Path, required=True)
    args = parser.parse_args(argv)
    observer = EventObserver(args.events, args.engine_pid)
    app = MeteredDashboard(observer, args.ready_file)
    app.run()
    if app.attached_at is not None:
        wall = time.monotonic() - app.attached_at
        cpu = _cpu_seconds() - app.cpu_at_attach
        args.stats_file.write_text(
            json.dumps(
                {
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "cpu_share": cpu / wall if wall > 0 else 0.0,
                    "events": observer.events_seen,
                    "missed_events": observer.missed.total,
                    "redraws": app.redraws,
                    "redraw_ms_mean": 1e3 * app.redraw_s / app.redraws if app.redraws else 0.0,
                }
            )
        )
    return 0  # the app closed the observer when it unmounted


if __name__ == "__main__":
    raise SystemExit(main())
