"""The probe's socket knows who listens: nothing is built while nobody does (and after the last one leaves)."""

import time

import zmq

from enginetui.vllm_probe.config import ProbeConfig
from enginetui.vllm_probe.probe import Probe


def wait_until(done, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_subscribers_are_counted_as_they_join_and_leave(tmp_path):
    probe = Probe(ProbeConfig(f"ipc://{tmp_path}/probe.sock"))
    ctx = zmq.Context.instance()
    subs = []
    try:
        assert probe.poll_subscribers() == 0
        for expected in (1, 2):
            sub = ctx.socket(zmq.SUB)
            sub.connect(probe.address)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            subs.append(sub)
            assert wait_until(lambda: probe.poll_subscribers() == expected)
        for expected in (1, 0):
            subs.pop().close(linger=0)
            assert wait_until(lambda: probe.poll_subscribers() == expected)
    finally:
        for sub in subs:
            sub.close(linger=0)
        probe.close()
