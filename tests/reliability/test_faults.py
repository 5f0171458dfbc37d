"""Faults from outside the engine: a subscriber that stops reading must not affect it."""

import time

import zmq

from core import LLM, SamplingParams
from core.engine.events import decode_event


def test_a_subscriber_that_stops_reading_never_slows_or_blocks_the_engine(tiny_opt_dir):
    llm = LLM(model=tiny_opt_dir, skip_tokenizer_init=True, num_gpu_blocks_override=64, multiprocess=True)
    ctx = zmq.Context()
    stuck = ctx.socket(zmq.SUB)  # subscribes, reads one event, then never again
    stuck.setsockopt(zmq.RCVHWM, 1)
    stuck.setsockopt(zmq.SUBSCRIBE, b"")
    stuck.connect(llm.engine.client.events_address)
    try:
        time.sleep(0.5)  # let the subscription reach the publisher
        params = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
        prompts = [[2] + list(range(10 + i, 40 + i)) for i in range(24)]
        outs = llm.generate(prompts, params, use_tqdm=False)
        assert all(len(o.outputs[0].token_ids) == 64 for o in outs)
        stuck.poll(2000)
        first = decode_event(stuck.recv())
        assert first.version >= 1
        # The engine kept going; the drops it could not deliver are counted in its later events.
        snapshot = llm.engine.client.snapshot()
        assert snapshot.step > 64 and snapshot.num_free_blocks == 64
        assert snapshot.num_dropped_events > 0
    finally:
        stuck.close(linger=0)
        ctx.term()
        llm.shutdown()
