"""Record a real vLLM server's KV event batches and /metrics texts as test fixtures.

    flock /work/bench.lock python tools/capture.py --vllm-python /path/to/vllm-venv/bin/python \
        --model core/models/default_model/opt-tiny --out tests/vllm_watch/fixtures/opt-tiny

starts vLLM (enginetui/vllm_launch.py's start_vllm: a 64-block pool of 32-token blocks, prefix caching,
KV events with a replay socket), listens to its KV events and polls /metrics four times a second
while a fixed workload runs, then stops it. The workload: two prompts sharing a long prefix (the
tree branches), one of them again (prefix-cache hits), a streamed completion (kept as the server
sent it), a burst of long requests that overfills the pool (waiting requests, preemptions,
evictions), the same burst again, a prefix-cache reset (AllBlocksCleared), one more prompt.
It writes to OUT:

- kv_frames.jsonl: every ZMQ message, one per line: {"t": seconds since start, "topic", "seq",
  "payload": base64 of the msgpack batch, exactly as received};
- metrics.jsonl.xz: every /metrics reading, one per line: {"t", "text"} (xz: the texts repeat);
- completion_stream.txt: the server-sent events of the streamed completion;
- session.json: vLLM's version and command line, /v1/models, the workload's steps with their times.

With --burst it records the scheduler rebuild's workload instead (enginetui/vllm_watch/burst.py):
BURST_REQUESTS streamed requests at once through the watcher's proxy into a BURST_BLOCKS-block pool
with BURST_LIMITS (preemptions), the watcher's state recorded as `enginetui attach --record` does:

- burst.etrec.xz: the recording, in the one format (the rebuild's step events beside every /metrics
  reading, each request through the proxy and each piece of its response, with when it went by),
  xz-compressed;
- vllm_steps.log.xz: vLLM's own line for each engine step (`--enable-logging-iteration-details`: the
  requests and tokens it scheduled, its KV cache usage after), the truth the rebuild's steps are
  checked against (enginetui/bench/vllm_step_log.py reads it);
- session.json: vLLM's version and command line, the limits given, the workload.

--requests N and --first K send N requests with the prompts burst_prompt(K)… (another burst than the
fixture's), --poll-s the reading interval; --kv-events listens to vLLM's KV events too and records
each batch (the rebuild's cached blocks are checked against them). On a small machine that starves the
/metrics readings: the watcher's one event loop decodes every batch while it proxies the burst.
"""

import argparse
import asyncio
import base64
import json
import lzma
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import zmq

from enginetui.bench.vllm_step_log import ITERATION
from enginetui.vllm_launch import find_vllm_python, start_vllm
from enginetui.vllm_watch.burst import (
    BURST_BLOCKS,
    BURST_LIMITS,
    BURST_MAX_TOKENS,
    BURST_POLL_S,
    BURST_REQUESTS,
    STEP_LOG,
    matching_steps,
    proxied_burst,
    replay_burst,
    vllm_logged_steps,
)
from enginetui.vllm_watch.prompts import BRANCHES, BURST, SHARED
from enginetui.vllm_watch.reconstruct import agreement
from enginetui.vllm_watch.state import SchedulerLimits

BURST_TOKENS = 300  # each burst request's length past its prompt: ten of them need more blocks than the pool has
POLL_S = 0.25  # /metrics reading interval (the tiny model serves the whole workload in seconds)


