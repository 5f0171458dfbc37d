"""A stand-in for vLLM with the few names enginetui/bench/vllm_runner.py uses, so the tests can drive
the runner and its pipe without vLLM installed. Its "model" answers each request with the tokens
after the prompt's last one (mod the engine's `vocab`), so outputs are checkable; its prefix cache
remembers whole prompts until reset, as vLLM's keeps the blocks of finished requests."""

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
    def __init__(self, token_ids, finished, num_cached_tokens=0, request_id=""):
        self.request_id = request_id
        self.outputs = [_Completion(token_ids)]
        self.finished = finished
        self.num_cached_tokens = num_cached_tokens


class PrefixCache:
    """Prompts seen since the last reset; a prompt seen before is cached but for its last token."""

    def __init__(self):
        self.seen: set[tuple[int, ...]] = set()  # prompts served since the last reset

    def lookup(self, prompt: dict) -> int:
        ids = tuple(prompt["prompt_token_ids"])
        cached = len(ids) - 1 if ids in self.seen else 0
        self.seen.add(ids)
        return cached

    def reset(self) -> bool:
        self.seen.clear()
        return True


def complete(prompt: dict, params: SamplingParams) -> list[int]:
    """The fake model: the tokens counting up from the prompt's last one."""
    last = prompt["prompt_token_ids"][-1]
    return [(last + 1 + i) % 512 for i in range(params.max_tokens)]


class _EngineCore:
    def shutdown(self):
        pass


class _Request:
    def __init__(self, request_id, prompt, params):
        self.request_id, self.prompt, self.params = request_id, prompt, params
        self.token_ids: list[int] = []  # generated so far


class _LLMEngine:
    """The engine `LLM.llm_engine` steps by hand (bench ops): each step gives every request its next
    token, through a small torch matrix product (an operator for the profiler to see)."""

    engine_core = _EngineCore()

    def __init__(self):
        self.requests: dict[str, _Request] = {}  # unfinished, by id

    def add_request(self, request_id, prompt, params):
        self.requests[request_id] = _Request(request_id, prompt, params)

    def abort_request(self, request_ids):
        for request_id in request_ids:
            self.requests.pop(request_id, None)

    def step(self):
        import torch

        torch.mm(torch.ones(8, 8), torch.ones(8, 8))
        outputs = []
        for request in list(self.requests.values()):
            request.token_ids = complete(request.prompt, request.params)[: len(request.token_ids) + 1]
            finished = len(request.token_ids) == request.params.max_tokens
            outputs.append(RequestOutput(list(request.token_ids), finished, request_id=request.request_id))
            if finished:
                del self.requests[request.request_id]
        return outputs


class LLM:
    def __init__(self, **kwargs):
        if not os.path.exists(os.path.join(kwargs["model"], "config.json")):
            raise ValueError(f"{kwargs['model']} is not a model directory")
        STARTED.append(kwargs)
        self.llm_engine = _LLMEngine()
        self.cache = PrefixCache()

    def reset_prefix_cache(self):
        return self.cache.reset()

    def generate(self, prompts, params, use_tqdm=True):
        return [RequestOutput(complete(p, sp), True, self.cache.lookup(p)) for p, sp in zip(prompts, params)]
