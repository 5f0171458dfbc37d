"""Where engine output goes while the dashboard owns the terminal.

The EngineCore child writes its stdout, stderr, logging and warnings to a log file (AsyncLLM's
`log_file=`); `route_python_output` sends this process's logging and warnings to the same file
while the screen is up, so nothing draws over the dashboard.
"""

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KEEP_LOGS = 20  # engine-*.log files kept in the cache folder (oldest removed first)
LOG_FORMAT = "%(asctime)s dashboard[%(process)d] %(levelname)s %(name)s: %(message)s"


def log_dir() -> Path:
    """`$XDG_CACHE_HOME/enginetui` (default `~/.cache/enginetui`)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "enginetui"


def default_log_file() -> Path:
    """This run's engine log: `engine-<dashboard pid>.log` in `log_dir()`; older logs beyond KEEP_LOGS are removed."""
    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    old = sorted(folder.glob("engine-*.log"), key=lambda p: p.stat().st_mtime)
    for path in old[: max(0, len(old) - (KEEP_LOGS - 1))]:
        path.unlink(missing_ok=True)
    return folder / f"engine-{os.getpid()}.log"


def display_path(path: str | os.PathLike) -> str:
    """`path` with the home folder written as ~."""
    text, home = str(path), os.path.expanduser("~")
    return "~" + text[len(home) :] if home not in ("", "/") and text.startswith(home + os.sep) else text


@contextmanager
def route_python_output(path: str | os.PathLike) -> Iterator[None]:
    """While inside: this process's logging records (WARNING and up) and `warnings` go to `path`
    (appended), and handlers that were writing to the terminal write there instead (transformers
    keeps its own stderr handler, made before the screen took over). Restored on the way out."""
    file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed in finally
    handler = logging.StreamHandler(file)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.WARNING)
    terminal = {id(s) for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) if s is not None}
    loggers = [
        logging.getLogger(),
        *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    moved = [h for lg in loggers for h in lg.handlers if type(h) is logging.StreamHandler and id(h.stream) in terminal]
    streams = [h.setStream(file) for h in moved]  # setStream returns the old stream
    root = logging.getLogger()
    root.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        for h, stream in zip(moved, streams, strict=True):
            h.setStream(stream)
        file.close()
