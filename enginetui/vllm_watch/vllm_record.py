"""What a real vLLM adds to a recording beside the step events: its /metrics readings, KV event batches,
the proxy's requests, what its server said, and its links going up and down.

Each is one frame of kind V (core/record/format.py) in the one recording format, written as it reaches
the watcher's state (WatchState.recorder) and folded back by WatchState.apply_recorded, so a replay
rebuilds the vLLM column (and the rebuild) as it was. Each kind is a struct of its own, tagged by name.
"""

from dataclasses import dataclass

import msgspec

from enginetui.vllm_watch.kv_events import KVEventBatch
from enginetui.vllm_watch.prometheus import MetricsSample


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server says about itself (/v1/models and the cache config on /metrics)."""

    model: str  # the served model name (what requests send as "model")
    root: str  # the model's path or hub id (where its tokenizer may be found locally)
    max_model_len: int | None  # longest sequence it serves


class Watching(msgspec.Struct, tag="watching"):
    """The first item: the server watched and where its KV events were listened to (None: not listened to)."""

    t: float
    url: str
    kv_endpoint: str | None


class Metrics(msgspec.Struct, tag="metrics"):
    """A /metrics reading (parsed, with the time it was read)."""

    sample: MetricsSample


class KVBatch(msgspec.Struct, tag="kv"):
    """A KV event batch as delivered (replayed: from vLLM's replay socket)."""

    t: float
    batch: KVEventBatch
    replayed: bool


class Server(msgspec.Struct, tag="server"):
    """What /v1/models said."""

    t: float
    info: ServerInfo


class Tokenizer(msgspec.Struct, tag="tokenizer"):
    """The served model's tokenizer.json (zlib-compressed), found here: cached blocks decode with it."""

    t: float
    tokenizer_json: bytes


class Link(msgspec.Struct, tag="link"):
    """A link changed: `what` is metrics (down, with why), models (failed, why), kv (status and why), proxy
    (listening at `status`, or not: `message`) or tokenizer (status "decoded" or not, and how)."""

    t: float
    what: str
    status: str
    message: str


class Limits(msgspec.Struct, tag="limits"):
    """vLLM's scheduler limits, from its /server_info."""

    t: float
    max_num_seqs: int
    max_num_batched_tokens: int


class KVGap(msgspec.Struct, tag="kv_gap"):
    """KV batches first..last of a rank never arrived (rank's publisher restarted: first = last = -1)."""

    t: float
    rank: int
    first: int
    last: int


class ProxyArrived(msgspec.Struct, tag="proxy_arrived"):
    """A request came through the proxy."""

    t: float
    method: str
    path: str
    body: bytes
    client: str


class ProxyResponded(msgspec.Struct, tag="proxy_responded"):
    t: float
    req_id: str
    status: int


class ProxyData(msgspec.Struct, tag="proxy_data"):
    """A piece of a proxied response."""

    t: float
    req_id: str
    data: bytes


class ProxyEnded(msgspec.Struct, tag="proxy_ended"):
    t: float
    req_id: str
    error: str


VllmItem = (
    Watching
    | Metrics
    | KVBatch
    | Server
    | Tokenizer
    | Link
    | Limits
    | KVGap
    | ProxyArrived
    | ProxyResponded
    | ProxyData
    | ProxyEnded
)

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(VllmItem)


def encode(item: VllmItem) -> bytes:
    return _ENCODER.encode(item)


def decode(payload: bytes | memoryview) -> VllmItem:
    return _DECODER.decode(payload)


def item_time(item: VllmItem) -> float:
    return item.sample.time if isinstance(item, Metrics) else item.t


def recorded_decoder(tokenizer_json: bytes):
    """token ids -> text with a recorded tokenizer."""
    import zlib

    from tokenizers import Tokenizer as FastTokenizer

    fast = FastTokenizer.from_str(zlib.decompress(tokenizer_json).decode())
    return lambda token_ids: fast.decode(list(token_ids), skip_special_tokens=False)
