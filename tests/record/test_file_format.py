"""The recording file on its own: events come back as written, a file cut short or damaged reads
up to its last good event and says so, newer versions are refused with what to do."""

import struct

import msgspec
import pytest

from enginetui.core.engine.events import SCHEMA_VERSION, encode_event
from enginetui.core.record import format as fmt
from enginetui.core.record.reader import read_recording
from enginetui.core.record.writer import RecordingWriter
from enginetui.core.sched.step_shape import StepShape
from tests.dashboard.builders import event, progress
from tests.record.recordings import header, write

EVENTS = [event(step, running=[progress("r1", step * 4, 40, blocks=[1, 2, 3])], seq=step) for step in range(1, 8)]


def frame_offsets(data: bytes) -> list[int]:
    """Where each frame starts."""
    offsets, offset = [], fmt.PREAMBLE.size
    while offset < len(data):
        offsets.append(offset)
        length = struct.unpack_from("<I", data, offset)[0]
        offset += fmt.FRAME_HEAD.size + length
    return offsets


def test_events_come_back_exactly_as_written(tmp_path):
    rec = read_recording(write(tmp_path / "a.etrec", EVENTS))
    assert list(rec.events()) == EVENTS
    assert [rec.encoded(i) for i in range(len(rec))] == [encode_event(e) for e in EVENTS]
    assert [(h.seq, h.kind, h.step, h.time) for h in rec.heads] == [(e.seq, e.kind, e.step, e.time) for e in EVENTS]
    assert rec.header.engine.model_name == "fake-opt"
    assert rec.trailer is not None and rec.trailer.num_events == len(EVENTS)
    assert rec.problem is None and rec.describe_problems() == []


@pytest.mark.parametrize("cut", [1, 5, 9, -1])
def test_a_file_cut_short_loads_up_to_its_last_whole_event(tmp_path, cut):
    path = write(tmp_path / "a.etrec", EVENTS)
    data = open(path, "rb").read()
    sixth_event = frame_offsets(data)[6]  # the header and events 0..4 come before it
    (tmp_path / "cut.etrec").write_bytes(data[: sixth_event + cut] if cut > 0 else data[:cut])
    rec = read_recording(tmp_path / "cut.etrec")
    whole = 5 if cut > 0 else len(EVENTS)  # -1 cuts the trailer: every event is whole
    assert list(rec.events()) == EVENTS[:whole]
    assert rec.trailer is None
    assert "cut short" in rec.problem
    assert f"loaded the {whole} events before it" in rec.describe_problems()[0]


def test_a_damaged_frame_ends_the_recording_there(tmp_path):
    path = write(tmp_path / "a.etrec", EVENTS)
    data = bytearray(open(path, "rb").read())
    third = frame_offsets(bytes(data))[3]  # the header, events 0 and 1, then event 2
    data[third + fmt.FRAME_HEAD.size + 10] ^= 0xFF  # a flipped byte inside event 2
    (tmp_path / "bad.etrec").write_bytes(bytes(data))
    rec = read_recording(tmp_path / "bad.etrec")
    assert list(rec.events()) == EVENTS[:2]
    assert f"damaged at byte {third}" in rec.problem and "checksum" in rec.problem


def test_a_file_without_a_trailer_says_it_was_not_closed(tmp_path):
    path = write(tmp_path / "a.etrec", EVENTS)
    data = open(path, "rb").read()
    (tmp_path / "open.etrec").write_bytes(data[: frame_offsets(data)[-1]])  # everything but the trailer
    rec = read_recording(tmp_path / "open.etrec")
    assert len(rec) == len(EVENTS) and rec.problem is None
    assert "was not closed" in rec.describe_problems()[0]


def test_seq_gaps_are_counted_and_marked_on_the_event_after_them(tmp_path):
    events = [EVENTS[0], EVENTS[1], EVENTS[4], EVENTS[5]]  # seq 1, 2, 5, 6: events 3 and 4 never arrived
    rec = read_recording(write(tmp_path / "gaps.etrec", events))
    assert rec.missed == [0, 0, 2, 0] and rec.total_missed == 2
    assert rec.event(2).num_dropped_events == 2
    assert "2 events published while recording never reached the recorder" in rec.describe_problems()[0]


def test_a_newer_format_version_is_refused_with_what_to_do(tmp_path):
    path = write(tmp_path / "a.etrec", EVENTS)
    data = open(path, "rb").read()
    newer = fmt.PREAMBLE.pack(fmt.MAGIC, fmt.FORMAT_VERSION + 1) + data[fmt.PREAMBLE.size :]
    (tmp_path / "newer.etrec").write_bytes(newer)
    with pytest.raises(fmt.RecordingError, match=f"format version {fmt.FORMAT_VERSION + 1}.*upgrade enginetui"):
        read_recording(tmp_path / "newer.etrec")


