"""Reads a recording (core/record/format.py): its header, its events in order, how it ended.

    rec = read_recording("run.etrec")
    rec.header.engine.model_name, len(rec), rec.problem
    for event in rec.events(): ...

A file cut short or damaged reads up to its last good frame; `problem` then says what was found
where. A file of a newer format or event schema is refused (RecordingError) with what to do.
Events are decoded when asked for; only their seq, kind, step and time are read up front.
"""

import os
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from enginetui.core.engine.events import SCHEMA_VERSION, StepEvent, decode_event
from enginetui.core.record import format as fmt

UPGRADE = "upgrade enginetui (pip install -U enginetui, or pull the repository) to read it"


@dataclass(slots=True)
class Recording:
    """One recording file, indexed."""

    path: str  # the file
    header: fmt.Header  # who recorded what
    heads: list[fmt.EventHead]  # per event: seq, kind, step, time
    missed: list[int]  # per event: events lost just before it (seq gap), usually 0
    trailer: fmt.Trailer | None  # how it ended (None: never closed: cut short, or still being written)
    problem: str | None  # why reading stopped before the trailer (truncated or damaged), None if it did not
    _data: memoryview  # the whole file
    _spans: list[tuple[int, int]]  # per event: start and end of its encoded bytes in _data
    vllm_spans: list[tuple[int, int, int]]  # per V frame: events before it, start and end of its payload in _data

    def __len__(self) -> int:
        return len(self.heads)

    @property
    def total_missed(self) -> int:
        """Events the recorder never got (seq gaps)."""
        return sum(self.missed)

    def event(self, index: int) -> StepEvent:
        """The event at `index`, exactly as published (num_dropped_events: the gap before it)."""
        start, end = self._spans[index]
        event = decode_event(self._data[start:end])
        missed = self.missed[index]
        return msgspec.structs.replace(event, num_dropped_events=missed) if missed else event

    def events(self) -> Iterator[StepEvent]:
        return (self.event(i) for i in range(len(self)))

    def encoded(self, index: int) -> bytes:
        """The event's bytes as the engine published them."""
        start, end = self._spans[index]
        return bytes(self._data[start:end])

    def vllm_items(self) -> Iterator[tuple[int, bytes]]:
        """What a real vLLM added (format.VLLM frames), in order: (events recorded before it, its payload)."""
        for before, start, end in self.vllm_spans:
            yield before, bytes(self._data[start:end])

    def describe_problems(self) -> list[str]:
        """What a viewer should say about this recording besides its events (empty: nothing)."""
        notes = []
        if self.problem is not None:
            notes.append(f"{self.problem}: loaded the {len(self)} events before it")
        elif self.trailer is None:
            notes.append(
                f"the recording was not closed (still being written, or its program ended abruptly): "
                f"loaded its {len(self)} events"
            )
        if self.total_missed:
            notes.append(
                f"{self.total_missed} events published while recording never reached the recorder: "
                f"the state after each gap is whole, what happened inside it is not"
            )
        return notes


def read_recording(path: str | os.PathLike) -> Recording:
    """Index the recording at `path`. Raises RecordingError for a file that is not one, or one
    this version cannot read (newer format or event schema)."""
    path = str(path)
    with open(path, "rb") as f:
        data = memoryview(f.read())
    fmt.check_preamble(data, path)
    _, version = fmt.PREAMBLE.unpack_from(data)
    if version > fmt.FORMAT_VERSION:
        raise fmt.RecordingError(
            f"{path} is a recording of format version {version}; this enginetui reads version "
            f"{fmt.FORMAT_VERSION} and older: {UPGRADE}"
        )
    frames, problem = _frames(data, fmt.PREAMBLE.size)
    if not frames or frames[0][0] != fmt.HEADER:
        raise fmt.RecordingError(f"{path}: the recording has no readable header ({problem or 'no frames'})")
    header = _header(path, data, frames[0])
    heads: list[fmt.EventHead] = []
    missed: list[int] = []
    spans: list[tuple[int, int]] = []
    vllm_spans: list[tuple[int, int, int]] = []
    trailer: fmt.Trailer | None = None
    last_seq: int | None = None
    for kind, start, end in frames[1:]:
        if kind == fmt.TRAILER:
            trailer = fmt.decode_trailer(data[start:end])
            break
        if kind == fmt.VLLM:
            vllm_spans.append((len(heads), start, end))
            continue
        if kind != fmt.EVENT:
            continue  # a frame kind from a later minor change: nothing this reader needs
        try:
            head = fmt.decode_head(data[start:end])
        except msgspec.DecodeError as exc:
            problem = f"event {len(heads)} does not decode ({exc})"
            break
        missed.append(max(0, head.seq - last_seq - 1) if last_seq is not None else 0)
        last_seq = head.seq if last_seq is None else max(last_seq, head.seq)
        heads.append(head)
        spans.append((start, end))
    return Recording(path, header, heads, missed, trailer, problem, data, spans, vllm_spans)


def _frames(data: memoryview, offset: int) -> tuple[list[tuple[bytes, int, int]], str | None]:
    """(kind, payload start, payload end) of every whole, intact frame from `offset`; and why
    reading stopped early, if it did."""
    frames: list[tuple[bytes, int, int]] = []
    size = len(data)
    while offset < size:
        if size - offset < fmt.FRAME_HEAD.size:
            return frames, f"the file is cut short at byte {offset} (a partial frame header)"
        length, crc, kind = fmt.FRAME_HEAD.unpack_from(data, offset)
        start, end = offset + fmt.FRAME_HEAD.size, offset + fmt.FRAME_HEAD.size + length
        if length > fmt.MAX_FRAME_BYTES:
            return frames, f"the file is damaged at byte {offset} (a frame length of {length} bytes)"
        if end > size:
            return frames, f"the file is cut short at byte {offset} (a partial frame)"
        if crc != fmt.checksum(kind, data[start:end]):
            return frames, f"the file is damaged at byte {offset} (checksum mismatch)"
        frames.append((kind, start, end))
        offset = end
    return frames, None


def _header(path: str, data: memoryview, frame: tuple[bytes, int, int]) -> fmt.Header:
    _, start, end = frame
    try:
        versions = msgspec.msgpack.decode(data[start:end], type=_Versions)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise fmt.RecordingError(f"{path}: the recording's header does not decode ({exc})") from None
    schema = versions.event_schema_version
    if schema > SCHEMA_VERSION:
        raise fmt.RecordingError(
            f"{path} holds events of schema version {schema}; this enginetui reads version {SCHEMA_VERSION}: {UPGRADE}"
        )
    if schema < SCHEMA_VERSION:
        raise fmt.RecordingError(
            f"{path} holds events of schema version {schema}, older than this enginetui's {SCHEMA_VERSION} "
            f"(no converter exists): open it with the enginetui version that recorded it"
        )
    try:
        return fmt.decode_header(data[start:end])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise fmt.RecordingError(f"{path}: the recording's header does not decode ({exc})") from None


class _Versions(msgspec.Struct):
    """The header's version field alone (read before the rest, which may have changed)."""

    event_schema_version: int  # see Header
