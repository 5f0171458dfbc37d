"""vLLM's OpenAI server as the peer of `enginetui bench serve --compare vllm-server`.

`VLLMServer` starts `python -m vllm.entrypoints.openai.api_server` with vLLM's interpreter on
127.0.0.1 and a free port, in a session of its own with the model on every core (`peer_env("all")`:
`VLLM_CPU_OMP_THREADS_BIND` = the cores this process may use, none reserved) and the 2 GiB KV space,
waits until /health answers, and on `stop` ends its whole process group (API server, EngineCore):
nothing outlives the benchmark. Its log goes to a temporary file, kept (and its tail shown) on failure.
"""

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from enginetui.bench.vllm_peer import LOG_TAIL_CHARS, VLLMError, end_group, peer_env
from enginetui.flags.engine import as_flags

STARTUP_TIMEOUT_S = 900.0  # vLLM's CPU start (imports, model load, warm-up compile) on a busy machine
POLL_S = 0.5  # how often /health is asked during the start


def server_flags(model_dir: str, engine: dict[str, Any], port: int, log_steps: bool = False) -> list[str]:
    """vLLM's api_server flags: the model, 127.0.0.1:port, and the engine keywords (vllm_engine_kwargs'
    dict: dtype, the shared flags given; booleans as --x / --no-x, skip_tokenizer_init as its flag).
    Its statistics are off unless `log_steps`, which has it log a line per engine step instead."""
    stats = ["--enable-logging-iteration-details"] if log_steps else ["--disable-log-stats"]
    return ["--model", model_dir, "--host", "127.0.0.1", "--port", str(port), *stats, "--uvicorn-log-level", "warning",
            *as_flags(engine)]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class VLLMServer:
    """One vLLM OpenAI server, started on construction; `url` once it answers /health. With `log_steps`
    its log has a line per engine step (`log_text()`; see enginetui/bench/step_kinds.py)."""

    def __init__(self, python: str, model_dir: str, engine: dict[str, Any],
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, log_steps: bool = False) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"  # where it serves
        self.log = tempfile.NamedTemporaryFile(prefix="enginetui-vllm-server-", suffix=".log", delete=False)  # noqa: SIM115
        self.log_path = self.log.name  # its output
        self.failed = False  # it failed: keep the log
        self.proc = subprocess.Popen(  # -P: the working directory (this repository's kernels/) must not shadow packages
            [python, "-P", "-m", "vllm.entrypoints.openai.api_server", *server_flags(model_dir, engine, port, log_steps)],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=peer_env("all"),
            start_new_session=True,
        )
        try:
            self._wait_ready(startup_timeout_s)
        except BaseException:
            self.failed = True
            self.stop()
            raise

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise VLLMError(f"vLLM's server exited (code {self.proc.returncode}) while starting; "
                                f"log {self.log_path}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=5.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(POLL_S)
        raise VLLMError(f"vLLM's server did not answer /health within {timeout_s:.0f} s; "
                        f"log {self.log_path}:\n{self.log_tail()}")

    def log_text(self) -> str:
        """Everything the server has logged so far."""
        self.log.flush()
        return Path(self.log_path).read_text(errors="replace")

    def log_tail(self) -> str:
        return self.log_text()[-LOG_TAIL_CHARS:]

    def stop(self) -> None:
        """End the server's process group (SIGTERM, then SIGKILL) and drop its log unless it failed.
        Idempotent."""
        end_group(self.proc)
        self.log.close()
        if not self.failed and os.path.exists(self.log_path):
            os.unlink(self.log_path)

    def __enter__(self) -> "VLLMServer":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.failed = True
        self.stop()
