"""A real vLLM CPU server with the probe in it (the live test, and the recorded fixture the Pilot test replays).

    python -m tests.vllm_probe.live --out tests/vllm_probe/fixtures/burst.msgpack   # ENGINETUI_VLLM_PYTHON set

vLLM imports this checkout's enginetui through a folder holding only a link to it (the repository's
root on its path would shadow packages with this repository's other folders), as a user's
install (docs/vllm.md) would make it importable.
"""

import argparse
import contextlib
import json
import os
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import msgspec

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import VllmServer, enginetui_site, find_vllm_python, start_vllm

NUM_BLOCKS = 10  # of 32 tokens: a small pool, so that a burst preempts
TOKEN_BUDGET = 64  # tokens per step: prompts are split into chunks
MAX_MODEL_LEN = 256  # vLLM refuses to start with a pool smaller than one request of this length
# Distinct prompts sharing a head of more than one block (prefix-cache hits)
BURST_PROMPT = (
    "In Python, the built-in function that returns the number of items in a list, a string or a "
    "dictionary is called len, and the function that returns {i}"
)


@contextlib.contextmanager
def vllm_with_probe(
    workdir: Path,
    scheduler_cls: str = "enginetui.vllm_probe.ProbeAsyncScheduler",
    hwm: int = 100_000,
    extra_args: tuple[str, ...] = (),
) -> Iterator[tuple[VllmServer, str]]:
    """vLLM serving the embedded model with the probe; yields (server, the probe's address). `hwm`: events
    queued per subscriber (the default, vLLM's KV events' own: a test's subscriber that reads now and then
    loses nothing); `extra_args`: more of vLLM's flags."""
    site = enginetui_site(workdir / "site")
    address = f"ipc://{workdir}/probe.sock"
    added = {"PYTHONPATH": str(site), "ENGINETUI_PROBE": json.dumps({"endpoint": address, "hwm": hwm})}
    saved = {name: os.environ.get(name) for name in added}
    os.environ.update(added)  # start_vllm passes this process's environment on
    try:
        server = start_vllm(
            find_vllm_python(),
            str(DEFAULT_MODEL_DIR),
            workdir=str(workdir / "vllm"),
            num_blocks=NUM_BLOCKS,
            max_model_len=MAX_MODEL_LEN,
            extra_args=(
                "--scheduler-cls",
                scheduler_cls,
                "--max-num-seqs",
                "16",
                "--max-num-batched-tokens",
                str(TOKEN_BUDGET),
                *extra_args,
            ),
        )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    with server:
        yield server, address


def send_burst(url: str, count: int, max_tokens: int = 48, stream: bool = False) -> list[dict]:
    """`count` completions at once through vLLM's OpenAI API (each ignoring EOS: it runs max_tokens). `stream`:
    each streamed with its usage in every chunk, as the outside rebuild needs them (a token's time on the wire)."""
    answers: list[dict] = []

    def one(i: int) -> None:
        body: dict = {
            "model": str(DEFAULT_MODEL_DIR),
            "prompt": BURST_PROMPT.format(i=i),
            "max_tokens": max_tokens,
            "ignore_eos": True,
        }
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        request = urllib.request.Request(
            url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=600) as r:
            data = r.read()
            answers.append({"events": data.decode()} if stream else json.loads(data))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def main() -> None:
    import tempfile

    import zmq

    from enginetui.core.engine.events import decode_event

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where the recorded events go (msgpack list of StepEvents)")
    parser.add_argument("--requests", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vp-") as folder, vllm_with_probe(Path(folder)) as (server, address):
        ctx = zmq.Context.instance()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.connect(address)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        send_burst(server.url, args.requests)
        events = []
        while sub.poll(2000):
            events.append(decode_event(sub.recv()))
        sub.close(linger=0)
    Path(args.out).write_bytes(msgspec.msgpack.encode(events))
    print(f"{len(events)} events, {sum(len(e.preempted) for e in events)} preemptions -> {args.out}")


if __name__ == "__main__":
    main()
