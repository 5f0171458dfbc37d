"""vLLM as the benchmarks' peer: the same prompts and weights, through vLLM's own interpreter.

`VLLMPeer` starts `enginetui/bench/vllm_runner.py` with the interpreter of vLLM's virtual
environment (`--vllm-python`, default the `ENGINETUI_VLLM_PYTHON` environment variable) and drives
it over a JSON-lines pipe. vLLM keeps its defaults; `cores` chooses its CPU thread binding:
"default" is vLLM's own (on CPU it reserves one core for its front-end and runs the model on the
rest), "all" gives the model every core (`VLLM_CPU_OMP_THREADS_BIND=0-N`, none reserved).
Its logs go to a temporary file, kept (and its tail shown) only if it fails.
"""

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from enginetui.vllm_eager import vllm_eager

VLLM_PYTHON_ENV = "ENGINETUI_VLLM_PYTHON"  # the vLLM interpreter, when --vllm-python is not given
RUNNER = Path(__file__).with_name("vllm_runner.py")  # run by that interpreter
VLLM_COMPETING = ("none", "busy")  # the competing loads vLLM is timed beside too (it has no dashboard)
CORE_MODES = ("default", "all")  # vLLM's own thread binding / the model on every core
KV_SPACE_GIB = "2"  # VLLM_CPU_KVCACHE_SPACE unless set: our engine's default CPU pool is 2 GiB too
LOG_TAIL_CHARS = 4000  # how much of vLLM's log a failure shows


class VLLMError(RuntimeError):
    """vLLM could not be found, failed to start, or a command failed."""


def vllm_python(flag: str | None) -> str:
    """The interpreter to run vLLM with: the flag, else the environment variable; checked to exist."""
    path = flag or os.environ.get(VLLM_PYTHON_ENV, "")
    if not path:
        raise ValueError(f"comparing with vLLM needs vLLM's interpreter: pass --vllm-python PATH or set "
                         f"{VLLM_PYTHON_ENV} (the python of an environment with vllm installed; the README's "
                         f"\"The differential test\" sets one up)")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ValueError(f"vLLM interpreter {path!r} (from --vllm-python or {VLLM_PYTHON_ENV}) is not an executable file")
    return path


PASSED_THROUGH = ("seed", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching",
                  "enable_chunked_prefill")  # our engine flags vLLM gets too, when given (same names)


def vllm_engine_kwargs(engine_kwargs: dict[str, Any], dtype: str) -> dict[str, Any]:
    """vLLM's `LLM` keywords for our engine's: the dtype our engine ran in, and the flags given that
    vLLM shares; vLLM's own defaults otherwise (eager only where ENGINETUI_VLLM_EAGER asks)."""
    kwargs: dict[str, Any] = {"dtype": dtype}
    kwargs.update({k: engine_kwargs[k] for k in PASSED_THROUGH if engine_kwargs.get(k) is not None})
    if vllm_eager():
        kwargs["enforce_eager"] = True  # ENGINETUI_VLLM_EAGER (the tests): no compile at start
    return kwargs


def peer_env(cores: str, base: dict[str, str] | None = None, in_process: bool = False) -> dict[str, str]:
    """The environment vLLM runs in for a cores mode (see the module docstring); `in_process`: its
    EngineCore runs in the runner's process (what `ops` profiles) rather than a child of its own."""
    env = dict(os.environ if base is None else base)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_SPACE_GIB)
    if in_process:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if cores == "all":
        cpus = sorted(os.sched_getaffinity(0))
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cpus)
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    elif cores != "default":
        raise ValueError(f"vLLM cores mode must be one of {', '.join(CORE_MODES)}, got {cores!r}")
    return env


