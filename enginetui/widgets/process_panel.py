"""EngineCore process panel: pid, CPU %, memory, device (sampled about once a second)."""

from collections.abc import Callable
from dataclasses import dataclass

import psutil
from rich.text import Text
from textual.widgets import Static

from enginetui.widgets.palette import DIM


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
                cpu = self._process.cpu_percent(interval=None)
                rss = self._process.memory_info().rss
        except psutil.Error:
            return None
        return ProcessSample(pid=pid, cpu_percent=cpu, rss_mb=rss / 2**20)


class ProcessPanel(Static):
    """One line: where the engine runs and what it costs."""

    def show(self, sample: ProcessSample | None, in_process: bool, device: str) -> None:
        where = "EngineCore (in-process)" if in_process else "EngineCore"
        if sample is None:
            self.update(Text(f"{where} · not running · {device}", style=DIM))
            return
        self.update(f"{where} pid {sample.pid} · {sample.cpu_percent:.0f}% CPU · {sample.rss_mb:.0f} MB · {device}")
