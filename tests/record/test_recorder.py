"""Recording a real engine: the file holds every event the engine published, equal event for
event to what a subscriber received, and what a viewer needs to show text."""

import asyncio

import pytest

from enginetui.core import LLM, SamplingParams
from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.events import encode_event
from enginetui.core.record.reader import read_recording
from enginetui.core.record.tokenizer_files import unpack_tokenizer
from tests.support.event_capture import recorded_events

pytestmark = pytest.mark.timeout(120)
PROMPTS = ["The function returns", "A class is", "In Python, a dictionary maps keys to values and"]
# Long outputs into a 12-block pool: chunked prefill, preemption and recompute all happen.
ENGINE = dict(num_gpu_blocks_override=12, max_num_batched_tokens=16, max_num_seqs=4, block_size=16, seed=0)


@pytest.mark.parametrize("multiprocess", [True, False], ids=["multiproc", "inproc"])
def test_the_recording_equals_what_a_subscriber_received_event_for_event(tmp_path, text_opt_dir, multiprocess):
    path = tmp_path / "run.etrec"
    llm = LLM(text_opt_dir, multiprocess=multiprocess, record=path, **ENGINE)
    try:
        with recorded_events(llm.engine) as received:  # an unbounded subscriber beside the recorder
            outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
        summary = llm.stop_recording()
    finally:
        llm.shutdown()
    rec = read_recording(path)
    assert summary.num_events == len(rec) and summary.missed_events == 0
    assert rec.trailer is not None and rec.trailer.missed_events == 0 and rec.describe_problems() == []
    events = list(rec.events())
    # The recorder subscribed first: its greeting snapshot, then exactly the subscriber's stream.
    assert events[0].is_snapshot and events[1 : 1 + len(received)] == received
    assert [rec.encoded(i) for i in range(len(rec))] == [encode_event(e) for e in events]  # bytes as published
    assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events)))  # no gaps
    assert any(e.preempted for e in events) and any(c.num_remaining for e in events for c in e.chunks)
    # Every generated token is in the events, in order, and the tokenizer in the file makes the text.
    tokens = {}
    for e in events:
        for req_id, ids in e.new_token_ids.items():
            tokens.setdefault(req_id, []).extend(ids)
    assert [tokens[o.request_id] for o in outs] == [list(o.outputs[0].token_ids) for o in outs]
    tokenizer = unpack_tokenizer(rec.header.tokenizer)
    added = {a.req_id: a.prompt_token_ids for e in events for a in e.added}
    assert [tokenizer.decode(added[o.request_id], skip_special_tokens=True) for o in outs] == PROMPTS
    assert [tokenizer.decode(tokens[o.request_id], skip_special_tokens=True) for o in outs] == [
        o.outputs[0].text for o in outs
    ]
    assert rec.header.source == "LLM" and rec.header.engine.num_blocks == 12
    assert rec.header.config["max_num_batched_tokens"] == 16


def test_the_file_is_complete_after_each_generate_and_closed_by_shutdown(tmp_path, text_opt_dir):
    path = tmp_path / "run.etrec"
    llm = LLM(text_opt_dir, multiprocess=False, record=path, **ENGINE)
    try:
        llm.generate("Once", SamplingParams(max_tokens=5, ignore_eos=True), use_tqdm=False)
        open_rec = read_recording(path)  # read while still recording
        assert open_rec.trailer is None and open_rec.event(len(open_rec) - 1).finished
        latest = llm.engine.snapshot().seq
        assert open_rec.heads[-1].seq == latest
    finally:
        llm.shutdown()
    closed = read_recording(path)
    assert closed.trailer is not None and len(closed) >= len(open_rec)


def test_recording_needs_step_events(tmp_path, text_opt_dir):
    with pytest.raises(ValueError, match="recording needs step events"):
        LLM(text_opt_dir, multiprocess=False, record=tmp_path / "x.etrec", enable_step_events=False)


async def test_async_llm_records_from_the_start_and_on_demand(tmp_path, text_opt_dir):
    first, second = tmp_path / "first.etrec", tmp_path / "second.etrec"
    engine = AsyncLLM.from_engine_args(model=text_opt_dir, multiprocess=False, record=first, **ENGINE)
    try:

        async def run(request_id: str) -> list[int]:
            async for out in engine.generate("A function", SamplingParams(max_tokens=6, ignore_eos=True), request_id):  # noqa: B007 (the last output is kept)
                pass
            return list(out.outputs[0].token_ids)

        a = await run("a")
        summary = await engine.stop_recording()
        assert summary.path == str(first) and summary.missed_events == 0
        assert await engine.stop_recording() is None  # not recording any more
        engine.start_recording(second)
        with pytest.raises(RuntimeError, match="already recording"):
            engine.start_recording(tmp_path / "third.etrec")
        b = await run("b")
        await asyncio.sleep(0.2)  # shutdown keeps what has arrived
    finally:
        engine.shutdown()
    for path, req_id, tokens in ((first, "a", a), (second, "b", b)):
        rec = read_recording(path)
        assert rec.trailer is not None and rec.header.source == "AsyncLLM"
        got = [t for e in rec.events() for t in e.new_token_ids.get(req_id, [])]
        assert got == tokens
        assert not any(e.new_token_ids.get("b" if req_id == "a" else "a") for e in rec.events())
