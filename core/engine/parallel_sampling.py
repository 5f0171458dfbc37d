"""Parallel sampling (`n > 1`), as vLLM does it: one engine request per sample.

The client fans a request with n samples out into n child requests `"{i}_{request_id}"` with
n = 1 (and seed + i when a seed is given, so samples differ but stay reproducible). They share
the prompt, so with prefix caching the children after the first reuse its KV blocks. Their
outputs fold back into the parent's: while streaming, each output carries the one sample that
advanced; at the end (or when not streaming) all n, by index.
"""

from dataclasses import dataclass, field, replace

import msgspec

from enginetui.core.outputs import CompletionOutput, RequestOutput
from enginetui.core.sampling_params import SamplingParams


def child_request_id(index: int, request_id: str) -> str:
    return f"{index}_{request_id}"


@dataclass(slots=True)
class ParentRequest:
    """The client's view of a request with n > 1 samples."""

    request_id: str  # the id the caller used
    params: SamplingParams  # the caller's parameters (n > 1)
    stream: bool  # True: every child output is passed on; False: only the final, aggregated one
    completions: list[CompletionOutput | None] = field(default_factory=list)  # latest output per sample
    unfinished: set[str] = field(default_factory=set)  # child ids still running

    def children(self) -> list[tuple[str, SamplingParams]]:
        """(child request id, its parameters) for every sample."""
        out = []
        for i in range(self.params.n):
            seed = None if self.params.seed is None else self.params.seed + i
            out.append((child_request_id(i, self.request_id), msgspec.structs.replace(self.params, n=1, seed=seed)))
        self.unfinished = {child for child, _ in out}
        self.completions = [None] * self.params.n
        return out

    def child_ids(self) -> list[str]:
        return [child_request_id(i, self.request_id) for i in range(self.params.n)]

    def fold(self, child_id: str, index: int, out: RequestOutput) -> RequestOutput | None:
        """The parent's output for one child output (None when not streaming and not finished)."""
        completion = replace(out.outputs[0], index=index)
        self.completions[index] = completion
        if out.finished:
            self.unfinished.discard(child_id)
        finished = not self.unfinished
        if not self.stream and not finished:
            return None
        outputs = [c for c in self.completions if c is not None] if finished and not self.stream else [completion]
        return replace(out, request_id=self.request_id, outputs=outputs, finished=finished)