class VLLMPeer:
    """One vLLM engine in its own interpreter; `throughput` / `latency` time it on a workload."""

    def __init__(self, python: str, model_dir: str, engine: dict[str, Any], cores: str = "default",
                 use_async: bool = False, startup_timeout_s: float = 900.0, in_process: bool = False) -> None:
        self.cores = cores  # "default" or "all"
        self.log = tempfile.NamedTemporaryFile(prefix="enginetui-vllm-", suffix=".log", delete=False)  # noqa: SIM115
        self.log_path = self.log.name  # where vLLM's output goes
        self.failed = False  # a command failed: keep the log
        self.in_flight = False  # a command was sent and its answer not read (e.g. Ctrl-C while vLLM starts)
        self.proc = subprocess.Popen(  # -P: the runner's folder must not shadow stdlib modules (profile.py)
            [python, "-P", str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=peer_env(cores, in_process=in_process), text=True, start_new_session=True,
        )
        try:
            reply = self._call({"cmd": "start", "model": model_dir, "engine": engine, "async": use_async},
                               startup_timeout_s)
        except BaseException:
            self.close()
            raise
        self.version = reply["version"]  # vLLM's version string

    def throughput(self, prompts: list[list[int]], output_lens: list[int], temperature: float) -> dict[str, Any]:
        """One timed LLM.generate: {"elapsed_s", "output_token_ids"}."""
        return self._call({"cmd": "throughput", "prompts": prompts, "output_lens": output_lens,
                           "temperature": temperature})

    def latency(self, prompts: list[list[int]], output_lens: list[int], offsets: list[float],
                temperature: float) -> dict[str, Any]:
        """Requests at their arrival offsets, streamed: {"duration_s", "timings"}."""
        return self._call({"cmd": "latency", "prompts": prompts, "output_lens": output_lens, "offsets": offsets,
                           "temperature": temperature})

    def ops(self, prompts: list[list[int]], max_tokens: int, warmup_steps: int, steps: int,
            temperature: float, step_prompts: list[list[int]]) -> dict[str, Any]:
        """Decode steps of one request per prompt, each step also computing the next of `step_prompts`
        when given (one per warm-up and measured step), timed then profiled (needs `in_process`):
        step_profiler.profile_steps's dict, and "outputs" (requests out of each measured step)."""
        return self._call({"cmd": "ops", "prompts": prompts, "max_tokens": max_tokens, "warmup_steps": warmup_steps,
                           "steps": steps, "temperature": temperature, "step_prompts": step_prompts})

    def close(self) -> None:
        """Ask vLLM to shut down, unless it is still busy with a command (it would read the request only
        once done: minutes, for a start); end the process group if it does not. Idempotent."""
        if self.proc.poll() is None and not self.in_flight:
            try:
                self._call({"cmd": "quit"}, timeout_s=60.0)
                self.proc.wait(timeout=30)
            except (VLLMError, subprocess.TimeoutExpired, OSError):
                pass
        end_group(self.proc)  # the runner, and any engine process vLLM left behind
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.log.close()
        if not self.failed and os.path.exists(self.log_path):
            os.unlink(self.log_path)

    def __enter__(self) -> "VLLMPeer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, command: dict[str, Any], timeout_s: float = 3600.0) -> dict[str, Any]:
        try:
            return self._exchange(command, timeout_s)
        except VLLMError:
            self.failed = True
            raise

    def _exchange(self, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        stdin = self.proc.stdin
        assert stdin is not None  # a pipe
        try:
            stdin.write(json.dumps(command) + "\n")
            stdin.flush()
        except OSError as exc:
            raise VLLMError(f"vLLM runner is gone ({exc}); its log: {self._log_tail()}") from None
        self.in_flight = True
        line = _readline(self.proc, timeout_s)
        self.in_flight = False
        if not line:
            raise VLLMError(f"vLLM exited (code {self.proc.poll()}) during {command['cmd']!r}; "
                            f"log {self.log_path}:\n{self._log_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise VLLMError(f"vLLM failed in {command['cmd']!r}:\n{reply['error']}\nlog {self.log_path}")
        return reply

    def _log_tail(self) -> str:
        self.log.flush()
        return Path(self.log_path).read_text(errors="replace")[-LOG_TAIL_CHARS:]


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


def end_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End every process of the runner's session (it started its own): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # nobody left
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if proc.poll() is None:
                time.sleep(0.05)
                continue
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
    proc.wait()