class Recorder:
    """Listens to the KV events and polls /metrics on threads until stop()."""

    def __init__(self, url: str, kv_endpoint: str) -> None:
        self.start = time.time()  # t = 0 of every record
        self.frames: list[dict] = []  # the ZMQ messages
        self.metrics: list[dict] = []  # the /metrics readings
        self.steps: list[dict] = []  # what the workload did, when
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._listen, args=(kv_endpoint,), daemon=True),
            threading.Thread(target=self._poll, args=(url,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def t(self) -> float:
        return round(time.time() - self.start, 3)

    def step(self, what: str, **details) -> None:
        self.steps.append({"t": self.t(), "step": what, **details})
        print(f"{self.t():7.1f} s  {what}", file=sys.stderr)

    def stop(self) -> None:
        time.sleep(2 * POLL_S)  # the last batches and a reading after the last step
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _listen(self, endpoint: str) -> None:
        sub: zmq.Socket = zmq.Context.instance().socket(zmq.SUB)
        sub.connect(endpoint)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        while not self._stop.is_set():
            if sub.poll(100):
                topic, seq, payload = sub.recv_multipart()
                self.frames.append(
                    {
                        "t": self.t(),
                        "topic": topic.decode(),
                        "seq": int.from_bytes(seq, "big"),
                        "payload": base64.b64encode(payload).decode(),
                    }
                )
        sub.close(linger=0)

    def _poll(self, url: str) -> None:
        with httpx.Client(base_url=url, timeout=10) as http:
            while not self._stop.is_set():
                self.metrics.append({"t": self.t(), "text": http.get("/metrics").text})
                self._stop.wait(POLL_S)


def complete(http: httpx.Client, model: str, prompt: str, max_tokens: int, **extra) -> dict:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra}
    r = http.post("/v1/completions", json=body)
    r.raise_for_status()
    return r.json()


def run_workload(url: str, rec: Recorder) -> tuple[dict, str]:
    """The fixed workload; returns /v1/models and the streamed completion's raw events."""
    with httpx.Client(base_url=url, timeout=600) as http:
        models = http.get("/v1/models").json()
        model = models["data"][0]["id"]
        time.sleep(2 * POLL_S)  # an idle reading first
        for branch in BRANCHES:
            rec.step("prompt with the shared prefix", prompt=SHARED + branch)
            complete(http, model, SHARED + branch, 48, ignore_eos=True)
        rec.step("the first prompt again (prefix-cache hits)")
        complete(http, model, SHARED + BRANCHES[0], 48, ignore_eos=True)
        rec.step("a streamed completion")
        body = {
            "model": model,
            "prompt": SHARED + BRANCHES[1],
            "max_tokens": 24,
            "temperature": 0,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        with http.stream("POST", "/v1/completions", json=body) as r:
            stream = "".join(r.iter_text())
        for wave in ("a burst of long requests into the pool", "the same burst again (hits, evictions)"):
            rec.step(wave, requests=len(BURST), max_tokens=BURST_TOKENS)
            with ThreadPoolExecutor(len(BURST)) as pool:
                list(pool.map(lambda p: complete(http, model, p, BURST_TOKENS, ignore_eos=True), BURST))
        rec.step("reset the prefix cache")
        http.post("/reset_prefix_cache").raise_for_status()
        rec.step("one more prompt")
        complete(http, model, SHARED + BRANCHES[1], 16, ignore_eos=True)
    return models, stream


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--vllm-python", default=find_vllm_python(), help="vLLM's interpreter (default: $ENGINETUI_VLLM_PYTHON)"
    )
    parser.add_argument("--model", default="core/models/default_model/opt-tiny", help="a local HF model directory")
    parser.add_argument("--out", help="folder for the fixture files")
    parser.add_argument(
        "--measure", metavar="DIR", help="replay a --burst capture in DIR and print each reading against the rebuild"
    )
    parser.add_argument("--burst", action="store_true", help="record the scheduler rebuild's burst through the proxy")
    parser.add_argument("--requests", type=int, default=BURST_REQUESTS, help="--burst: requests sent at once")
    parser.add_argument("--poll-s", type=float, default=BURST_POLL_S, help="--burst: /metrics reading interval")
    parser.add_argument(
        "--kv-events",
        action="store_true",
        help="--burst: record vLLM's KV event batches too (the rebuild's cached blocks are checked against them)",
    )
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="--burst: the first request's number (its prompt: burst_prompt; another number, other prompts)",
    )
    args = parser.parse_args(argv)
    if args.measure:
        return measure_burst(Path(args.measure))
    if not args.out:
        parser.error("pass --out (or --measure DIR)")
    if not args.vllm_python:
        parser.error("pass --vllm-python or set ENGINETUI_VLLM_PYTHON")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = str(Path(args.model).resolve())
    if args.burst:
        return capture_burst(args.vllm_python, model, out, args.requests, args.first, args.poll_s, args.kv_events)
    print("starting vLLM (minutes on a small CPU)…", file=sys.stderr)
    with start_vllm(args.vllm_python, model) as server:
        rec = Recorder(server.url, server.kv_endpoint)
        try:
            models, stream = run_workload(server.url, rec)
        finally:
            rec.stop()
        version = httpx.get(server.url + "/version").json().get("version")
        command = [Path(server.command[0]).name, *server.command[1:]]
    (out / "kv_frames.jsonl").write_text("".join(json.dumps(f) + "\n" for f in rec.frames))
    with lzma.open(out / "metrics.jsonl.xz", "wt") as f:
        f.writelines(json.dumps(m) + "\n" for m in rec.metrics)
    (out / "completion_stream.txt").write_text(stream)
    session = {
        "vllm_version": version,
        "model": model,
        "command": command,
        "models": models,
        "steps": rec.steps,
        "num_frames": len(rec.frames),
        "num_metrics": len(rec.metrics),
    }
    (out / "session.json").write_text(json.dumps(session, indent=1) + "\n")
    print(f"{len(rec.frames)} KV event batches, {len(rec.metrics)} /metrics readings -> {out}", file=sys.stderr)
    return 0


