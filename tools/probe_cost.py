"""What the scheduler probe costs vLLM: its decode step at 1 / 16 / 64 running, with vLLM's own scheduler,
with the probe and no subscriber, with a subscriber reading every event, and with one that never reads.

Each mode is one vLLM engine in vLLM's interpreter (in process, stepped and timed the way `bench ops` times
vLLM) on the same dummy-weight model; the modes take turns at each batch size, --repeats passes each, and
the table gives each mode's median step against vLLM's own. Run it alone on the machine.

    python tools/probe_cost.py --vllm-python .vllm-venv/bin/python --json probe-cost.json
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import zmq

from enginetui.bench import saved_result
from enginetui.bench.engines import shared_weights
from enginetui.bench.frozen import frozen
from enginetui.bench.vllm_peer import VLLMPeer, vllm_engine_kwargs
from enginetui.vllm_launch import enginetui_site

MODES = ("vllm", "probe", "probe+reader", "probe+stalled")
STALLED_HWM = 64  # events queued for the subscriber that never reads, then dropped


def probe_address(workdir: Path, mode: str) -> str:
    """Where the probe of a mode's vLLM publishes."""
    return f"ipc://{workdir}/{mode}.sock"


def start_mode(mode: str, python: str, weights: str, engine: dict, workdir: Path) -> VLLMPeer:
    """vLLM in its interpreter; with the probe (its scheduler class and ENGINETUI_PROBE) unless mode is vllm."""
    if mode == "vllm":
        return VLLMPeer(python, weights, engine, "all", in_process=True)
    site = enginetui_site(workdir / "site")  # enginetui importable in vLLM's interpreter, nothing else of this checkout
    address = probe_address(workdir, mode)
    hwm = STALLED_HWM if mode == "probe+stalled" else 100_000
    saved = dict(os.environ)
    os.environ.update({"PYTHONPATH": str(site), "ENGINETUI_PROBE": json.dumps({"endpoint": address, "hwm": hwm})})
    try:
        peer = VLLMPeer(
            python, weights, {**engine, "scheduler_cls": "enginetui.vllm_probe.ProbeScheduler"}, "all", in_process=True
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return peer


class Subscriber:
    """A SUB socket on a probe: `reading` counts every event on a thread; otherwise it connects and never reads."""

    def __init__(self, address: str, reading: bool) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.RCVHWM, STALLED_HWM)
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        self.socket.connect(address)
        self.received = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True) if reading else None
        if self.thread is not None:
            self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            if self.socket.poll(100):
                self.socket.recv()
                self.received += 1

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.socket.close(linger=0)
        self.context.term()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-python", required=True, help="vLLM's interpreter")
    parser.add_argument("--model", default="facebook/opt-125m")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--input-len", type=int, default=128, help="prompt tokens of each decoding request")
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write every pass and the machine as JSON")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    passes: dict[str, dict[int, list[float]]] = {mode: {b: [] for b in args.batch_sizes} for mode in MODES}
    received: dict[str, int] = {}
    with ExitStack() as stack:
        kwargs = {"model": args.model, "load_format": "dummy", "dtype": "float32", "max_num_seqs": 256}
        shared, weights = stack.enter_context(shared_weights(kwargs))
        engine = vllm_engine_kwargs(shared, "float32")
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="enginetui-probe-cost-")))
        peers = {
            mode: stack.enter_context(start_mode(mode, args.vllm_python, str(weights), engine, workdir))
            for mode in MODES
        }
        subscribers = {
            mode: Subscriber(probe_address(workdir, mode), reading=(mode == "probe+reader"))
            for mode in ("probe+reader", "probe+stalled")
        }
        for sub in subscribers.values():
            stack.callback(sub.close)
        vocab = json.loads((Path(weights) / "config.json").read_text())["vocab_size"]
        for batch in args.batch_sizes:
            prompts = [rng.integers(0, vocab, size=args.input_len).tolist() for _ in range(batch)]
            for _ in range(args.repeats):
                for mode in MODES:  # in turns: a drift of the machine hits every mode alike
                    others = [peer.proc for other, peer in peers.items() if other != mode]
                    with frozen(*others):  # an idle vLLM's threads wake often: the others sleep meanwhile
                        measured = peers[mode].ops(prompts, 1024, args.warmup_steps, args.steps, 0.0, [])
                    passes[mode][batch].append(statistics.median(measured["step_ms"]))
        received = {mode: sub.received for mode, sub in subscribers.items()}
    print(f"vLLM decode step (ms, median of {args.steps} steps per pass; {args.repeats} passes), {args.model}, float32")
    print(f"{'running':>7} " + " ".join(f"{mode:>22}" for mode in MODES))
    table = []
    for batch in args.batch_sizes:
        base = statistics.median(passes["vllm"][batch])
        cells, row = [], {"running": batch}
        for mode in MODES:
            runs = passes[mode][batch]
            med = statistics.median(runs)
            row[mode] = {"median_ms": med, "passes_ms": runs, "vs_vllm": med / base}
            cells.append(f"{med:7.2f} ({min(runs):.2f}-{max(runs):.2f}) {med / base:5.3f}x")
        table.append(row)
        print(f"{batch:>7} " + " ".join(f"{c:>22}" for c in cells))
    print(f"events read by the reading subscriber: {received.get('probe+reader')}")
    if args.json:
        data = {"args": vars(args), "rows": table, "events_read": received}
        data |= {"machine": saved_result.machine(), "source": saved_result.source()}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
