"""The Triton kernels compiled for an H100/H200 (sm_90) on this CPU-only machine: tools/aot_check.py."""

import json
import os
import subprocess
import sys

import pytest

from tests.support.checkout import REPO_ROOT

pytestmark = pytest.mark.slow  # a minute of CPU: started first in parallel runs (tests/conftest.py)


def test_kernels_compile_for_sm90_without_spills_in_half_precision(tmp_path):
    out = tmp_path / "aot.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # compile for real, not from a cache
    proc = subprocess.run(
        [sys.executable, "tools/aot_check.py", "--json", str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    attention = [r for r in rows if r["kernel"] == "paged_attention"]
    assert len(attention) == 24 and len(rows) == 30
    assert all(r["target"] == "sm_90" and r["registers"] > 0 for r in rows)
    half = [r for r in attention if "float32" not in r["case"]]
    prompt_tiles = [r for r in half if "64 rows" in r["case"]]  # kernels.variants.PREFILL, the prompt steps' launch
    assert len(prompt_tiles) == 6 and all(r["dot"] == "wgmma" for r in prompt_tiles)  # Hopper's matrix instruction
    assert all(r["dot"] == "mma" for r in half if r not in prompt_tiles)  # bf16 / fp16 dots run on the tensor cores
    assert all(r["spill_bytes"] == 0 for r in half)
    assert all(
        r["widest_load"] == "v4" for r in rows if "default tile" in r["case"] or r["kernel"] != "paged_attention"
    )
