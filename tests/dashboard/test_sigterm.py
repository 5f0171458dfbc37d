"""`kill PID` (SIGTERM) on the dashboard quits it as its quit key does: the terminal leaves the app's
screen, the command exits 0, and its EngineCore is shut down (Python's default would die at once,
leaving the terminal in the alternate screen)."""

import os
import pty
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.support.checkout import REPO_ROOT

START_TIMEOUT_S = 180.0  # the engine's start and the first frame, on a machine busy with other tests
EXIT_TIMEOUT_S = 60.0
ENTER_ALT_SCREEN, LEAVE_ALT_SCREEN = b"\x1b[?1049h", b"\x1b[?1049l"


@pytest.mark.parametrize(
    "ready",
    [
        ENTER_ALT_SCREEN,  # the moment the app takes the terminal, while it still mounts its widgets
        b"KV block pool",  # its first frame drawn
    ],
    ids=["while-mounting", "drawn"],
)
def test_sigterm_quits_the_dashboard_and_restores_the_terminal(tiny_opt_dir, ready):
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color"}
    app = subprocess.Popen(
        [sys.executable, "-m", "enginetui", "--model", tiny_opt_dir, "--num-gpu-blocks-override", "64"],
        cwd=REPO_ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    drawn = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the app closed the terminal's last writer
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (ready in drawn and ENTER_ALT_SCREEN in drawn):
            assert app.poll() is None, bytes(drawn)[-2000:]
            assert time.monotonic() < deadline, "the dashboard never drew"
            time.sleep(0.01)
        engine = psutil.Process(app.pid).children(recursive=True)  # started before the app takes the terminal
        assert engine
        entered = len(drawn)
        app.send_signal(signal.SIGTERM)
        assert app.wait(timeout=EXIT_TIMEOUT_S) == 0, bytes(drawn)[-3000:].decode(errors="replace")
    finally:
        if app.poll() is None:
            app.kill()
        reader.join(timeout=5)
        os.close(master)
    assert LEAVE_ALT_SCREEN in drawn[entered:]  # the terminal is back to the shell's screen
    gone, alive = psutil.wait_procs(engine, timeout=10)
    assert not alive, [p.pid for p in alive]
