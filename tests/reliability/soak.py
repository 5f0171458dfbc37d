"""Soak: thousands of random requests with random aborts on a tiny KV pool, invariants checked every step.

    python -m tests.reliability.soak --requests 3000 --seconds 600     # the long form, on demand
(CI runs the short form through tests/reliability/test_soak.py.)

Reports requests completed / aborted / rejected / errored, preemptions, blocks leaked (must be 0),
requests lost (must be 0) and the peak memory of both processes.
"""

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass, field

import psutil

from enginetui.core.config import EngineConfig
from enginetui.core.engine.llm_engine import LLMEngine
from enginetui.core.sampling_params import SamplingParams


@dataclass
class SoakReport:
    """What one soak run saw."""

    submitted: int = 0  # requests accepted by the engine
    invalid: int = 0  # requests refused with ValueError before reaching the engine
    finished: dict[str, int] = field(default_factory=dict)  # finish reason -> count
    finals_per_request: dict[str, int] = field(default_factory=dict)  # request id -> final outputs seen
    preemptions: int = 0  # preemptions since the engine started
    steps: int = 0  # engine steps driven
    blocks_leaked: int = 0  # pool blocks not free once everything ended
    requests_lost: int = 0  # submitted requests with no final output
    requests_duplicated: int = 0  # requests with more than one final output
    peak_rss_mb: dict[str, float] = field(default_factory=dict)  # process -> peak resident memory
    seconds: float = 0.0  # wall time

    def ok(self) -> bool:
        return self.blocks_leaked == 0 and self.requests_lost == 0 and self.requests_duplicated == 0


def random_params(rng: random.Random) -> SamplingParams:
    return SamplingParams(
        temperature=rng.choice([0.0, 0.7, 1.0]),
        top_p=rng.choice([1.0, 0.9]),
        top_k=rng.choice([0, 20]),
        max_tokens=rng.randint(1, 24),
        seed=rng.choice([None, rng.randrange(1000)]),
        stop=rng.choice([None, [" the"], ["e"]]),
        ignore_eos=rng.random() < 0.5,
        presence_penalty=rng.choice([0.0, 0.5]),
    )


def random_prompt(rng: random.Random, vocab: int):
    kind = rng.random()
    if kind < 0.05:
        return ""  # invalid: empty
    if kind < 0.08:
        return [2, vocab + 5]  # invalid: unknown token id
    if kind < 0.5:
        return " ".join(
            rng.choice(["the", "function", "class", "returns", "a", "list", "of"]) for _ in range(rng.randint(1, 40))
        )
    return [2] + [rng.randrange(4, vocab) for _ in range(rng.randint(1, rng.choice([8, 40, 150, 200])))]


def run_soak(
    model: str | None, num_requests: int, seconds: float, seed: int = 0, multiprocess: bool = True, num_blocks: int = 12
) -> SoakReport:
    rng = random.Random(seed)
    config = EngineConfig(
        model=model,
        num_gpu_blocks_override=num_blocks,
        block_size=16,
        max_num_batched_tokens=96,
        max_model_len=256,
        debug_invariants=True,
        seed=seed,
    )
    engine = LLMEngine(config, multiprocess=multiprocess)
    report = SoakReport()
    procs = {"client": psutil.Process(), "engine": psutil.Process(engine.info.pid)}
    live: set[str] = set()
    start = time.monotonic()
    next_id = 0
    try:
        while (next_id < num_requests or live) and time.monotonic() - start < seconds:
            while next_id < num_requests and len(live) < 64 and rng.random() < 0.7:
                req_id = f"soak-{next_id}"
                next_id += 1
                try:
                    engine.add_request(req_id, random_prompt(rng, engine.info.vocab_size), random_params(rng))
                except ValueError:
                    report.invalid += 1
                    continue
                report.submitted += 1
                report.finals_per_request[req_id] = 0
                live.add(req_id)
            if live and rng.random() < 0.05:
                engine.abort_request([rng.choice(sorted(live))])
            for out in engine.step():
                if out.finished:
                    report.finals_per_request[out.request_id] += 1
                    reason = out.outputs[0].finish_reason
                    report.finished[reason] = report.finished.get(reason, 0) + 1
                    live.discard(out.request_id)
            report.steps += 1
            for name, proc in procs.items():
                rss = proc.memory_info().rss / 2**20
                report.peak_rss_mb[name] = max(report.peak_rss_mb.get(name, 0.0), round(rss, 1))
        snapshot = engine.snapshot()
        report.blocks_leaked = snapshot.num_blocks - snapshot.num_free_blocks
        report.preemptions = snapshot.total_preemptions
    finally:
        engine.shutdown()
    report.requests_lost = sum(1 for n in report.finals_per_request.values() if n == 0)
    report.requests_duplicated = sum(1 for n in report.finals_per_request.values() if n > 1)
    report.seconds = round(time.monotonic() - start, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model directory or id (default: the embedded model)")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-process", action="store_true", help="run EngineCore in this process")
    args = parser.parse_args()
    report = run_soak(args.model, args.requests, args.seconds, args.seed, multiprocess=not args.in_process)
    summary = asdict(report)
    summary.pop("finals_per_request")
    print(json.dumps(summary, indent=2))
    print(
        f"soak {'OK' if report.ok() else 'FAILED'}: {report.submitted} requests, {report.finished}, "
        f"{report.blocks_leaked} blocks leaked, {report.requests_lost} lost, {report.seconds}s"
    )
    raise SystemExit(0 if report.ok() else 1)


if __name__ == "__main__":
    main()
