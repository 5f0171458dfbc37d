"""A stand-in for `python -m vllm.entrypoints.openai.api_server`: the tests' fake vLLM server
(tests/fakes/vllm_server.py) as an echo server of the model it is given, with vLLM's line per engine
step on stdout under --enable-logging-iteration-details. It writes the flags it was given and its
environment's vLLM CPU variables to $FAKE_VLLM_SERVER_LOG (a JSON line), so a test can check them, and
it starts a child process that must not outlive it (as vLLM's EngineCore)."""

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import vllm

sys.path.append(str(Path(__file__).resolve().parents[6]))  # the checkout: tests.fakes
from tests.fakes.vllm_server import FakeVllm  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--enable-logging-iteration-details", action="store_true")
    args, rest = parser.parse_known_args()
    engine_core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.environ["FAKE_VLLM_SERVER_LOG"], "a") as log:
        env = {k: v for k, v in os.environ.items() if k.startswith("VLLM_CPU")}
        log.write(json.dumps({"argv": sys.argv[1:], "engine_core_pid": engine_core.pid, "env": env}) + "\n")
    FakeVllm(
        echo_model=args.model,
        log_steps=args.enable_logging_iteration_details,
        port=args.port,
        version=vllm.__version__,
    )
    signal.pause()  # serves (on its threads) until the launcher stops the process group


if __name__ == "__main__":
    main()
