"""The wire messages round-trip through msgpack; the event publisher never blocks and counts drops."""

import time

import msgspec
import pytest
import zmq

from core.engine import wire
from core.engine.event_publisher import EventPublisher
from core.engine.events import SCHEMA_VERSION, StepEvent, decode_event
from core.engine.processor import EngineInfo
from core.outputs import EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest
from core.sampling_params import SamplingParams

pytestmark = pytest.mark.timeout(30)


def make_event(step: int, pad: int = 0) -> StepEvent:
    return StepEvent(
        version=SCHEMA_VERSION, step=step, time=time.time(), is_snapshot=False, paused=False, sched_ms=0.1,
        exec_ms=1.0, update_ms=0.1, token_budget=256, max_num_seqs=8, num_scheduled_tokens=0,
        num_prefill_tokens=0, num_decode_tokens=0, scheduled={}, running=[], waiting=[], num_blocks=64,
        block_size=16, num_free_blocks=64, num_cached_free_blocks=0, shared_blocks=[],
        cached_free_blocks=list(range(pad)), blocks_allocated=[], blocks_freed=[], preempted=[], finished=[],
        rejected=[], prefix_cache_queries=0, prefix_cache_hits=0, num_dropped_events=0, total_output_tokens=0,
    )


def test_input_and_output_messages_round_trip():
    req = EngineCoreRequest(request_id="r1", prompt_token_ids=[1, 2, 3], eos_token_id=2, arrival_time=1.5,
                            sampling_params=SamplingParams(temperature=0.5, max_tokens=7, stop=["x"]), priority=3)
    for msg in (wire.AddRequest(request=req), wire.AbortRequests(request_ids=["a", "b"]),
                wire.Control(call_id=4, op="step"), wire.Shutdown()):
        assert wire.decode_input(wire.encode(msg)) == msg
    info = EngineInfo(model_name="m", model_dir=None, vocab_size=10, max_model_len=32, num_blocks=4, block_size=16,
                      device="cpu", dtype="float32", eos_token_id=2, pid=123)
    outs = EngineCoreOutputs(outputs=[EngineCoreOutput(request_id="r1", new_token_ids=[5], finish_reason="length")],
                             step=9, timestamp=2.0)
    for msg in (wire.Ready(info=info), wire.StartupFailed(error="ValueError: no"), wire.Outputs(outputs=outs),
                wire.ControlReply(call_id=4, step=9, snapshot=make_event(9)), wire.EngineFailed(error="boom")):
        assert wire.decode_output(wire.encode(msg)) == msg
    with pytest.raises(msgspec.ValidationError):  # an input message is not an output message
        wire.decode_output(wire.encode(wire.Shutdown()))


def test_publisher_never_blocks_and_reports_drops(tmp_path):
    ctx = zmq.Context()
    try:
        pub = EventPublisher(ctx, f"ipc://{tmp_path}/ev", hwm=2)
        assert pub.publish(make_event(0))  # no subscriber: sent into the void, not a drop
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 1)
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect(f"ipc://{tmp_path}/ev")
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        deadline = time.monotonic() + 5
        while not pub.new_subscribers():  # XPUB reports the subscription
            assert time.monotonic() < deadline
            time.sleep(0.01)
        t0 = time.monotonic()
        sent = [pub.publish(make_event(step, pad=500)) for step in range(1, 3001)]  # a subscriber that never reads
        assert time.monotonic() - t0 < 10  # never waited for it
        assert not all(sent) and pub.total_drops > 0 and pub.pending_drops > 0
        while sub.poll(200):  # the subscriber catches up
            sub.recv()
        for _ in range(100):  # the pipe reopens asynchronously; a failed try is one more drop
            dropped = pub.pending_drops
            if pub.publish(make_event(5000)):
                break
            time.sleep(0.05)
        got = None
        while sub.poll(1000):
            got = decode_event(sub.recv())
            if got.step == 5000:
                break
        assert got is not None and got.step == 5000 and got.num_dropped_events == dropped
        assert pub.pending_drops == 0
        sub.close()
        pub.close()
    finally:
        ctx.destroy(linger=0)
