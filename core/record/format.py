"""The recording file: every step event an engine published, plus what a viewer needs beside them.

    magic (8 bytes) | format version (u16, little-endian) | frame | frame | ...
    frame: payload length (u32) | crc32 of kind + payload (u32) | kind (1 byte) | payload

Frames, in order: one header (kind H: `Header`, msgpack), then one frame per event (kind E: the
`StepEvent` exactly as EngineCore published it, msgpack), then a trailer (kind T: `Trailer`)
when the recording was closed cleanly. A real vLLM's recording also holds, between its events, what
a vLLM adds (kind V: a /metrics reading, a KV event batch, a proxied request's change, ...; the front
end's enginetui/vllm_watch/vllm_record.py encodes them); a reader that does not need them skips them. Each frame is written with one system call as its event
arrives, so a recording cut short (the process killed, the disk full) still reads up to its
last whole frame, and the checksum finds a frame that was damaged.

`FORMAT_VERSION` covers this framing and the header; the events inside keep their own schema
version (`enginetui.core.engine.events.SCHEMA_VERSION`, written in the header). A reader refuses a file
of a newer version of either, rather than misreading it.
"""

import struct
import zlib
from typing import Any

import msgspec

from enginetui.core.engine.engine_info import EngineInfo

MAGIC = b"ETUIREC\x00"  # first bytes of every recording
FORMAT_VERSION = 1  # bump on any incompatible change of the framing, Header or Trailer
PREAMBLE = struct.Struct("<8sH")  # magic, format version
FRAME_HEAD = struct.Struct("<IIc")  # payload length, crc32(kind + payload), kind
HEADER, EVENT, TRAILER, VLLM = b"H", b"E", b"T", b"V"  # frame kinds
MAX_FRAME_BYTES = 1 << 30  # a longer length field means a damaged file, not a real frame


class TokenizerFiles(msgspec.Struct, kw_only=True):
    """The engine's tokenizer, as `save_pretrained` wrote it, so a viewer decodes text offline."""

    files: dict[str, bytes]  # file name -> zlib-compressed contents (tokenizer.json, tokenizer_config.json, ...)


class Header(msgspec.Struct, kw_only=True):
    """Who recorded what: the first frame of every recording."""

    event_schema_version: int  # SCHEMA_VERSION of the events in this file
    created: float  # time.time() when recording started
    source: str  # what recorded it: "LLM", "AsyncLLM", or the enginetui command line
    enginetui_version: str  # the recording program's enginetui version
    engine: EngineInfo  # the engine: model, pool, device, dtype, limits (pid: the recorded EngineCore)
    config: dict[str, Any]  # its EngineConfig, field by field
    tokenizer: TokenizerFiles | None  # to turn token ids into text (None: the engine ran on token ids only)
    # a simulated fleet: each engine's role ("replica", "prefill" or "decode"), indexed by each event's `replica`
    replicas: list[str] = []  # empty: one engine
    replica_models: list[str] = []  # a mixed fleet: what each engine runs on (its hardware or fit); empty: alike


class Trailer(msgspec.Struct, kw_only=True):
    """How the recording ended: the last frame of a recording that was closed cleanly."""

    closed: float  # time.time() when recording stopped
    num_events: int  # event frames written
    missed_events: int  # events published while recording that never reached the recorder (seq gaps)


class EventHead(msgspec.Struct):
    """The few fields of an encoded StepEvent that indexing a recording needs (decoded alone: fast)."""

    seq: int  # publisher's event counter
    kind: str  # "step" | "update" | "snapshot"
    step: int  # engine step counter
    time: float  # wall-clock time the event was built


class RecordingError(Exception):
    """A file that is not a recording this program can read, and what to do about it."""


def check_preamble(data: memoryview, path: str) -> None:
    """Raise RecordingError unless `data` starts as a recording does (a JSON file is named as one: an export)."""
    if len(data) >= PREAMBLE.size and bytes(data[: len(MAGIC)]) == MAGIC:
        return
    json = bytes(data[:1]) in (b"{", b"[")
    hint = (
        (f" (it is JSON, as `enginetui export` writes; a recording is what --record wrote, starting with {MAGIC!r})")
        if json
        else f" (it does not start with {MAGIC!r})"
    )
    raise RecordingError(f"{path} is not an enginetui recording{hint}")


def preamble() -> bytes:
    return PREAMBLE.pack(MAGIC, FORMAT_VERSION)


def checksum(kind: bytes, payload: bytes | memoryview) -> int:
    """A frame's crc32, over its kind and payload."""
    return zlib.crc32(payload, zlib.crc32(kind))


def frame_head(kind: bytes, payload: bytes) -> bytes:
    """The bytes that go before `payload` in a frame of `kind`."""
    return FRAME_HEAD.pack(len(payload), checksum(kind, payload), kind)


def encode(struct_value: msgspec.Struct) -> bytes:
    return _ENCODER.encode(struct_value)


def decode_head(payload: bytes | memoryview) -> EventHead:
    return _HEAD_DECODER.decode(payload)


def decode_header(payload: bytes | memoryview) -> Header:
    return _HEADER_DECODER.decode(payload)


def decode_trailer(payload: bytes | memoryview) -> Trailer:
    return _TRAILER_DECODER.decode(payload)


_ENCODER = msgspec.msgpack.Encoder()
_HEAD_DECODER = msgspec.msgpack.Decoder(EventHead)
_HEADER_DECODER = msgspec.msgpack.Decoder(Header)
_TRAILER_DECODER = msgspec.msgpack.Decoder(Trailer)