def test_events_written_before_they_carried_their_steps_shape_still_read(tmp_path):
    shaped = [msgspec.structs.replace(e, shape=StepShape(e.step, 1, 0, 1, 1, 4 * e.step, 0, 0)) for e in EVENTS]
    writer = RecordingWriter(tmp_path / "old.etrec", header())
    for e in shaped:
        fields = msgspec.msgpack.decode(encode_event(e))
        del fields["shape"]  # as an enginetui of the same schema version without the field wrote it
        writer.write_event(msgspec.msgpack.encode(fields))
    writer.close()
    old = list(read_recording(tmp_path / "old.etrec").events())
    assert old == [msgspec.structs.replace(e, shape=None) for e in shaped]
    assert list(read_recording(write(tmp_path / "new.etrec", shaped)).events()) == shaped


def test_a_newer_event_schema_is_refused_with_what_to_do(tmp_path):
    path = write(tmp_path / "a.etrec", EVENTS, event_schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(fmt.RecordingError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade enginetui"):
        read_recording(path)


def test_an_older_event_schema_is_refused_with_what_to_do(tmp_path):
    path = write(tmp_path / "a.etrec", EVENTS, event_schema_version=SCHEMA_VERSION - 1)
    with pytest.raises(fmt.RecordingError, match="older than this enginetui's.*version that recorded it"):
        read_recording(path)


def test_a_file_that_is_not_a_recording_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n" * 10)
    with pytest.raises(fmt.RecordingError, match="is not an enginetui recording \\(it does not start with"):
        read_recording(tmp_path / "notes.txt")
    (tmp_path / "trace.json").write_text('{"traceEvents": []}')  # an export, given where a recording goes
    with pytest.raises(
        fmt.RecordingError,
        match="is not an enginetui recording \\(it is JSON, as `enginetui "
        "export` writes; a recording is what --record wrote",
    ):
        read_recording(tmp_path / "trace.json")
    path = write(tmp_path / "a.etrec", EVENTS)
    (tmp_path / "headless.etrec").write_bytes(open(path, "rb").read()[: fmt.PREAMBLE.size + 3])
    with pytest.raises(fmt.RecordingError, match="no readable header"):
        read_recording(tmp_path / "headless.etrec")


def test_events_and_headers_written_before_cuda_graphs_read_as_eager(tmp_path):
    """StepEvent.cuda_graph_size and EngineInfo's CUDA graph fields came with defaults and no schema bump:
    a recording written before them reads, its steps eager and its engine without graphs."""
    import msgspec

    from enginetui.core.engine.events import decode_event
    from tests.record.recordings import INFO

    old_event = msgspec.msgpack.decode(encode_event(EVENTS[0]))
    del old_event["cuda_graph_size"]
    assert decode_event(msgspec.msgpack.encode(old_event)).cuda_graph_size == 0
    old_header = msgspec.msgpack.decode(
        fmt.encode(
            fmt.Header(
                event_schema_version=SCHEMA_VERSION,
                created=1.0,
                source="test",
                enginetui_version="test",
                engine=INFO,
                config={},
                tokenizer=None,
            )
        )
    )
    for name in ("cuda_graph_sizes", "cuda_graph_capture_s", "cuda_graphs_off"):
        del old_header["engine"][name]
    engine = fmt.decode_header(msgspec.msgpack.encode(old_header)).engine
    assert (engine.cuda_graph_sizes, engine.cuda_graph_capture_s, engine.cuda_graphs_off) == ([], 0.0, "")


def test_what_a_vllm_adds_is_read_back_in_place_and_skipped_by_the_events(tmp_path):
    """Frames of kind V (a real vLLM's /metrics readings, KV batches, proxied requests) sit between the events."""
    writer = RecordingWriter(tmp_path / "v.etrec", header())
    writer.write_vllm(b"before any event")
    writer.write_event(encode_event(EVENTS[0]))
    writer.write_vllm(b"after one")
    writer.write_event(encode_event(EVENTS[1]))
    writer.close()
    recording = read_recording(tmp_path / "v.etrec")
    assert list(recording.vllm_items()) == [(0, b"before any event"), (1, b"after one")]
    assert [e.step for e in recording.events()] == [1, 2] and recording.trailer.num_events == 2
