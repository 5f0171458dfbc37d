"""The wire messages round-trip through msgpack; the event publisher never blocks, and a subscriber
that falls behind loses only its own events, which it counts."""

import time

import msgspec
import pytest
import zmq

from enginetui.core.engine import wire
from enginetui.core.engine.control import ControlError
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.event_publisher import EventPublisher
from enginetui.core.engine.events import SCHEMA_VERSION, MissedEvents, StepEvent, decode_event
from enginetui.core.outputs import EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest
from enginetui.core.sampling_params import SamplingParams

pytestmark = pytest.mark.timeout(30)


def make_event(step: int, pad: int = 0, kind: str = "step", seq: int | None = None) -> StepEvent:
    return StepEvent(
        version=SCHEMA_VERSION,
        seq=step if seq is None else seq,
        kind=kind,
        step=step,
        time=time.time(),
        paused=False,
        sched_ms=0.1,
        exec_ms=1.0,
        update_ms=0.1,
        token_budget=256,
        max_num_seqs=8,
        num_scheduled_tokens=0,
        num_prefill_tokens=0,
        num_decode_tokens=0,
        scheduled={},
        added=[],
        admitted=[],
        chunks=[],
        new_token_ids={},
        running=[],
        waiting=[],
        num_blocks=64,
        block_size=16,
        num_free_blocks=64,
        num_cached_free_blocks=0,
        shared_blocks=[],
        cached_free_blocks=list(range(pad)),
        blocks_allocated=[],
        blocks_freed=[],
        preempted=[],
        finished=[],
        rejected=[],
        prefix_cache_queries=0,
        prefix_cache_hits=0,
        num_dropped_events=0,
        total_output_tokens=0,
        total_preemptions=0,
        step_interval_ms=0.0,
    )


def test_input_and_output_messages_round_trip():
    req = EngineCoreRequest(
        request_id="r1",
        prompt_token_ids=[1, 2, 3],
        eos_token_ids=[2],
        arrival_time=1.5,
        sampling_params=SamplingParams(temperature=0.5, max_tokens=7, stop=["x"]),
        priority=3,
    )
    for msg in (
        wire.AddRequest(request=req),
        wire.AbortRequests(request_ids=["a", "b"]),
        wire.Control(call_id=4, op="step_once"),
        wire.Control(call_id=5, op="set_step_interval", value=0.25),
        wire.Shutdown(),
    ):
        assert wire.decode_input(wire.encode(msg)) == msg
    info = EngineInfo(
        model_name="m",
        model_dir=None,
        architecture="OPTForCausalLM",
        num_parameters=1000,
        kv_bytes_per_token=96,
        vocab_size=10,
        max_model_len=32,
        num_blocks=4,
        block_size=16,
        device="cpu",
        dtype="float32",
        eos_token_ids=[2],
        default_sampling={"temperature": 0.6},
        pid=123,
    )
    outs = EngineCoreOutputs(
        outputs=[EngineCoreOutput(request_id="r1", new_token_ids=[5], finish_reason="length")], step=9, timestamp=2.0
    )
    for msg in (
        wire.Ready(info=info),
        wire.StartupFailed(error="ValueError: no"),
        wire.Outputs(outputs=outs),
        wire.ControlReply(call_id=4, step=9, result=make_event(9, kind="snapshot")),
        wire.ControlReply(call_id=5, step=9, result=True),
        wire.ControlReply(call_id=6, step=9),
        wire.ControlReply(call_id=7, step=9, error=ControlError(code="bad_call", message="no such op")),
        wire.EngineFailed(error="boom"),
    ):
        assert wire.decode_output(wire.encode(msg)) == msg
    with pytest.raises(msgspec.ValidationError):  # an input message is not an output message
        wire.decode_output(wire.encode(wire.Shutdown()))


def subscriber(ctx: zmq.Context, address: str, rcvhwm: int) -> zmq.Socket:
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.RCVHWM, rcvhwm)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    return sock


def test_a_stuck_subscriber_loses_only_its_own_events(tmp_path):
    """The publisher never waits; a subscriber that stops reading loses events, the one that
    keeps reading gets every one, and each counts its own gaps."""
    address = f"ipc://{tmp_path}/ev"
    ctx = zmq.Context()
    try:
        pub = EventPublisher(ctx, address, hwm=2)
        pub.publish(make_event(0))  # no subscriber yet: sent into the void
        stuck, live = subscriber(ctx, address, 1), subscriber(ctx, address, 1)
        deadline = time.monotonic() + 5
        joined = 0
        while joined < 2:  # XPUB reports both subscriptions
            joined += pub.new_subscribers()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        live_missed, live_steps = MissedEvents(), []
        t0 = time.monotonic()
        for step in range(1, 3001):
            pub.publish(make_event(step, pad=500))
            assert live.poll(2000)  # the live reader takes each event as it comes
            live_steps.append(live_missed.mark(decode_event(live.recv())).step)
        assert time.monotonic() - t0 < 10  # never waited for the stuck one
        stuck_missed, stuck_events = MissedEvents(), []
        while stuck.poll(200):  # the stuck one reads what was queued for it: far from everything
            stuck_events.append(stuck_missed.mark(decode_event(stuck.recv())))
        assert 0 < len(stuck_events) < 3000
        for step in range(3001, 3201):  # it reads again: the next event it gets shows the gap
            pub.publish(make_event(step))
            assert live.poll(2000)
            live_steps.append(live_missed.mark(decode_event(live.recv())).step)
            if stuck.poll(50):
                stuck_events.append(stuck_missed.mark(decode_event(stuck.recv())))
                break
        assert live_steps == list(range(1, step + 1)) and live_missed.total == 0
        assert stuck_events[-1].num_dropped_events > 0 and stuck_missed.total > 0
        first, last = stuck_events[0].step, stuck_events[-1].step
        assert len(stuck_events) + stuck_missed.total == last - first + 1
        stuck.close()
        live.close()
        pub.close()
    finally:
        ctx.destroy(linger=0)


def test_missed_events_are_counted_from_seq_gaps_and_snapshot_replies_only_move_the_mark():
    missed = MissedEvents()
    reply = make_event(4, kind="snapshot")  # a control call's snapshot repeats the latest seq
    update = make_event(4, kind="update", seq=5)  # an update between steps takes a seq of its own
    seen = [
        missed.mark(e).num_dropped_events
        for e in (
            make_event(3),
            make_event(4),
            reply,
            update,
            make_event(5, seq=6),
            make_event(8, seq=10),
            make_event(9, seq=11),
        )
    ]
    assert seen == [0, 0, 0, 0, 0, 3, 0] and missed.total == 3
