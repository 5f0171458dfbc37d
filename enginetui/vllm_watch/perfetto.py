"""A vLLM watch recording as a Chrome trace-event JSON file (ui.perfetto.dev, chrome://tracing).

    process "vLLM":      counters from each /metrics reading: running, waiting (by reason), KV usage
                         (%), tokens per engine step; an instant per KV event batch (blocks stored,
                         evicted, cleared) on thread "KV events"
    process "requests":  a thread per request typed or proxied: "until first token" (queue and
                         prefill: not told apart on the wire) then "streaming", and its end

Times are microseconds from the recording's first item, on this machine's clock (a KV batch is
placed when it was delivered here).
"""

from enginetui.vllm_watch import prometheus as m
from enginetui.vllm_watch.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from enginetui.vllm_watch.recording import BatchItem, MetricsItem, WatchRecording, apply_item
from enginetui.vllm_watch.requests import WatchedRequest
from enginetui.vllm_watch.state import WatchState

VLLM_PID, REQUESTS_PID = 1, 2  # trace processes
KV_TID = 1  # the KV events thread


def perfetto_trace(recording: WatchRecording) -> dict:
    """The trace as a JSON-ready dict."""
    times = recording.times()
    origin = times[0] if times else 0.0
    us = lambda t: round((t - origin) * 1e6, 3)  # noqa: E731  (time.time() -> trace microseconds)
    trace = [
        _meta("process_name", VLLM_PID, 0, f"vLLM {recording.header.url}"),
        _meta("thread_name", VLLM_PID, KV_TID, "KV events"),
        _meta("process_name", REQUESTS_PID, 0, "requests"),
    ]
    state = WatchState(recording.header.url, recording.header.kv_endpoint)  # folds the items, as live
    previous = None
    for item in recording.items:
        apply_item(state, item)
        if isinstance(item, MetricsItem):
            trace += _counters(item.sample, previous, us(item.sample.time))
            previous = item.sample
        elif isinstance(item, BatchItem):
            trace.append(_batch_instant(item, us(item.t)))
    for tid, view in enumerate(state.requests.values(), start=1):
        trace += _request_track(view, tid, us)
    return {
        "traceEvents": trace,
        "displayTimeUnit": "ms",
        "metadata": {
            "source": "enginetui attach --vllm --record",
            "url": recording.header.url,
            "created": recording.header.created,
        },
    }


def _counters(sample, previous, ts: float) -> list[dict]:
    values = {"running": sample.total(m.RUNNING) or 0.0, "waiting": sample.total(m.WAITING) or 0.0}
    for reason, count in sample.split.get(m.WAITING_BY_REASON, {}).items():
        values[f"waiting ({reason})"] = count
    kv = sample.per_engine(m.KV_USAGE)
    if kv:
        values["KV used %"] = 100 * sum(kv.values()) / len(kv)
    steps = sample.histogram(m.ITERATION_TOKENS)
    if steps is not None and previous is not None:
        since = steps.since(previous.histogram(m.ITERATION_TOKENS))
        if since.count > 0:
            values["tokens per step"] = since.mean()
    return [
        {"name": name, "ph": "C", "pid": VLLM_PID, "ts": ts, "args": {name: value}} for name, value in values.items()
    ]


def _batch_instant(item: BatchItem, ts: float) -> dict:
    stored = sum(len(e.block_hashes) for e in item.batch.events if isinstance(e, BlockStored))
    removed = sum(len(e.block_hashes) for e in item.batch.events if isinstance(e, BlockRemoved))
    cleared = any(isinstance(e, AllBlocksCleared) for e in item.batch.events)
    name = "cleared" if cleared else f"+{stored} -{removed} blocks"
    return {
        "name": name,
        "ph": "i",
        "s": "t",
        "pid": VLLM_PID,
        "tid": KV_TID,
        "ts": ts,
        "args": {
            "seq": item.batch.seq,
            "rank": item.batch.data_parallel_rank,
            "stored": stored,
            "removed": removed,
            "replayed": item.replayed,
        },
    }


def _request_track(view: WatchedRequest, tid: int, us) -> list[dict]:
    events = [_meta("thread_name", REQUESTS_PID, tid, f"{view.req_id} {view.method} {view.route} · {view.source}")]
    end = view.finished if view.finished is not None else view.last_token or view.arrival
    args = {
        "prompt": view.prompt[:200],
        "tokens": view.tokens(),
        "chunks": view.token_chunks,
        "status": view.status,
        "finish_reason": view.finish_reason,
        "detail": view.detail,
    }
    first = view.first_token if view.first_token is not None else end
    events.append(
        {
            "name": "until first token" if view.first_token is not None else view.status,
            "ph": "X",
            "pid": REQUESTS_PID,
            "tid": tid,
            "ts": us(view.arrival),
            "dur": max(0.0, us(first) - us(view.arrival)),
            "args": args,
        }
    )
    if view.first_token is not None:
        events.append(
            {
                "name": "streaming",
                "ph": "X",
                "pid": REQUESTS_PID,
                "tid": tid,
                "ts": us(first),
                "dur": max(0.0, us(end) - us(first)),
                "args": {"tokens": view.tokens(), "chunks": view.token_chunks},
            }
        )
    events.append(
        {"name": view.finish_reason or view.status, "ph": "i", "s": "t", "pid": REQUESTS_PID, "tid": tid, "ts": us(end)}
    )
    return events


def _meta(kind: str, pid: int, tid: int, name: str) -> dict:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
