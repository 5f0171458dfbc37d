"""frozen(): the engine not being timed is stopped, every process of its group, and continued after."""

import subprocess
import sys
import time

import psutil

from enginetui.bench.frozen import frozen

# A session leader with a child of its own, both asleep, as vLLM's runner and its EngineCore are.
FAMILY = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"


def status_of_all(root: psutil.Process) -> set[str]:
    return {p.status() for p in [root, *root.children(recursive=True)]}


def eventually(check) -> bool:
    """A child starts, and a signal reaches a process, a moment later: wait (a few seconds at most) for `check`."""
    deadline = time.monotonic() + 10
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()


def test_every_process_of_the_group_is_stopped_inside_and_continued_after():
    proc = subprocess.Popen([sys.executable, "-c", FAMILY], start_new_session=True)
    root = psutil.Process(proc.pid)
    try:
        # Both asleep, not merely forked: a parent still inside vfork, whose child is stopped before its
        # exec, waits uninterruptibly ("disk-sleep") and never shows as stopped.
        both_asleep = lambda: bool(root.children()) and status_of_all(root) == {psutil.STATUS_SLEEPING}  # noqa: E731
        assert eventually(both_asleep), "the family never settled into its sleep"
        with frozen(proc):
            assert eventually(lambda: status_of_all(root) == {psutil.STATUS_STOPPED})
        assert eventually(lambda: psutil.STATUS_STOPPED not in status_of_all(root))
    finally:
        for p in [*root.children(recursive=True), root]:
            p.kill()
        proc.wait()


def test_a_group_that_ended_is_skipped():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    with frozen(proc):
        pass
