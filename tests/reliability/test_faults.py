"""Faults from outside the engine: a subscriber that stops reading must not affect it."""

import time

import zmq

from enginetui.bench.event_counter import EventCounter
from enginetui.core import LLM, SamplingParams
from enginetui.core.engine.events import MissedEvents, decode_event


def test_a_subscriber_that_stops_reading_never_slows_the_engine_or_other_subscribers(tiny_opt_dir):
    llm = LLM(model=tiny_opt_dir, skip_tokenizer_init=True, num_gpu_blocks_override=64, multiprocess=True)
    address = llm.engine.client.events_address
    ctx = zmq.Context()
    stuck = ctx.socket(zmq.SUB)  # subscribes, then reads nothing until the end
    stuck.setsockopt(zmq.RCVHWM, 1)
    stuck.setsockopt(zmq.SUBSCRIBE, b"")
    stuck.connect(address)
    live = EventCounter(address)  # a subscriber that keeps up, as the dashboard does
    try:
        time.sleep(0.5)  # let the stuck subscription reach the publisher
        start = llm.engine.snapshot().step
        params = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
        prompts = [[2] + list(range(10 + i, 40 + i)) for i in range(24)]
        outs = llm.generate(prompts, params, use_tqdm=False)
        assert all(len(o.outputs[0].token_ids) == 64 for o in outs)
        end = llm.engine.snapshot()
        assert end.step > start + 64 and end.num_free_blocks == 64  # the engine kept going
        live.wait_for_step(end.step)
        counts = live.counts(start, end.step)
        assert counts.missed == 0 and counts.steps == end.step - start  # the live one got every event

        missed, got = MissedEvents(), []
        while stuck.poll(500):  # what was queued for the stuck one: only the first events
            got.append(missed.mark(decode_event(stuck.recv())))
        assert got and got[-1].seq < end.seq
        llm.generate([[2, 5, 6, 7]], SamplingParams(temperature=0, max_tokens=2), use_tqdm=False)
        assert stuck.poll(5000)  # reading again, its next event shows what it missed
        nxt = missed.mark(decode_event(stuck.recv()))
        assert nxt.seq > end.seq and nxt.num_dropped_events == nxt.seq - got[-1].seq - 1 > 0
    finally:
        live.close()
        stuck.close(linger=0)
        ctx.term()
        llm.shutdown()
