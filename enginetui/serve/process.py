"""`enginetui serve ...` as a child process (for `enginetui bench serve` and the server tests).

Started with `--port 0` (unless asked otherwise), its URL read from the line it prints once it
listens; stopped with a signal, after which neither it nor any process it started may remain.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import psutil

STARTUP_TIMEOUT_S = 300.0  # model load on a busy machine; a healthy start takes seconds
STOP_TIMEOUT_S = 20.0  # SIGTERM / SIGINT to exit, open streams included
CHILD_EXIT_S = 5.0  # for its children (EngineCore, multiprocessing's resource tracker) to follow it
SERVING_LINE = re.compile(r"serving '.*' on (http://\S+?)(;| \()")  # what run_serve prints once it listens


class ServeProcess:
    """One `python -m enginetui serve` child."""

    def __init__(
        self,
        *args: str,
        port_arg: bool = True,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        python: str = sys.executable,
    ) -> None:
        """`args` follow `serve --host 127.0.0.1` (and `--port 0` unless port_arg is False); `python` is the
        interpreter whose enginetui runs."""
        cmd = [
            python,
            "-m",
            "enginetui",
            "serve",
            "--host",
            "127.0.0.1",
            *(["--port", "0"] if port_arg else []),
            "--uvicorn-log-level",
            "warning",
            *args,
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}
        )
        self.lines: list[str] = []  # everything it printed
        self.url = self._wait_for_url()  # http://127.0.0.1:PORT
        self.children = [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]  # EngineCore & co

    def _wait_for_url(self) -> str:
        found: list[str] = []
        ready = threading.Event()
        stdout = self.proc.stdout
        assert stdout is not None  # a pipe

        def read() -> None:
            for line in stdout:
                self.lines.append(line)
                match = SERVING_LINE.search(line)
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
            ready.set()  # it exited

        threading.Thread(target=read, name="serve-output", daemon=True).start()
        ready.wait(STARTUP_TIMEOUT_S)
        if not found:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("`enginetui serve` did not start:\n" + "".join(self.lines))
        return found[0]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it and wait for it to exit; its exit code. Raises RuntimeError if it or a process it
        started outlives it (those are killed first)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("`enginetui serve` did not exit on its signal:\n" + "".join(self.lines)) from None
        lingering = [pid for pid in self.children if not wait_gone(pid, CHILD_EXIT_S)]
        for pid in lingering:
            psutil.Process(pid).kill()
        if lingering:
            raise RuntimeError(f"processes left behind by `enginetui serve`: {lingering}")
        return code


def wait_gone(pid: int, timeout: float) -> bool:
    """True once no live (non-zombie) process has this pid, within `timeout` seconds. Never reaps."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
