"""The vLLM side of `enginetui bench ... --compare vllm`: run by vLLM's own interpreter.

It imports only the standard library and vLLM (run by path in vLLM's virtual environment). It reads
one JSON command per line on stdin and answers one JSON line per command on the file descriptor that
was its stdout; whatever vLLM prints goes to stderr (the benchmark's log). Every timed pass
starts from a cold prefix cache, as ours does. Commands (`cmd`):

  start       {model, engine, async}: build `LLM` (or `AsyncLLM`) with vLLM's defaults plus `engine`;
              warm it up. Answers {"version", "pid"}.
  throughput  {prompts, output_lens, temperature}: one timed `LLM.generate` of the workload.
              Answers {"elapsed_s", "output_token_ids", "cached_prompt_tokens"}.
  latency     {prompts, output_lens, offsets, temperature}: requests streamed through `AsyncLLM` at their
              arrival offsets. Answers {"duration_s", "timings"} (per request: sent, token_times,
              num_output_tokens, done, in time.perf_counter() seconds).
  ops         {prompts, max_tokens, warmup_steps, steps, temperature, step_prompts}: the in-process engine
              stepped through the prompts, then `steps` decode steps timed and as many profiled
              (step_profiler.py), each with one more prompt of `step_prompts` when given.
              Answers step_profiler's dict and "outputs" (requests in each measured step's output).
  quit        shut the engine down and exit.
A failed command answers {"error": "<traceback>"}.
"""

import asyncio
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

STEPS_TO_FILL = 4096  # at most this many steps to compute an `ops` batch's prompts
WARMUP_PROMPTS = [[11 + i, 22 + i, 33 + i, 44 + i] * 4 for i in range(4)]  # 16 tokens each


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)  # answers go here ...
    os.dup2(2, 1)  # ... and anything else printed to stdout goes to stderr with vLLM's logs
    runner = Runner()
    for line in sys.stdin:
        command = json.loads(line)
        try:
            reply = runner.handle(command)
        except Exception:  # noqa: BLE001 - the benchmark shows the traceback and stops
            reply = {"error": traceback.format_exc()}
        proto.write(json.dumps(reply) + "\n")
        if command["cmd"] == "quit":
            break
    runner.close()