def burst_args(limits: SchedulerLimits) -> tuple[str, ...]:
    """vLLM's flags for the scheduler limits the burst runs under."""
    return ("--max-num-seqs", str(limits.max_num_seqs), "--max-num-batched-tokens", str(limits.max_num_batched_tokens))


def capture_burst(
    python: str,
    model: str,
    out: Path,
    num_requests: int = BURST_REQUESTS,
    first: int = 0,
    poll_s: float = BURST_POLL_S,
    kv_events: bool = False,
) -> int:
    print("starting vLLM (minutes on a small CPU)…", file=sys.stderr)
    record = out / "burst.etrec"
    with start_vllm(
        python,
        model,
        num_blocks=BURST_BLOCKS,
        extra_args=(*burst_args(BURST_LIMITS), "--enable-logging-iteration-details"),
    ) as server:
        state = asyncio.run(
            proxied_burst(
                server.url,
                BURST_LIMITS,
                num_requests=num_requests,
                max_tokens=BURST_MAX_TOKENS,
                record=str(record),
                poll_s=poll_s,
                first=first,
                kv_endpoint=server.kv_endpoint if kv_events else None,
            )
        )
        version = httpx.get(server.url + "/version").json().get("version")
        command = [Path(server.command[0]).name, *server.command[1:]]
        step_lines = [
            line for line in Path(server.log_path).read_text(errors="replace").splitlines() if ITERATION.search(line)
        ]
    with lzma.open(out / "burst.etrec.xz", "wb") as f:
        f.write(record.read_bytes())
    record.unlink()
    with lzma.open(out / STEP_LOG, "wt") as f:
        f.writelines(line + "\n" for line in step_lines)
    session = {
        "vllm_version": version,
        "model": model,
        "command": command,
        "limits": {
            "max_num_seqs": BURST_LIMITS.max_num_seqs,
            "max_num_batched_tokens": BURST_LIMITS.max_num_batched_tokens,
        },
        "requests": num_requests,
        "first": first,
        "max_tokens": BURST_MAX_TOKENS,
        "poll_s": poll_s,
        "kv_events": kv_events,
    }
    (out / "session.json").write_text(json.dumps(session, indent=1) + "\n")
    rebuild = state.rebuild
    if rebuild is not None:
        agree, total = agreement(rebuild.checks)
        print(
            f"rebuild agrees on {agree}/{total} readings; preemptions {rebuild.num_preemptions} rebuilt",
            file=sys.stderr,
        )
    print(f"{len(state.requests)} requests -> {out}", file=sys.stderr)
    return 0


def measure_burst(folder: Path) -> int:
    """Print every reading of a --burst capture against the rebuild (seconds from the first request),
    and how many of vLLM's own steps the rebuild made alike."""
    rebuild = replay_burst(folder).rebuild
    if rebuild is None or not rebuild.checks:
        print(f"{folder}: no rebuild (no limits, pool or model known) or no reading with traffic", file=sys.stderr)
        return 1
    t0 = min(v.arrival for v in rebuild.entered.values())
    print("     t   vLLM run wait pre kv  | rebuilt run wait pre kv")
    for c in rebuild.checks:
        kv = f"{c.kv_blocks:4.0f}" if c.kv_blocks is not None else "   -"
        print(
            f"{c.time - t0:6.3f}   {c.running:8.0f} {c.waiting:4.0f} {c.preemptions:3.0f} {kv}  | "
            f"{c.rebuilt_running:11d} {c.rebuilt_waiting:4d} {c.rebuilt_preemptions:3d} {c.rebuilt_kv_blocks:3d}"
            f"  {'' if c.agrees else 'DISAGREES'}"
        )
    agree, total = agreement(rebuild.checks)
    blocks = [c.blocks_agree for c in rebuild.checks if c.blocks_agree is not None]
    cached = [c.cached_agree for c in rebuild.checks if c.cached_agree is not None]
    print(
        f"agrees ±1 on {agree}/{total} readings; preemptions {rebuild.num_preemptions} rebuilt, "
        f"vLLM {rebuild.checks[-1].preemptions:.0f}; KV blocks held ±1 on {sum(blocks)}/{len(blocks)}"
        + (f"; blocks cached ±1 of the KV events' on {sum(cached)}/{len(cached)}" if cached else "")
    )
    logged = vllm_logged_steps(folder)
    if logged is not None:
        print(
            f"steps: {len(rebuild.steps)} rebuilt, vLLM logged {len(logged)}; alike, in order: "
            f"{matching_steps(rebuild, logged)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
