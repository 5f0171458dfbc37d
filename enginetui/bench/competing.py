"""What else runs on the machine during a timed pass: nothing, one busy process, or the dashboard.

- `none`: the engine alone.
- `busy`: one `python -c 'while True: pass'` process, a stand-in for any CPU-bound neighbour.
- `dashboard`: the real Textual dashboard (`enginetui.bench.dashboard_load`) in its own process on
  a pseudo-terminal, following the engine's step events and drawing at its normal rate, as a user
  would watch the run. It reports the CPU time it used and its redraw cost.

`competing(mode, ...)` is a context manager around one timed pass: it first waits until the machine
is quiet (enginetui.bench.quiet), then the load is running (the dashboard attached and drawing)
when the block starts, and gone when it ends.
"""

import contextlib
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from enginetui.bench.quiet import wait_until_quiet

COMPETING_MODES = ("none", "busy", "dashboard")
BUSY_CODE = "while True: pass"  # the busy neighbour
TERMINAL_SIZE = (50, 160)  # rows, columns of the dashboard's pseudo-terminal
READY_TIMEOUT_S = 120.0  # time the dashboard may take to start and draw its first frame


def mode_label(base: str, load: str) -> str:
    """A pass's mode as shown and keyed in results: `base` alone, or `base+load` beside a load."""
    return base if load == "none" else f"{base}+{load}"


@dataclass(slots=True)
class DashboardCost:
    """What the attached dashboard used while it was attached (from its own accounting)."""

    wall_s: float  # attached time
    cpu_s: float  # CPU time of the dashboard process (user + system) over that time
    cpu_share: float  # cpu_s / wall_s: the fraction of one core it used
    events: int  # step events it received
    missed_events: int  # step events the publisher dropped for it (it fell behind)
    redraws: int  # redraws that pushed new state into the widgets
    redraw_ms_mean: float  # mean time of such a redraw (pushing state into the widgets)

    def describe(self) -> str:
        """`17% cpu, 4.2 redraws/s, 1.7 ms/redraw`."""
        rate = self.redraws / self.wall_s if self.wall_s > 0 else 0.0
        return f"{100 * self.cpu_share:.0f}% cpu, {rate:.1f} redraws/s, {self.redraw_ms_mean:.1f} ms/redraw"


@contextlib.contextmanager
def competing(mode: str, events_address: str | None = None, engine_pid: int | None = None) -> Iterator["Competitor"]:
    """Run the competing load of `mode` for the duration of the block, on an otherwise quiet machine."""
    if mode not in COMPETING_MODES:
        raise ValueError(f"competing load must be one of {', '.join(COMPETING_MODES)}, got {mode!r}")
    wait_until_quiet()
    competitor = Competitor(mode)
    if mode == "busy":
        competitor.start_busy()
    elif mode == "dashboard":
        if events_address is None:
            raise ValueError(
                "--competing dashboard needs the multiprocess engine with step events "
                "(not --events off, not ENGINETUI_MULTIPROC=0)"
            )
        competitor.start_dashboard(events_address, engine_pid)
    try:
        yield competitor
    finally:
        competitor.stop()


class Competitor:
    """The processes of one competing load; `cost` is the dashboard's, once stopped."""

    def __init__(self, mode: str) -> None:
        self.mode = mode  # none | busy | dashboard
        self.proc: subprocess.Popen | None = None  # the busy process or the dashboard
        self.cost: DashboardCost | None = None  # dashboard mode, after stop()
        self._tmp: tempfile.TemporaryDirectory | None = None  # the dashboard's ready / stats files and log
        self._pty_master: int | None = None  # the dashboard's terminal, read by _drain
        self._drain_thread: threading.Thread | None = None  # reads what the dashboard draws

    def start_busy(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", BUSY_CODE], start_new_session=True)

    def start_dashboard(self, events_address: str, engine_pid: int | None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="enginetui-bench-dashboard-")
        tmp = Path(self._tmp.name)
        master, slave = pty.openpty()
        import fcntl
        import termios

        rows, cols = TERMINAL_SIZE
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        command = [
            sys.executable,
            "-m",
            "enginetui.bench.dashboard_load",
            "--events",
            events_address,
            "--ready-file",
            str(tmp / "ready"),
            "--stats-file",
            str(tmp / "stats.json"),
        ]
        if engine_pid is not None:
            command += ["--engine-pid", str(engine_pid)]
        with open(tmp / "dashboard.log", "wb") as log:
            self.proc = subprocess.Popen(
                command, stdin=slave, stdout=slave, stderr=log, env=env, start_new_session=True
            )
        os.close(slave)
        self._pty_master = master
        self._drain_thread = threading.Thread(target=_drain, args=(master,), name="dashboard-terminal", daemon=True)
        self._drain_thread.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (tmp / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log_text = (tmp / "dashboard.log").read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"the dashboard did not start drawing; its log:\n{log_text}")
            time.sleep(0.05)

    def stop(self) -> None:
        """End the load; for the dashboard, read what it used. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the dashboard quits cleanly and writes its stats
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._pty_master is not None:
            if self._drain_thread is not None:
                self._drain_thread.join(timeout=5)
            os.close(self._pty_master)
            self._pty_master = None
        if self._tmp is not None:
            stats = Path(self._tmp.name) / "stats.json"
            if stats.exists():
                self.cost = DashboardCost(**json.loads(stats.read_text()))
            self._tmp.cleanup()
            self._tmp = None


def _drain(master: int) -> None:
    """Read the dashboard's terminal output until it closes, as a terminal emulator would."""
    while True:
        try:
            if not os.read(master, 1 << 16):
                return
        except OSError:  # EIO: the dashboard closed its side
            return
