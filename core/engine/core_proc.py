"""The EngineCore child process: `python -m enginetui.core.engine.core_proc`, started by core/engine/engine_host.py.

A fresh interpreter runs this module, so the parent's `__main__` (a script without a main guard,
stdin, `-c`, a REPL, a notebook) is never executed again here. The parent writes one
`wire.Launch` message to our stdin (config, socket addresses, its pid, where output goes); we
set up the process (signals, parent watchdog, output redirection, CPU allocator) and run the
same busy loop as the in-process engine (core/engine/busy_loop.py).
"""

import contextlib
import ctypes
import io
import logging
import os
import select
import signal
import sys
import threading
import time

WATCHDOG_INTERVAL_S = 0.25  # how often the child checks that its parent is alive, where it has no pidfd
log = logging.getLogger("enginetui.core_proc")


def main() -> None:
    from enginetui.core.engine import wire  # light: msgspec and the message types

    launch = wire.decode_launch(sys.stdin.buffer.read())
    addresses = launch.addresses
    if launch.log_file is not None:
        _redirect_output(launch.log_file)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the whole group; the parent decides
    signal.signal(signal.SIGTERM, lambda *_: _exit_now(addresses))  # terminate(), or the parent died
    if launch.set_pdeathsig:
        _set_pdeathsig()
    if os.getppid() != launch.parent_pid:
        os._exit(1)  # the parent died while we were starting
    threading.Thread(
        target=_watch_parent, args=(launch.parent_pid, addresses), name="parent-watchdog", daemon=True
    ).start()

    from enginetui.core.engine.busy_loop import serve
    from enginetui.core.worker.cpu_threads import thread_governor
    from enginetui.core.worker.cpu_tuning import tune_cpu_allocator

    governor = None
    if launch.config.torch_device.type == "cpu":  # process-wide: only in our own process, never in-process
        tune_cpu_allocator()
        governor = thread_governor()
    code = serve(launch.config, wire.EngineAddresses(*addresses), os.getpid(), governor=governor)
    log.info("EngineCore exiting (code %d)", code)
    _exit(code)


def _redirect_output(log_file: str) -> None:
    """Point file descriptors 1 and 2 (Python, C and Rust writers alike) at `log_file`, appended,
    and send logging and warnings there too, stamped with this process's id."""
    os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for stream, target in ((sys.stdout, 1), (sys.stderr, 2)):
        if stream is not None:
            stream.flush()
        os.dup2(fd, target)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True)  # was decided for a pipe; keep lines whole
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        force=True,
        format="%(asctime)s EngineCore[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    logging.captureWarnings(True)
    log.info("EngineCore starting (parent pid %d); its output goes to %s", os.getppid(), log_file)


def _exit(code: int) -> None:
    """Sockets are flushed and closed: skip interpreter teardown (slow with torch loaded, and
    nothing is left to clean up)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _watch_parent(parent_pid: int, addresses) -> None:
    """Exit as soon as the parent is gone. Where Linux gives a process file descriptor (pidfd,
    readable once the process has ended) this thread sleeps on it, never waking while the parent
    lives (a timer's wakes would stall the model's threads: core/engine/wake_queue.py); elsewhere
    it looks every WATCHDOG_INTERVAL_S whether we were re-parented (getppid() changes)."""
    try:
        pidfd = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):  # no pidfd on this system: look on a timer
        pidfd = None
    if pidfd is not None and os.getppid() == parent_pid:  # still our parent, so the pidfd is the parent's
        select.select([pidfd], [], [])
        _exit_now(addresses)
    while True:
        if os.getppid() != parent_pid:
            _exit_now(addresses)
        time.sleep(WATCHDOG_INTERVAL_S)


def _exit_now(addresses) -> None:
    """Leave at once, without the parent: remove the ipc files it can no longer remove."""
    paths = [a.removeprefix("ipc://") for a in addresses if a.startswith("ipc://")]
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
    for folder in {os.path.dirname(p) for p in paths}:
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only if empty
    os._exit(1)


def _set_pdeathsig() -> None:
    """Linux: have the kernel SIGTERM us when the parent (thread) exits. Best effort."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001, S110
        pass


if __name__ == "__main__":
    main()
