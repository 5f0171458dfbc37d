"""Where EngineCore runs: a child process (the default) or a thread of this process (debugging).

Either way the client binds the same two sockets (ipc://), EngineCore's busy loop
(core/engine/busy_loop.py) connects to them and answers the handshake, and the client talks
to it with the same messages; only starting, liveness and stopping differ:

    EngineProcess  `python -m enginetui.core.engine.core_proc` in a fresh interpreter (the caller's
                   `__main__` is never re-run), ended on every path: shutdown(), garbage
                   collection, interpreter exit, and its own watchdog if this process dies
    EngineThread   the busy loop on a daemon thread here (ENGINETUI_MULTIPROC=0)
"""

import collections
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, cast

import msgspec
import zmq

from enginetui.core.config import EngineConfig
from enginetui.core.engine import wire
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.errors import EngineDeadError, EngineStartupError
from enginetui.core.worker.cpu_threads import engine_process_env

log = logging.getLogger("enginetui.engine_host")

POLL_MS = 100  # longest a blocking read waits before checking that EngineCore is alive
STARTUP_TIMEOUT_ENV = "ENGINETUI_STARTUP_TIMEOUT"  # seconds to wait for READY (default 600)
SHUTDOWN_TIMEOUT_S = 5.0  # how long a clean shutdown may take before terminate / kill
STDERR_TAIL_LINES = 20  # lines of the child's stderr kept to explain a failed start-up
CHILD_MODULE = "enginetui.core.engine.core_proc"  # what the child interpreter runs
PACKAGE_ROOT = str(
    Path(cast(str, sys.modules["enginetui"].__file__)).resolve().parents[1]
)  # holds `enginetui`: the child imports it from here too


