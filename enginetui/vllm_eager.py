"""One switch for every vLLM this project starts (benchmark peers, `bench serve --compare
vllm-server`, the vLLM watch's launcher): ENGINETUI_VLLM_EAGER=1 runs it eagerly (vLLM's
`enforce_eager`), skipping the torch.compile of the model that takes vLLM's CPU build a minute or
more of g++ at every start. The test suite sets it (tests/conftest.py): its vLLM runs check
behaviour, not speed. Benchmarks leave it unset, so vLLM runs as its users run it."""

import os

EAGER_ENV = "ENGINETUI_VLLM_EAGER"


def vllm_eager() -> bool:
    """Whether vLLM is to run eagerly (ENGINETUI_VLLM_EAGER is 1 / true / yes / on)."""
    return os.environ.get(EAGER_ENV, "").strip().lower() in ("1", "true", "yes", "on")
