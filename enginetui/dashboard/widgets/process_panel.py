"""EngineCore process panel: pid, CPU %, memory, device (sampled about once a second)."""

from collections.abc import Callable
from dataclasses import dataclass

import psutil
from rich.text import Text
from textual.widget import Widget

from enginetui.dashboard.widgets.palette import DIM

FULL_WIDTH = 120  # terminal columns from which the panel names EngineCore in full
PID_WIDTH = 100  # terminal columns from which it shows the pid and device (below: CPU and memory only)


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One reading of the EngineCore process."""

    pid: int  # process id
    cpu_percent: float  # CPU use since the previous reading (100 = one core)
    rss_mb: float  # resident memory in MiB


ProcessProbe = Callable[[int], ProcessSample | None]  # pid -> reading (None when the process is gone)


class PsutilProbe:
    """Reads a process with psutil, keeping the handle so CPU % covers the time between calls."""

    def __init__(self) -> None:
        self._process: psutil.Process | None = None  # handle of the last pid read

    def __call__(self, pid: int) -> ProcessSample | None:
        try:
            if self._process is None or self._process.pid != pid:
                self._process = psutil.Process(pid)
            with self._process.oneshot():
                if self._process.status() == psutil.STATUS_ZOMBIE:  # dead, not yet reaped: nothing runs
                    return None
                cpu = self._process.cpu_percent(interval=None)
                rss = self._process.memory_info().rss
        except psutil.Error:
            return None
        return ProcessSample(pid=pid, cpu_percent=cpu, rss_mb=rss / 2**20)


def process_text(
    sample: ProcessSample | None,
    in_process: bool,
    device: str,
    columns: int,
    server: str | None = None,
    pid: int | None = None,
) -> Text:
    """The panel's line for a terminal `columns` wide: shorter forms leave the title bar room. An
    attached dashboard (`server`: the URL it is attached to, `pid`: the server's EngineCore) keeps
    both at every size: which engine it shows matters more than what the engine costs."""
    where = "EngineCore (in-process)" if in_process else "EngineCore"
    if server is not None and columns < PID_WIDTH:  # the device's words after the server's, e.g. "watch only"
        where = server.split("://", 1)[-1] + device.partition(server)[2]
        return Text(f"pid {pid} · {where}" if pid else where)
    if sample is None and server is not None:  # the server's EngineCore runs on another machine: no reading
        return Text(f"{where} pid {pid} · {device}" if pid else device)
    if sample is None:
        return Text(f"{where} · not running · {device}" if columns >= PID_WIDTH else "not running", style=DIM)
    cost = f"{sample.cpu_percent:.0f}% CPU · {sample.rss_mb:.0f} MB"
    if columns >= FULL_WIDTH:
        return Text(f"{where} pid {sample.pid} · {cost} · {device}")
    return Text(f"pid {sample.pid} · {cost} · {device}" if columns >= PID_WIDTH else cost)


class ProcessPanel(Widget):
    """One line: where the engine runs and what it costs."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # (sample, in-process, device, attached server's URL or None, its EngineCore pid or None)
        self._reading: tuple[ProcessSample | None, bool, str, str | None, int | None] | None = None

    @property
    def has_sample(self) -> bool:
        """A reading of the live process is on show."""
        return self._reading is not None and self._reading[0] is not None

    def show(
        self,
        sample: ProcessSample | None,
        in_process: bool,
        device: str,
        server: str | None = None,
        pid: int | None = None,
    ) -> None:
        self._reading = (sample, in_process, device, server, pid)
        self.refresh(layout=True)

    def render(self) -> Text:
        if self._reading is None:
            return Text("")
        sample, in_process, device, server, pid = self._reading
        return process_text(sample, in_process, device, self.app.size.width, server, pid)