class EngineHost:
    """The client's end of one EngineCore: its sockets, the handshake, liveness and shutdown."""

    def __init__(self, ctx: zmq.Context) -> None:
        self.ctx = ctx  # the client's zmq context (destroyed by shutdown())
        self.tmpdir = tempfile.mkdtemp(prefix="enginetui-")  # holds the ipc socket files
        self.addresses = wire.EngineAddresses(
            input=f"ipc://{self.tmpdir}/input",
            output=f"ipc://{self.tmpdir}/output",
            events=f"ipc://{self.tmpdir}/events",
        )
        self.in_sock = ctx.socket(zmq.PUSH)  # requests and control to EngineCore
        self.in_sock.setsockopt(zmq.LINGER, 0)
        self.in_sock.bind(self.addresses.input)
        self.out_sock = ctx.socket(zmq.PULL)  # outputs and replies from EngineCore
        self.out_sock.setsockopt(zmq.LINGER, 0)
        self.out_sock.bind(self.addresses.output)
        self.sockets: list = [self.in_sock, self.out_sock]  # closed at shutdown
        self.dead: EngineDeadError | None = None  # set once EngineCore is known dead or shut down
        self.closed = False  # shut down on purpose
        self.pid: int | None = None  # EngineCore's process id (None when it runs in this process)
        self.info: EngineInfo | None = None  # from READY

    # ---- subclasses --------------------------------------------------------------------------

    name = "EngineCore"  # how errors name it

    def is_alive(self) -> bool:
        raise NotImplementedError

    @property
    def exit_code(self) -> int | None:
        """EngineCore's exit code once it ended (negative: the signal that killed it)."""
        raise NotImplementedError

    def _stop(self, timeout: float) -> None:
        """Make EngineCore end (it was asked to with a Shutdown message already)."""
        raise NotImplementedError

    # ---- shared ------------------------------------------------------------------------------

    def handshake(self, timeout: float | None) -> EngineInfo:
        timeout = timeout if timeout is not None else float(os.environ.get(STARTUP_TIMEOUT_ENV, "600"))
        deadline = time.monotonic() + timeout
        while True:
            if self.out_sock.poll(POLL_MS):
                msg = wire.decode_output(self.out_sock.recv())
                if isinstance(msg, wire.Ready):
                    self.info = msg.info
                    return msg.info
                if isinstance(msg, wire.StartupFailed):
                    raise self._startup_error(msg.error)
                raise EngineStartupError(f"EngineCore sent {type(msg).__name__} before READY")
            if not self.is_alive():
                if self.out_sock.poll(0):
                    continue  # it said something before exiting: read that first
                raise EngineStartupError(
                    f"{self.name} exited with code {self.exit_code} before it was ready{self._startup_clues()}"
                )
            if time.monotonic() > deadline:
                raise EngineStartupError(
                    f"EngineCore did not become ready within {timeout:.0f} s (set {STARTUP_TIMEOUT_ENV} to wait longer)"
                )

    def _startup_clues(self) -> str:
        """What the host saw of a failed start-up (e.g. the child's last stderr lines)."""
        return ""

    def _startup_error(self, error: str) -> BaseException:
        """What to raise when EngineCore reports that it failed to start with `error`."""
        return EngineStartupError(f"EngineCore failed to start: {error}")

    def check(self) -> None:
        """Raise EngineDeadError if EngineCore is gone (or was shut down)."""
        if self.dead is not None:
            raise self.dead
        if not self.is_alive():
            self.dead = EngineDeadError(f"{self.name} died unexpectedly (exit code {self.exit_code})")
            raise self.dead

    def failed(self, error: str) -> EngineDeadError:
        """The error for an EngineFailed message (a step raised inside EngineCore)."""
        self.dead = EngineDeadError(f"{self.name} failed and exited: {error}")
        return self.dead

    def send_nowait(self, msg: msgspec.Struct) -> bool:
        """Try to queue one input message without blocking; False if the socket is full / unconnected."""
        self.check()
        try:
            self.in_sock.send(wire.encode(msg), zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def shutdown(self, timeout: float = SHUTDOWN_TIMEOUT_S) -> None:
        """End EngineCore (ask, wait, then force), close the sockets, remove the ipc files. Idempotent."""
        self.closed = True
        if self.dead is None:
            self.dead = EngineDeadError("EngineCore was shut down")
        try:
            if self.is_alive():
                try:
                    self.in_sock.send(wire.encode(wire.Shutdown()), zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass
                self._stop(timeout)
        finally:
            for sock in list(self.sockets):
                try:
                    sock.close(linger=0)
                except Exception:  # noqa: BLE001, S110 - closing at exit must not raise
                    pass
            try:
                self.ctx.destroy(linger=0)
            except Exception:  # noqa: BLE001, S110
                pass
            shutil.rmtree(self.tmpdir, ignore_errors=True)


class EngineProcess(EngineHost):
    """EngineCore in a fresh interpreter (`python -m enginetui.core.engine.core_proc`)."""

    def __init__(
        self,
        config: EngineConfig,
        ctx: zmq.Context,
        startup_timeout: float | None = None,
        log_file: str | None = None,
        command: list[str] | None = None,
    ) -> None:
        """`command` replaces the child's command line (tests start stand-ins that never get ready)."""
        super().__init__(ctx)
        self.log_file = os.path.abspath(log_file) if log_file else None  # where the child's output goes
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)  # its last lines
        # PDEATHSIG fires when the *thread* that started the child exits: only safe from the main thread.
        on_main_thread = threading.current_thread() is threading.main_thread()
        launch = wire.Launch(
            config=config,
            addresses=tuple(self.addresses),
            parent_pid=os.getpid(),
            set_pdeathsig=on_main_thread,
            log_file=self.log_file,
        )
        self.proc: subprocess.Popen | None = None  # EngineCore's process
        try:
            proc = self.proc = subprocess.Popen(
                command or [sys.executable, "-m", CHILD_MODULE],
                stdin=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_child_env() | engine_process_env(config),
                close_fds=True,
            )
            assert proc.stdin is not None and proc.stderr is not None  # both are pipes
            self.pid = proc.pid
            self.name = f"EngineCore process (pid {self.pid})"
            threading.Thread(
                target=self._forward_stderr, args=(proc.stderr,), name="engine-stderr", daemon=True
            ).start()
            try:
                proc.stdin.write(wire.encode(launch))
                proc.stdin.close()
            except BrokenPipeError:  # it died at once: the handshake says how
                pass
            self.handshake(startup_timeout)
        except BaseException:
            self.shutdown(timeout=1.0)
            raise

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def _startup_clues(self) -> str:
        time.sleep(0.05)  # let the stderr forwarder take the last lines
        clues = ""
        if self.stderr_tail:
            clues += "; its last output:\n" + "\n".join(self.stderr_tail)
        if self.log_file:
            clues += f"\n(its log: {self.log_file})"
        return clues

    def _forward_stderr(self, stderr: IO[bytes]) -> None:
        """Copy the child's stderr to ours line by line, keeping the last lines for start-up errors."""
        for raw in stderr:
            line = raw.decode("utf-8", "replace")
            self.stderr_tail.append(line.rstrip("\n"))
            try:
                sys.stderr.write(line)
            except (OSError, ValueError):  # our stderr is closed: keep draining the pipe
                pass

    def _stop(self, timeout: float) -> None:
        proc = self.proc
        if proc is None:
            return  # never started
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("EngineCore (pid %s) did not exit in %.0f s; terminating it", proc.pid, timeout)
            proc.terminate()
            try:
                proc.wait(2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(2.0)


class EngineThread(EngineHost):
    """EngineCore's busy loop on a daemon thread of this process (same code, same sockets)."""

    def __init__(self, config: EngineConfig, ctx: zmq.Context, startup_timeout: float | None = None) -> None:
        from enginetui.core.engine.busy_loop import serve  # torch and the model code: only for an engine in-process

        super().__init__(ctx)
        self.name = "EngineCore thread"
        self.code: int | None = None  # serve()'s result once the loop ended
        self.error: str | None = None  # what ended the thread, if it was an exception
        self.startup_exception: BaseException | None = None  # why building EngineCore failed, if it did
        self.core = None  # the EngineCore, once built: for tests and debugging, touch it only while idle
        self.thread = threading.Thread(target=self._run, args=(serve, config), name="EngineCore", daemon=True)
        try:
            self.thread.start()
            self.handshake(startup_timeout)
        except BaseException:
            self.shutdown(timeout=1.0)
            raise

    def _run(self, serve, config: EngineConfig) -> None:
        try:
            self.code = serve(
                config,
                self.addresses,
                os.getpid(),
                on_core=lambda core: setattr(self, "core", core),
                on_startup_error=lambda exc: setattr(self, "startup_exception", exc),
            )
        except BaseException as exc:  # serve() reports what it can; this is a bug in it: say so
            log.exception("EngineCore thread failed")
            self.error = wire.describe(exc)
            self.code = 1

    def _startup_clues(self) -> str:
        return f": {self.error}" if self.error else ""

    def _startup_error(self, error: str) -> BaseException:
        """In-process, the caller gets EngineCore's own exception, with its traceback (debugging)."""
        return self.startup_exception or super()._startup_error(error)

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    @property
    def exit_code(self) -> int | None:
        return self.code

    def _stop(self, timeout: float) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            log.warning("EngineCore thread did not end in %.0f s (a step still running?); leaving it", timeout)


def _child_env() -> dict[str, str]:
    """This process's environment, with `enginetui.core` importable from where this process took it."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + path if path else "")
    return env
