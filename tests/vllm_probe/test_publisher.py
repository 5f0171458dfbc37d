"""The probe's socket knows who listens: nothing is built while nobody does (and after the last one leaves)."""

import time

import msgspec
import zmq

from enginetui.core.engine.events import MissedEvents, decode_event
from enginetui.vllm_probe.config import ProbeConfig
from enginetui.vllm_probe.probe import Probe
from tests.vllm_probe.fake_probe import FIXTURE, read_events


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
            assert wait_until(lambda expected=expected: probe.poll_subscribers() == expected)
        for expected in (1, 0):
            subs.pop().close(linger=0)
            assert wait_until(lambda expected=expected: probe.poll_subscribers() == expected)
    finally:
        for sub in subs:
            sub.close(linger=0)
        probe.close()


def test_a_subscriber_that_stops_reading_loses_events_and_never_holds_the_probe_up(tmp_path):
    event = read_events(FIXTURE)[-1]
    probe = Probe(ProbeConfig(f"ipc://{tmp_path}/probe.sock", hwm=4))
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 4)
    sub.connect(probe.address)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        assert wait_until(lambda: probe.poll_subscribers() == 1)
        for seq in range(1, 2001):  # the subscriber reads none of them meanwhile
            probe._publish(msgspec.structs.replace(event, seq=seq))
        missed, seqs = MissedEvents(), []
        while sub.poll(500 if seqs else 10_000):  # the first may be slow to come on a busy machine
            seqs.append(missed.mark(decode_event(sub.recv())).seq)
        assert seqs == sorted(seqs) and len(seqs) < 2000
        # The drops may all be at the end of the burst: the next event, once the subscriber reads again, shows them.
        probe._publish(msgspec.structs.replace(event, seq=2001))
        assert sub.poll(10_000)
        seqs.append(missed.mark(decode_event(sub.recv())).seq)
        assert seqs[-1] == 2001 and missed.total == 2001 - len(seqs) > 0  # every gap counted
    finally:
        sub.close(linger=0)
        probe.close()
