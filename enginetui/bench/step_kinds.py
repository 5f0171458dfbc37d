"""Model time per step kind, this engine's server against vLLM's (`bench serve --compare vllm-server
--step-times`): where each millisecond of the two servers goes, step by step.

Ours: every step event the server recorded (`exec_ms`: the model runner's prepare, forward and
sampling). vLLM's: the line its front-end logs for every engine step with
`--enable-logging-iteration-details` ("Iteration(N): C context requests, T context tokens, G
generation requests, …, iteration elapsed time: X ms"; the elapsed time is its worker's execution of
the step, forward and sampling). Both sides sort their steps by the same kinds: decode-only steps by
how many requests they decode, steps with prompt work by how many prompt tokens they compute (the
decodes riding along included in the time). vLLM counts a request's prompt work as "context" until
its first output token; ours counts prompt and recompute work alike, which differ only after a
preemption (none below saturation).
"""

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from statistics import median

from enginetui.bench.vllm_step_log import logged_steps
from enginetui.core.record.reader import read_recording

DECODE_BUCKETS = (1, 2, 4, 8, 16, 32)  # decode-only steps: "decode N" up to each of these requests
PREFILL_BUCKETS = (128, 512, 2048)  # steps with prompt work: up to each of these prompt tokens


@dataclass(frozen=True, slots=True)
class StepSample:
    """One engine step: its shape and its model time."""

    prefill_tokens: int  # prompt (or recompute) tokens computed
    decode_requests: int  # requests decoding one token
    model_ms: float  # the model's part of the step (forward and sampling)


@dataclass(frozen=True, slots=True)
class KindRow:
    """One step kind, both servers."""

    kind: str  # e.g. "decode 3-4", "prompt 129-512 tok"
    ours_steps: int  # our steps of this kind
    ours_ms: float | None  # their median model time (None: none)
    vllm_steps: int  # vLLM's steps of this kind
    vllm_ms: float | None  # their median model time (None: none)

    @property
    def ratio(self) -> float | None:
        return None if self.ours_ms is None or not self.vllm_ms else self.ours_ms / self.vllm_ms


@dataclass(frozen=True, slots=True)
class StepComparison:
    """Every step of both servers over the whole benchmark (warm-up included on both sides)."""

    rows: list[KindRow]  # per step kind, in the order of KINDS
    ours_total_ms: float  # our model time over all steps
    vllm_total_ms: float  # vLLM's model time over all steps
    ours_steps: int  # our steps
    vllm_steps: int  # vLLM's steps


def _bucket(value: int, bounds: tuple[int, ...]) -> str:
    low = 1
    for bound in bounds:
        if value <= bound:
            return str(bound) if low == bound else f"{low}-{bound}"
        low = bound + 1
    return f"{low}+"


def step_kind(step: StepSample) -> str:
    """The kind a step is counted under."""
    if step.prefill_tokens:
        return f"prompt {_bucket(step.prefill_tokens, PREFILL_BUCKETS)} tok"
    return f"decode {_bucket(step.decode_requests, DECODE_BUCKETS)}"


def _all_kinds() -> list[str]:
    decode = [step_kind(StepSample(0, n, 0.0)) for n in (*DECODE_BUCKETS, DECODE_BUCKETS[-1] + 1)]
    prompt = [step_kind(StepSample(n, 0, 0.0)) for n in (*PREFILL_BUCKETS, PREFILL_BUCKETS[-1] + 1)]
    return list(dict.fromkeys(decode + prompt))


KINDS = _all_kinds()  # every kind, decode-only steps first, each group from the smallest


def ours_steps(recording: str) -> Iterator[StepSample]:
    """Our server's steps, from the step events it recorded (steps that computed nothing left out)."""
    rec = read_recording(recording)
    for event in rec.events():
        if event.is_step and event.num_scheduled_tokens:
            yield StepSample(event.num_prefill_tokens, event.num_decode_tokens, event.exec_ms)


def vllm_steps(log_text: str) -> Iterator[StepSample]:
    """vLLM's steps, from its server's log with --enable-logging-iteration-details."""
    for step in logged_steps(log_text):
        yield StepSample(step.context_tokens, step.generation_requests, step.elapsed_ms)


def compare_steps(ours: Iterable[StepSample], theirs: Iterable[StepSample]) -> StepComparison:
    """Both servers' steps sorted by kind, with the median model time of each."""
    ours, theirs = list(ours), list(theirs)
    by_kind: tuple[dict[str, list[float]], dict[str, list[float]]] = (defaultdict(list), defaultdict(list))
    for side, steps in zip(by_kind, (ours, theirs)):
        for step in steps:
            side[step_kind(step)].append(step.model_ms)
    rows = []
    for kind in KINDS:
        a, b = by_kind[0].get(kind, []), by_kind[1].get(kind, [])
        if a or b:
            rows.append(KindRow(kind, len(a), median(a) if a else None, len(b), median(b) if b else None))
    return StepComparison(rows, sum(s.model_ms for s in ours), sum(s.model_ms for s in theirs), len(ours), len(theirs))
