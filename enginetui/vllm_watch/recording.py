"""A vLLM watch session recorded (`enginetui attach --vllm URL --record FILE`) and read back.

The file has the recording format's framing (core/record/format.py: magic, format version, then
length-prefixed, CRC-checked frames, each written with one system call as it happens, so a file
cut short reads up to its last whole frame). Its frames are of two kinds of their own, which an
engine recording never holds:

    W  the `WatchHeader` (first): the server watched, when, by which version
    V  one `WatchItem` per thing the watcher's state received, in order: a /metrics reading
       (parsed), a KV event batch (decoded), what /v1/models said, the served model's tokenizer
       (its tokenizer.json, once found), or another state change (a link going up or down, a
       request through the proxy: arrived, its status, each piece of its response, its end; a
       prompt typed here and each streamed chunk), with its arguments as they were

Replaying the items into a fresh `WatchState` rebuilds every panel exactly as it was. The items
have their own version (`WATCH_FORMAT_VERSION` in the header): a reader refuses a newer one.
"""

import inspect
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from enginetui.core.record import format as fmt
from enginetui.core.record.reader import read_frames
from enginetui.vllm_watch.kv_events import KVEventBatch
from enginetui.vllm_watch.prometheus import MetricsSample
from enginetui.vllm_watch.state import ServerInfo, WatchState

WATCH_HEADER, WATCH_ITEM = b"W", b"V"  # frame kinds of a watch recording
WATCH_FORMAT_VERSION = 1  # bump on any incompatible change of WatchHeader or WatchItem
RECORDED_CALLS = frozenset(
    {  # WatchState methods whose calls are recorded (with plain arguments) and replayed
        "metrics_failed",
        "models_failed",
        "tokenizer_loaded",
        "proxy_listening",
        "kv_status",
        "batches_missed",
        "publisher_restarted",
        "add_request",
        "apply_chunk",
        "end_request",
        "proxy_arrived",
        "proxy_responded",
        "proxy_data",
        "proxy_ended",
        "clear_ended",
        "limits_read",
    }
)


class WatchHeader(msgspec.Struct, kw_only=True):
    """The first frame: what was watched."""

    watch_format_version: int  # WATCH_FORMAT_VERSION of the items
    created: float  # time.time() when recording started
    url: str  # the vLLM server watched
    kv_endpoint: str | None  # where its KV events were listened to (None: not listened to)
    enginetui_version: str  # the recording program's version


class MetricsItem(msgspec.Struct, tag="metrics"):
    """A /metrics reading."""

    sample: MetricsSample  # parsed, with the time it was read


class BatchItem(msgspec.Struct, tag="batch"):
    """A KV event batch, as delivered to the state."""

    batch: KVEventBatch  # decoded
    replayed: bool  # it came from vLLM's replay socket
    t: float  # when it was delivered here (time.time())


class ServerItem(msgspec.Struct, tag="server"):
    """What /v1/models said."""

    info: ServerInfo  # the served model
    t: float  # when


class TokenizerItem(msgspec.Struct, tag="tokenizer"):
    """The served model's tokenizer, found on this machine: blocks are decoded with it from here on."""

    tokenizer_json: bytes  # its tokenizer.json, zlib-compressed
    t: float  # when it was found


class CallItem(msgspec.Struct, tag="call"):
    """Another state change: a RECORDED_CALLS method and its arguments."""

    op: str  # the WatchState method
    args: list[Any]  # its positional arguments (str, int, float, bool, bytes, None)
    t: float  # when (time.time())


WatchItem = MetricsItem | BatchItem | ServerItem | TokenizerItem | CallItem
_ENCODER = msgspec.msgpack.Encoder()
_ITEM_DECODER = msgspec.msgpack.Decoder(WatchItem)


class WatchRecorder:
    """Writes a watch recording as the state changes (see RecordingWatchState)."""

    def __init__(self, path: str | os.PathLike, url: str, kv_endpoint: str | None) -> None:
        self.path = str(path)  # the file
        self.num_items = 0  # items written
        self._file = open(self.path, "wb", buffering=0)  # unbuffered: an item is in the file once written
        header = WatchHeader(
            watch_format_version=WATCH_FORMAT_VERSION,
            created=time.time(),
            url=url,
            kv_endpoint=kv_endpoint,
            enginetui_version=_version(),
        )
        self._file.write(fmt.preamble())
        self._write(WATCH_HEADER, _ENCODER.encode(header))

    def write(self, item: WatchItem) -> None:
        self._write(WATCH_ITEM, _ENCODER.encode(item))
        self.num_items += 1

    def write_tokenizer(self, directory: str) -> None:
        """The tokenizer at `directory`, if it has a tokenizer.json (a replay decodes blocks with it)."""
        path = Path(directory) / "tokenizer.json"
        if path.is_file():
            self.write(TokenizerItem(zlib.compress(path.read_bytes(), 6), time.time()))

    def close(self) -> None:
        self._file.close()

    def _write(self, kind: bytes, payload: bytes) -> None:
        os.writev(self._file.fileno(), [fmt.frame_head(kind, payload), payload])


