"""Convert old vLLM watch recordings (W/V frames of WatchState calls, made before the one recording format)
into the one format: their /metrics readings, KV batches and proxied requests as V frames, and the outside
rebuild's step events as E frames, made by running the rebuild on them as `attach --vllm URL` does live.

    python tools/convert_watch_recordings.py tests/vllm_watch/fixtures/opt-tiny-burst ...

Each folder holds burst.etrec.xz (replaced) and session.json (vLLM's limits, which the old files lacked).
Run once on the committed fixtures; the old format has no reader left in the package.
"""

import argparse
import json
import lzma
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from enginetui.core.record import format as fmt
from enginetui.vllm_watch import vllm_record as v
from enginetui.vllm_watch.kv_events import KVEventBatch
from enginetui.vllm_watch.prometheus import MetricsSample
from enginetui.vllm_watch.rebuild_engine import RebuildEngine
from enginetui.vllm_watch.state import SchedulerLimits, WatchState

OLD_HEADER, OLD_ITEM = b"W", b"V"


class _Header(msgspec.Struct, kw_only=True):
    created: float
    url: str
    kv_endpoint: str | None


class _Metrics(msgspec.Struct, tag="metrics"):
    sample: MetricsSample


class _Batch(msgspec.Struct, tag="batch"):
    batch: KVEventBatch
    replayed: bool
    t: float


class _Server(msgspec.Struct, tag="server"):
    info: v.ServerInfo
    t: float


class _Tokenizer(msgspec.Struct, tag="tokenizer"):
    tokenizer_json: bytes
    t: float


class _Call(msgspec.Struct, tag="call"):
    op: str
    args: list[Any]
    t: float


_ITEM = msgspec.msgpack.Decoder(_Metrics | _Batch | _Server | _Tokenizer | _Call)


def new_item(old) -> v.VllmItem | None:
    """The one-format item for an old one (None: a prompt typed in the old watch app, which no view has now)."""
    if isinstance(old, _Metrics):
        return v.Metrics(old.sample)
    if isinstance(old, _Batch):
        return v.KVBatch(old.t, old.batch, old.replayed)
    if isinstance(old, _Server):
        return v.Server(old.t, old.info)
    if isinstance(old, _Tokenizer):
        return v.Tokenizer(old.t, old.tokenizer_json)
    a, t = old.args, old.t
    calls = {
        "metrics_failed": lambda: v.Link(t, "metrics", "down", a[1]),
        "models_failed": lambda: v.Link(t, "models", "failed", a[1]),
        "tokenizer_loaded": lambda: v.Link(t, "tokenizer", "decoded" if a[1] else "", a[2]),
        "proxy_listening": lambda: v.Link(t, "proxy", a[1] or "", a[2]),
        "kv_status": lambda: v.Link(t, "kv", a[1], a[2]),
        "limits_read": lambda: v.Limits(t, a[1], a[2]),
        "batches_missed": lambda: v.KVGap(t, a[1], a[2], a[3]),
        "publisher_restarted": lambda: v.KVGap(t, a[1], -1, -1),
        "proxy_arrived": lambda: v.ProxyArrived(a[4], a[0], a[1], a[2], a[3]),
        "proxy_responded": lambda: v.ProxyResponded(a[2], a[0], a[1]),
        "proxy_data": lambda: v.ProxyData(a[2], a[0], a[1]),
        "proxy_ended": lambda: v.ProxyEnded(a[2], a[0], a[1]),
    }
    return calls[old.op]() if old.op in calls else None


def frames(data: memoryview) -> list[tuple[bytes, int, int]]:
    """(kind, payload start, payload end) of each frame after the preamble (the old files are whole)."""
    out, offset = [], fmt.PREAMBLE.size
    while offset < len(data):
        length, _, kind = fmt.FRAME_HEAD.unpack_from(data, offset)
        start = offset + fmt.FRAME_HEAD.size
        out.append((kind, start, start + length))
        offset = start + length
    return out


def convert(folder: Path) -> None:
    session = json.loads((folder / "session.json").read_text())
    data = memoryview(lzma.decompress((folder / "burst.etrec.xz").read_bytes()))
    found = frames(data)
    if found[0][0] != OLD_HEADER:
        raise SystemExit(f"{folder}: not an old watch recording (no W header)")
    header = msgspec.msgpack.decode(data[found[0][1] : found[0][2]], type=_Header)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "burst.etrec"
        engine = RebuildEngine(header.url)
        recording = engine.start_recording(str(out), f"tools/convert_watch_recordings.py {folder.name}")
        state = WatchState(
            header.url, header.kv_endpoint, limits=SchedulerLimits(**session["limits"]), rebuild_sinks=[engine]
        )
        state.recorder = lambda item: recording.write_vllm(v.encode(item))
        state.recorder(v.Watching(header.created, header.url, header.kv_endpoint))
        engine.facts_from = state
        for kind, start, end in found[1:]:
            if kind == OLD_ITEM and (item := new_item(_ITEM.decode(data[start:end]))) is not None:
                state.apply_recorded(item)
        summary = recording.close()
        with lzma.open(folder / "burst.etrec.xz", "wb") as f:
            f.write(out.read_bytes())
    print(f"{folder}: {summary.num_events} rebuilt events, {summary.num_bytes} bytes before xz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    for folder in parser.parse_args().folders:
        convert(folder)


if __name__ == "__main__":
    main()
