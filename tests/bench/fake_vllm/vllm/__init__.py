"""A stand-in for vLLM with the few names enginetui/bench/vllm_runner.py uses, so the tests can drive
the runner and its pipe without vLLM installed. Its "model" answers each request with the tokens
after the prompt's last one (mod the engine's `vocab`), so outputs are checkable."""

import os

__version__ = "0.0-fake"

STARTED: list[dict] = []  # engine keyword arguments of every engine made in this process


class SamplingParams:
    def __init__(self, temperature, top_p, ignore_eos, max_tokens, detokenize):
        self.temperature, self.max_tokens = temperature, max_tokens


class _Completion:
    def __init__(self, token_ids):
        self.token_ids = token_ids


class RequestOutput:
    def __init__(self, token_ids, finished):
        self.outputs = [_Completion(token_ids)]
        self.finished = finished


def complete(prompt: dict, params: SamplingParams) -> list[int]:
    """The fake model: the tokens counting up from the prompt's last one."""
    last = prompt["prompt_token_ids"][-1]
    return [(last + 1 + i) % 512 for i in range(params.max_tokens)]


class _EngineCore:
    def shutdown(self):
        pass


class _LLMEngine:
    engine_core = _EngineCore()


class LLM:
    def __init__(self, **kwargs):
        if not os.path.exists(os.path.join(kwargs["model"], "config.json")):
            raise ValueError(f"{kwargs['model']} is not a model directory")
        STARTED.append(kwargs)
        self.llm_engine = _LLMEngine()

    def generate(self, prompts, params, use_tqdm=True):
        return [RequestOutput(complete(p, sp), True) for p, sp in zip(prompts, params)]
