"""Writes the recording file's frames (core/record/format.py), each with one system call."""

import os
import time
from collections.abc import Iterable

from enginetui.core.engine.events import StepEvent, encode_event
from enginetui.core.record import format as fmt


class RecordingWriter:
    """A recording being written: the preamble and header at once, then events, then the trailer."""

    def __init__(self, path: str | os.PathLike, header: fmt.Header) -> None:
        self.path = str(path)  # the file
        self.num_events = 0  # event frames written
        self._file = open(self.path, "wb", buffering=0)  # unbuffered: a frame is in the file once written
        try:
            self._file.write(fmt.preamble())
            self._write(fmt.HEADER, fmt.encode(header))
        except BaseException:
            self._file.close()
            raise

    def write_event(self, data: bytes) -> None:
        """One event, as EngineCore published it (encoded)."""
        self._write(fmt.EVENT, data)
        self.num_events += 1

    def write_vllm(self, payload: bytes) -> None:
        """What a real vLLM adds beside the events (format.VLLM), encoded by the front end."""
        self._write(fmt.VLLM, payload)

    def close(self, missed_events: int = 0) -> None:
        """Write the trailer and close the file."""
        trailer = fmt.Trailer(closed=time.time(), num_events=self.num_events, missed_events=missed_events)
        self._write(fmt.TRAILER, fmt.encode(trailer))
        self._file.close()

    def _write(self, kind: bytes, payload: bytes) -> None:
        os.writev(self._file.fileno(), [fmt.frame_head(kind, payload), payload])


def write_recording(path: str | os.PathLike, header: fmt.Header, events: Iterable[StepEvent]) -> None:
    """A whole recording from events in hand (tests, converters)."""
    writer = RecordingWriter(path, header)
    for event in events:
        writer.write_event(encode_event(event))
    writer.close()
