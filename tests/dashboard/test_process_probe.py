"""PsutilProbe: the process panel's reading of the EngineCore process."""

import os
import subprocess
import sys
import time

import psutil

from enginetui.dashboard.widgets.process_panel import PsutilProbe


def test_a_live_process_is_read_and_a_dead_unreaped_one_is_gone():
    probe = PsutilProbe()
    sample = probe(os.getpid())
    assert sample is not None and sample.pid == os.getpid() and sample.rss_mb > 0
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not yet waited for
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.02)
        assert probe(child.pid) is None  # a killed EngineCore before the client reaps it: not "0 MB"
    finally:
        child.wait()
    assert probe(child.pid) is None  # reaped: no such process
