"""A model runner of fixed tokens and no compute, for tests of everything around the model.

    LLM(model_runner=SCRIPTED_RUNNER)   # or AsyncLLM.from_engine_args(model_runner=SCRIPTED_RUNNER, ...)

EngineCore builds it in place of ModelRunner (EngineConfig.model_runner): the real scheduler,
KV pool, busy loop and events, but every sampled token comes from a script instead of the
model: a request's k-th generated token is the k-th (mod their number) of its prompt's tokens
that are not EOS, so the output repeats the prompt (without BOS), the same whatever else runs,
whatever the sampling settings (requests end by max_tokens, stop strings or stop token ids, never
by EOS; a prompt of nothing but EOS tokens generates token 0).
"""

import time

from enginetui.core.sched.output import SchedulerOutput
from enginetui.core.worker.model_runner import ModelRunnerOutput

SCRIPTED_RUNNER = "tests.fakes.scripted_runner:ScriptedRunner"  # EngineConfig.model_runner value
PACED_RUNNER = "tests.fakes.scripted_runner:PacedScriptedRunner"  # the same, taking PACED_STEP_SECONDS a step
PACED_STEP_SECONDS = 0.01  # how long a paced step takes (as a small model's forward would)


def scripted_token(prompt: list[int], eos_token_ids: list[int], num_generated: int) -> int:
    """The token a request with this prompt generates after `num_generated` others."""
    echo = [t for t in prompt if t not in eos_token_ids] or [0]
    return echo[num_generated % len(echo)]


class ScriptedRunner:
    """Implements the model runner contract (core/worker/runner_class.py) with scripted tokens."""

    def __init__(self, model, num_blocks, block_size, max_num_reqs, max_model_len, dtype, device, seed) -> None:
        self.model = model  # described to clients, never run
        self.prompts: dict[str, list[int]] = {}  # request id -> its prompt
        self.eos: dict[str, list[int]] = {}  # request id -> its EOS token ids
        self.num_tokens: dict[str, int] = {}  # request id -> tokens known (prompt + generated)

    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput:
        """Sample for each request whose scheduled tokens reach its last known token."""
        for req_id in out.finished_req_ids | out.preempted_req_ids:
            self.prompts.pop(req_id, None)
            self.eos.pop(req_id, None)
            self.num_tokens.pop(req_id, None)
        computed: dict[str, int] = {}  # request id -> tokens in the cache before this step
        for new in out.scheduled_new_reqs:
            self.prompts[new.req_id] = list(new.token_ids[: new.num_prompt_tokens])
            self.eos[new.req_id] = list(new.eos_token_ids)
            self.num_tokens[new.req_id] = len(new.token_ids)
            computed[new.req_id] = new.num_computed_tokens
        cached = out.scheduled_cached_reqs
        for req_id, tokens, num_computed in zip(cached.req_ids, cached.new_token_ids, cached.num_computed_tokens):
            self.num_tokens[req_id] += len(tokens)
            computed[req_id] = num_computed
        sampled = {}
        for req_id, n in out.num_scheduled_tokens.items():
            if computed[req_id] + n == self.num_tokens[req_id]:
                prompt = self.prompts[req_id]
                sampled[req_id] = scripted_token(prompt, self.eos[req_id], self.num_tokens[req_id] - len(prompt))
                self.num_tokens[req_id] += 1  # a runner keeps the tokens it samples (the scheduler never resends them)
        return ModelRunnerOutput(sampled=sampled, logprobs={}, forward_ms=0.0, sample_ms=0.0, prepare_ms=0.0)


class PacedScriptedRunner(ScriptedRunner):
    """The scripted runner, taking PACED_STEP_SECONDS a step: a freely running engine streams at a
    pace a test can watch (a step costs no CPU: it sleeps)."""

    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput:
        time.sleep(PACED_STEP_SECONDS)
        return super().execute(out)
