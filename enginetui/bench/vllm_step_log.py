"""vLLM's line per engine step, logged by its front end with `--enable-logging-iteration-details`:

    Engine 000: Iteration(12): 3 context requests, 300 context tokens, 4 generation requests,
    4 generation tokens, iteration elapsed time: 212.35 ms, CPU KV cache usage: 64.5%

(one line). vLLM counts a request as "context" while it computes prompt work before its first
output token, and as "generation" after it, a preempted request's recompute included. The elapsed
time is its worker's execution of the step; the KV cache usage, the share of its pool (less the null
block) held after the step.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass

ITERATION = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation "
    r"requests, (\d+) generation tokens, iteration elapsed time: ([\d.]+) ms"
    r"(?:, \w+ KV cache usage: ([\d.]+)%)?"
)


@dataclass(frozen=True, slots=True)
class LoggedStep:
    """One engine step as vLLM logged it."""

    index: int  # vLLM's step number
    context_requests: int  # requests computing prompt work before their first output token
    context_tokens: int  # the tokens they computed
    generation_requests: int  # the other requests scheduled
    generation_tokens: int  # the tokens they computed
    elapsed_ms: float  # the worker's time for the step
    kv_usage: float | None  # the share of the KV pool held after the step (None: not logged)

    @property
    def requests(self) -> int:
        """Requests scheduled in the step."""
        return self.context_requests + self.generation_requests

    @property
    def tokens(self) -> int:
        """Tokens computed in the step."""
        return self.context_tokens + self.generation_tokens


def logged_steps(log_text: str) -> Iterator[LoggedStep]:
    """Every step line of a vLLM server's log, in order."""
    for match in ITERATION.finditer(log_text):
        index, ctx_reqs, ctx_tokens, gen_reqs, gen_tokens, elapsed, usage = match.groups()
        yield LoggedStep(
            int(index),
            int(ctx_reqs),
            int(ctx_tokens),
            int(gen_reqs),
            int(gen_tokens),
            float(elapsed),
            None if usage is None else float(usage) / 100,
        )
