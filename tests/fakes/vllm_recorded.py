"""The recorded real vLLM session in tests/vllm_watch/fixtures/opt-tiny (made by `python tools/capture.py`)."""

import base64
import json
import lzma

from enginetui.vllm_watch.kv_events import KVEventBatch, decode_batch
from enginetui.vllm_watch.prometheus import MetricsSample, parse_metrics
from tests.support.checkout import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "vllm_watch" / "fixtures" / "opt-tiny"  # vLLM 0.32 CPU serving the embedded model


def frames() -> list[dict]:
    """The ZMQ messages: {"t", "topic", "seq", "payload" (bytes)}."""
    out = []
    for line in (FIXTURE / "kv_frames.jsonl").read_text().splitlines():
        f = json.loads(line)
        f["payload"] = base64.b64decode(f["payload"])
        out.append(f)
    return out


def batches() -> list[KVEventBatch]:
    return [decode_batch(f["seq"], f["payload"]) for f in frames()]


def metrics_texts() -> list[dict]:
    """The /metrics readings: {"t", "text"}."""
    with lzma.open(FIXTURE / "metrics.jsonl.xz", "rt") as f:
        return [json.loads(line) for line in f]


def samples() -> list[MetricsSample]:
    """The /metrics readings, timed on vLLM's clock (as the KV batches' ts) like a live reading."""
    first = frames()[0]
    clock = decode_batch(first["seq"], first["payload"]).ts - first["t"]  # vLLM's time at the recording's t = 0
    return [parse_metrics(r["text"], clock + r["t"]) for r in metrics_texts()]


def session() -> dict:
    return json.loads((FIXTURE / "session.json").read_text())


def stream_texts() -> list[str]:
    """The text of each chunk of the recorded streamed completion."""
    events = (FIXTURE / "completion_stream.txt").read_text().split("\n\n")
    chunks = [json.loads(e[6:]) for e in events if e.startswith("data: {")]
    return [c["choices"][0]["text"] for c in chunks if c.get("choices")]
