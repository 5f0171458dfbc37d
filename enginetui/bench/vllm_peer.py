"""vLLM as the benchmarks' peer: the same prompts and weights, through vLLM's own interpreter.

`VLLMPeer` starts `enginetui/bench/vllm_runner.py` with the interpreter of vLLM's virtual
environment (`--vllm-python`, default the `ENGINETUI_VLLM_PYTHON` environment variable) and drives
it over a JSON-lines pipe; `start_peer_server` starts vLLM's OpenAI server on the same engine keywords.
vLLM keeps its defaults; `cores` chooses its CPU thread binding (enginetui/vllm_launch.py's vllm_env).
Its logs go to a temporary file, kept (and its tail shown) only if it fails.
"""

import json
import subprocess
from pathlib import Path
from typing import Any

from enginetui.flags.engine import as_flags
from enginetui.vllm_launch import VLLMError, VllmServer, end_group, start_runner, start_server, vllm_eager, vllm_env

RUNNER = Path(__file__).with_name("vllm_runner.py")  # run by that interpreter
VLLM_COMPETING = ("none", "busy")  # the competing loads vLLM is timed beside too (it has no dashboard)


PASSED_THROUGH = (
    "seed",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enable_chunked_prefill",
)  # our engine flags vLLM gets too, when given (same names)


def vllm_engine_kwargs(engine_kwargs: dict[str, Any], dtype: str) -> dict[str, Any]:
    """vLLM's `LLM` keywords for our engine's: the dtype our engine ran in, and the flags given that
    vLLM shares; vLLM's own defaults otherwise (eager only where ENGINETUI_VLLM_EAGER asks)."""
    kwargs: dict[str, Any] = {"dtype": dtype}
    kwargs.update({k: engine_kwargs[k] for k in PASSED_THROUGH if engine_kwargs.get(k) is not None})
    if vllm_eager():
        kwargs["enforce_eager"] = True  # ENGINETUI_VLLM_EAGER (the tests): no compile at start
    return kwargs


def server_flags(engine: dict[str, Any], log_steps: bool = False) -> list[str]:
    """vLLM's api_server flags for the engine keywords (vllm_engine_kwargs' dict: dtype, the shared flags
    given; booleans as --x / --no-x, skip_tokenizer_init as its flag). Its statistics are off unless
    `log_steps`, which has it log a line per engine step instead (see enginetui/bench/step_kinds.py)."""
    stats = ["--enable-logging-iteration-details"] if log_steps else ["--disable-log-stats"]
    return [*stats, "--uvicorn-log-level", "warning", *as_flags(engine)]


def start_peer_server(python: str, model_dir: str, engine: dict[str, Any], log_steps: bool = False) -> VllmServer:
    """vLLM's OpenAI server as the peer of `bench serve --compare vllm-server`, the model on every core."""
    return start_server(python, model_dir, server_flags(engine, log_steps), env=vllm_env("all"))


class VLLMPeer:
    """One vLLM engine in its own interpreter; `throughput` / `latency` time it on a workload."""

    def __init__(
        self,
        python: str,
        model_dir: str,
        engine: dict[str, Any],
        cores: str = "default",
        use_async: bool = False,
        startup_timeout_s: float = 900.0,
        in_process: bool = False,
    ) -> None:
        self.cores = cores  # "default" or "all"
        self.in_flight = False  # a command was sent and its answer not read (e.g. Ctrl-C while vLLM starts)
        self.runner = start_runner(python, RUNNER, vllm_env(cores, in_process=in_process))  # its log kept if failed
        self.proc = self.runner.proc
        try:
            reply = self._call(
                {"cmd": "start", "model": model_dir, "engine": engine, "async": use_async}, startup_timeout_s
            )
        except BaseException:
            self.close()
            raise
        self.version = reply["version"]  # vLLM's version string

    def throughput(self, prompts: list[list[int]], output_lens: list[int], temperature: float) -> dict[str, Any]:
        """One timed LLM.generate: {"elapsed_s", "output_token_ids"}."""
        return self._call(
            {"cmd": "throughput", "prompts": prompts, "output_lens": output_lens, "temperature": temperature}
        )

    def latency(
        self, prompts: list[list[int]], output_lens: list[int], offsets: list[float], temperature: float
    ) -> dict[str, Any]:
        """Requests at their arrival offsets, streamed: {"duration_s", "timings"}."""
        return self._call(
            {
                "cmd": "latency",
                "prompts": prompts,
                "output_lens": output_lens,
                "offsets": offsets,
                "temperature": temperature,
            }
        )

    def ops(
        self,
        prompts: list[list[int]],
        max_tokens: int,
        warmup_steps: int,
        steps: int,
        temperature: float,
        step_prompts: list[list[int]],
    ) -> dict[str, Any]:
        """Decode steps of one request per prompt, each step also computing the next of `step_prompts`
        when given (one per warm-up and measured step), timed then profiled (needs `in_process`):
        step_profiler.profile_steps's dict, and "outputs" (requests out of each measured step)."""
        return self._call(
            {
                "cmd": "ops",
                "prompts": prompts,
                "max_tokens": max_tokens,
                "warmup_steps": warmup_steps,
                "steps": steps,
                "temperature": temperature,
                "step_prompts": step_prompts,
            }
        )

    def close(self) -> None:
        """Ask vLLM to shut down, unless it is still busy with a command (it would read the request only
        once done: minutes, for a start); end the process group if it does not. Idempotent."""
        if self.proc.poll() is None and not self.in_flight:
            try:
                self._call({"cmd": "quit"}, timeout_s=60.0)
                self.proc.wait(timeout=30)
            except (VLLMError, subprocess.TimeoutExpired, OSError):
                pass
        self.runner.stop(grace_s=10.0)  # the runner, and any engine process vLLM left behind
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    def __enter__(self) -> "VLLMPeer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, command: dict[str, Any], timeout_s: float = 3600.0) -> dict[str, Any]:
        try:
            return self._exchange(command, timeout_s)
        except VLLMError:
            self.runner.failed = True
            raise

    def _exchange(self, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        stdin = self.proc.stdin
        assert stdin is not None  # a pipe
        try:
            stdin.write(json.dumps(command) + "\n")
            stdin.flush()
        except OSError as exc:
            raise VLLMError(f"vLLM runner is gone ({exc}); its log: {self.runner.log_tail()}") from None
        self.in_flight = True
        line = _readline(self.proc, timeout_s)
        self.in_flight = False
        if not line:
            raise VLLMError(
                f"vLLM exited (code {self.proc.poll()}) during {command['cmd']!r}; "
                f"log {self.runner.log_path}:\n{self.runner.log_tail()}"
            )
        reply = json.loads(line)
        if "error" in reply:
            raise VLLMError(f"vLLM failed in {command['cmd']!r}:\n{reply['error']}\nlog {self.runner.log_path}")
        return reply


def _readline(proc: subprocess.Popen, timeout_s: float) -> str:
    """One line of the runner's answers, or "" if it exits (or the time is up: then it is killed)."""
    import selectors

    stdout = proc.stdout
    assert stdout is not None  # a pipe
    with selectors.DefaultSelector() as sel:
        sel.register(stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            end_group(proc)
            return ""
    return stdout.readline()