class Runner:
    """One vLLM engine (sync `LLM` or `AsyncLLM`) and the commands that time it."""

    def __init__(self) -> None:
        # vLLM's objects are untyped here: this script runs in vLLM's environment, not enginetui's.
        self.llm: Any = None  # vllm.LLM, for throughput
        self.engine: Any = None  # vllm AsyncLLM, for latency
        self.loop = asyncio.new_event_loop()  # runs AsyncLLM's tasks between commands
        self.num_ops_batches = 0  # `ops` commands served (their request ids are distinct)

    def handle(self, command: dict) -> dict:
        cmd = command["cmd"]
        if cmd == "start":
            return self.start(command["model"], command["engine"], command["async"])
        if cmd == "throughput":
            return self.throughput(command["prompts"], command["output_lens"], command["temperature"])
        if cmd == "latency":
            return self.loop.run_until_complete(
                self.latency(command["prompts"], command["output_lens"], command["offsets"], command["temperature"])
            )
        if cmd == "ops":
            return self.ops(
                command["prompts"],
                command["max_tokens"],
                command["warmup_steps"],
                command["steps"],
                command["temperature"],
                command["step_prompts"],
            )
        if cmd == "quit":
            return {"ok": True}
        raise ValueError(f"unknown command {cmd!r}")

    def start(self, model: str, engine: dict, use_async: bool) -> dict:
        import vllm

        kwargs = {"model": model, "skip_tokenizer_init": True, "disable_log_stats": True, **engine}
        if use_async:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM

            async def make():
                return AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))

            self.engine = self.loop.run_until_complete(make())
            self.loop.run_until_complete(
                self.latency(
                    WARMUP_PROMPTS, [8] * len(WARMUP_PROMPTS), [0.0] * len(WARMUP_PROMPTS), 0.0, prefix="warmup"
                )
            )
        else:
            self.llm = vllm.LLM(**kwargs)
            self.throughput(WARMUP_PROMPTS, [8] * len(WARMUP_PROMPTS), 0.0)
        return {"version": vllm.__version__, "pid": os.getpid()}

    def throughput(self, prompts: list[list[int]], output_lens: list[int], temperature: float) -> dict:
        from vllm.inputs import TokensPrompt

        inputs = [TokensPrompt(prompt_token_ids=p) for p in prompts]
        params = [_params(n, temperature) for n in output_lens]
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset its prefix cache before a timed pass")
        start = time.perf_counter()
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        return {
            "elapsed_s": elapsed,
            "output_token_ids": [list(o.outputs[0].token_ids) for o in outputs],
            "cached_prompt_tokens": sum(o.num_cached_tokens or 0 for o in outputs),
        }

    def ops(
        self,
        prompts: list[list[int]],
        max_tokens: int,
        warmup_steps: int,
        steps: int,
        temperature: float,
        step_prompts: list[list[int]],
    ) -> dict:
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        self.num_ops_batches += 1
        tag = f"ops-{self.num_ops_batches}"
        req_ids = [f"{tag}-{i}" for i in range(len(prompts))]
        params = _params(max_tokens, temperature)
        for req_id, prompt in zip(req_ids, prompts):
            engine.add_request(req_id, TokensPrompt(prompt_token_ids=prompt), params)
        if req_ids:
            _fill(engine, req_ids)
        fresh = iter(enumerate(step_prompts))

        def add_step_prompt() -> None:
            if step_prompts:
                i, prompt = next(fresh)
                engine.add_request(f"{tag}-step-{i}", TokensPrompt(prompt_token_ids=prompt), _params(1, temperature))

        for _ in range(warmup_steps):
            add_step_prompt()
            engine.step()
        outputs: list[int] = []
        result = _step_profiler().profile_steps(lambda: outputs.append(len(engine.step())), steps, add_step_prompt)
        engine.abort_request(req_ids)
        return {**result, "outputs": outputs}

    async def latency(
        self,
        prompts: list[list[int]],
        output_lens: list[int],
        offsets: list[float],
        temperature: float,
        prefix: str = "bench",
    ) -> dict:
        if not await self.engine.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset its prefix cache before a timed pass")
        t0 = time.perf_counter()
        timings = await asyncio.gather(
            *(
                self._one_request(f"{prefix}-{i}", p, _params(n, temperature), offsets[i], t0)
                for i, (p, n) in enumerate(zip(prompts, output_lens))
            )
        )
        return {"duration_s": max(t["done"] for t in timings) - t0, "timings": timings}

    async def _one_request(self, request_id: str, prompt: list[int], params, delay: float, t0: float) -> dict:
        """Send one request at its arrival time; the client-side timings of its streamed outputs."""
        from vllm.inputs import TokensPrompt

        await asyncio.sleep(max(0.0, t0 + delay - time.perf_counter()))
        timing: dict[str, Any] = {"sent": time.perf_counter(), "token_times": [], "num_output_tokens": 0, "done": 0.0}
        async for out in self.engine.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id):
            now = time.perf_counter()
            num_tokens = len(out.outputs[0].token_ids)
            if num_tokens > timing["num_output_tokens"]:
                timing["token_times"].append(now)
                timing["num_output_tokens"] = num_tokens
            if out.finished:
                timing["done"] = now
        return timing

    def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
        if self.llm is not None:
            self.llm.llm_engine.engine_core.shutdown()  # its EngineCore and worker processes


def _fill(engine, req_ids: list[str]) -> None:
    """Step until every request has its first token: from then on, all of them decode."""
    started: set[str] = set()
    for _ in range(STEPS_TO_FILL):
        started.update(out.request_id for out in engine.step() if out.outputs[0].token_ids)
        if len(started) == len(req_ids):
            return
    raise RuntimeError(f"{len(started)} of {len(req_ids)} requests decoding after {STEPS_TO_FILL} steps")


def _step_profiler():
    """enginetui/bench/step_profiler.py, loaded by path (enginetui is not installed in vLLM's environment)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("step_profiler", Path(__file__).with_name("step_profiler.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _params(output_len: int, temperature: float):
    """The benchmark's sampling: fixed length (ignore_eos), no top-k / top-p cut, no detokenizing."""
    from vllm import SamplingParams

    return SamplingParams(temperature=temperature, top_p=1.0, ignore_eos=True, max_tokens=output_len, detokenize=False)


if __name__ == "__main__":  # vLLM starts its engine processes with spawn, which re-imports this file
    main()
