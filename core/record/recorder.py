"""Records an engine: every event it publishes, as it arrives, into one self-contained file.

    recorder = start_recording("run.etrec", client, tokenizer, source="LLM")
    ...                                       # the engine runs; every event lands in the file
    recorder.close(final_seq=snapshot.seq)    # wait for the events up to now, then the trailer

The recorder is an event subscriber (a thread in this process) whose receive queue is unbounded,
so however far it falls behind the engine it never loses an event; it writes each event's bytes
as published, without decoding more than its seq, in one system call. It still checks the seq
numbers: events lost anyway (seq gaps) are counted and written in the trailer, and a reader
finds the gaps again in a recording that was cut short.
"""

import os
import threading
import time
import weakref
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import msgspec

from enginetui.core.engine.event_subscriber import EventSubscriber
from enginetui.core.engine.events import SCHEMA_VERSION
from enginetui.core.record import format as fmt
from enginetui.core.record.tokenizer_files import pack_tokenizer
from enginetui.core.record.writer import RecordingWriter

UNBOUNDED = 0  # zmq RCVHWM: no limit on events waiting for the recorder


@dataclass(frozen=True, slots=True)
class RecordingSummary:
    """What a finished recording holds."""

    path: str  # the file
    num_events: int  # events written
    missed_events: int  # events that never reached the recorder (0 unless something went wrong)
    num_bytes: int  # file size


class Recorder(EventSubscriber):
    """Writes every event published at `address` to `path`, after `header`."""

    def __init__(self, path: str | os.PathLike, address: str, header: fmt.Header) -> None:
        self.path = str(path)  # the recording file
        self.missed_events = 0  # seq gaps seen (events published but never received)
        self._last_seq: int | None = None  # seq of the latest event written
        self._closed = False  # the trailer is written and the file closed
        self._lock = threading.Lock()  # close() runs once, from whichever thread gets there first
        self._writer = RecordingWriter(path, header)  # the file
        try:
            super().__init__(address, on_event=None, rcvhwm=UNBOUNDED)  # returns once subscribed
        except BaseException:
            self._writer.close()
            raise
        # A recording left open by its owner still gets its trailer at interpreter exit.
        self._finalizer = weakref.finalize(self, Recorder._finish, weakref.ref(self))

    @property
    def num_events(self) -> int:
        """Events written so far."""
        return self._writer.num_events

    def sync(self, seq: int, timeout_s: float = 10.0) -> bool:
        """Block until the event numbered `seq` is in the file (False on timeout)."""
        return self.catch_up(seq, timeout_s)

    def close(self, final_seq: int | None = None, timeout_s: float = 10.0) -> RecordingSummary:
        """Stop recording: first wait for the event numbered `final_seq` when given (the engine's
        latest), else take what has arrived; then write the trailer. Idempotent."""
        with self._lock:
            if not self._closed:
                if final_seq is not None:
                    self.catch_up(final_seq, timeout_s)
                super().close()
                self._writer.close(self.missed_events)
                self._closed = True
                self._finalizer.detach()
        return RecordingSummary(self.path, self.num_events, self.missed_events, os.path.getsize(self.path))

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- the subscriber thread -------------------------------------------------------------

    def _handle(self, data: bytes) -> int:
        seq = fmt.decode_head(data).seq
        if self._last_seq is not None and seq > self._last_seq + 1:
            self.missed_events += seq - self._last_seq - 1
        self._last_seq = seq if self._last_seq is None else max(self._last_seq, seq)
        self._writer.write_event(data)
        return seq

    @staticmethod
    def _finish(ref: "weakref.ref[Recorder]") -> None:
        recorder = ref()
        if recorder is not None:
            recorder.close()


def start_recording(path: str | os.PathLike, client, tokenizer, source: str) -> Recorder:
    """Record the engine behind `client` (an EngineCoreClient) to `path`, from now on.

    `tokenizer` (the client's HF tokenizer, or None) goes into the file so a viewer can show text.
    Returns once the recorder is subscribed: every event published after this call is recorded.
    """
    if not client.config.enable_step_events:
        raise ValueError("recording needs step events: the engine was started with enable_step_events=False")
    header = fmt.Header(
        event_schema_version=SCHEMA_VERSION,
        created=time.time(),
        source=source,
        enginetui_version=_version(),
        engine=client.info,
        config=msgspec.to_builtins(client.config),
        tokenizer=pack_tokenizer(tokenizer),
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return Recorder(path, client.events_address, header)


def _version() -> str:
    try:
        return metadata.version("enginetui")
    except metadata.PackageNotFoundError:
        return "unknown"