class RecordingWatchState(WatchState):
    """A WatchState that writes each change it receives to a WatchRecorder before folding it."""

    __slots__ = ("recorder", "_depth")

    def __init__(self, url: str, kv_endpoint: str | None, recorder: WatchRecorder, **fields) -> None:
        super().__init__(url, kv_endpoint, **fields)
        self.recorder = recorder  # where changes go
        self._depth = 0  # nesting of recorded calls (a call made by another is not recorded again)

    def apply_metrics(self, sample: MetricsSample) -> None:
        self.recorder.write(MetricsItem(sample))
        super().apply_metrics(sample)

    def apply_batch(self, batch: KVEventBatch, replayed: bool = False) -> None:
        self.recorder.write(BatchItem(batch, replayed, time.time()))
        super().apply_batch(batch, replayed)

    def set_server(self, info: ServerInfo) -> None:
        self.recorder.write(ServerItem(info, time.time()))
        super().set_server(info)


def _recorded(name: str):
    """RECORDED_CALLS' method `name`, writing a CallItem (positional arguments) before it runs."""
    method = getattr(WatchState, name)
    signature = inspect.signature(method)

    def call(self, *args, **kwargs):
        if self._depth == 0:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            self.recorder.write(CallItem(name, list(bound.args[1:]), time.time()))
        self._depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._depth -= 1

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call


for _name in RECORDED_CALLS:
    setattr(RecordingWatchState, _name, _recorded(_name))


@dataclass(slots=True)
class WatchRecording:
    """A watch recording read back."""

    path: str  # the file
    header: WatchHeader  # what was watched
    items: list[WatchItem]  # every item, in order
    problem: str | None  # why reading stopped early (cut short, damaged), None if it did not

    def times(self) -> list[float]:
        """Each item's time here (time.time())."""
        return [item_time(item) for item in self.items]


def item_time(item: WatchItem) -> float:
    return item.sample.time if isinstance(item, MetricsItem) else item.t


def apply_item(state: WatchState, item: WatchItem) -> None:
    """Fold one recorded item into a state, as it was folded live."""
    if isinstance(item, MetricsItem):
        state.apply_metrics(item.sample)
    elif isinstance(item, BatchItem):
        state.apply_batch(item.batch, item.replayed)
    elif isinstance(item, ServerItem):
        state.set_server(item.info)
    elif isinstance(item, TokenizerItem):
        state.caches.set_decoder(recorded_decoder(item))
    elif item.op in RECORDED_CALLS:
        getattr(state, item.op)(*item.args)


def recorded_decoder(item: TokenizerItem):
    """token ids -> text with a recorded tokenizer."""
    from tokenizers import Tokenizer

    fast = Tokenizer.from_str(zlib.decompress(item.tokenizer_json).decode())
    return lambda token_ids: fast.decode(list(token_ids), skip_special_tokens=False)


def is_watch_recording(path: str | os.PathLike) -> bool:
    """Whether the file is a vLLM watch recording (its first frame is a WatchHeader)."""
    with open(path, "rb") as f:
        head = f.read(fmt.PREAMBLE.size + fmt.FRAME_HEAD.size)
    if len(head) < fmt.PREAMBLE.size + fmt.FRAME_HEAD.size or not head.startswith(fmt.MAGIC):
        return False
    return fmt.FRAME_HEAD.unpack_from(head, fmt.PREAMBLE.size)[2] == WATCH_HEADER


def read_watch_recording(path: str | os.PathLike) -> WatchRecording:
    """Read a watch recording; raises RecordingError for a file that is not one or is too new."""
    path = str(path)
    with open(path, "rb") as f:
        data = memoryview(f.read())
    fmt.check_preamble(data, path)
    frames, problem = read_frames(data, fmt.PREAMBLE.size)
    if not frames or frames[0][0] != WATCH_HEADER:
        raise fmt.RecordingError(f"{path} is not a vLLM watch recording ({problem or 'no watch header'})")
    _, start, end = frames[0]
    header = msgspec.msgpack.decode(data[start:end], type=WatchHeader)
    if header.watch_format_version > WATCH_FORMAT_VERSION:
        raise fmt.RecordingError(
            f"{path} is a vLLM watch recording of version {header.watch_format_version}; this "
            f"enginetui reads version {WATCH_FORMAT_VERSION} and older: upgrade enginetui"
        )
    items = []
    for kind, start, end in frames[1:]:
        if kind != WATCH_ITEM:
            continue
        try:
            items.append(_ITEM_DECODER.decode(data[start:end]))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            problem = f"item {len(items)} does not decode ({exc})"
            break
    return WatchRecording(path, header, items, problem)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("enginetui")
    except metadata.PackageNotFoundError:
        return "unknown"
