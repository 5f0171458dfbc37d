"""The scheduler rebuild on a live vLLM (vLLM 0.32 CPU, the embedded model): a fresh burst through the
proxy, each /metrics reading and each of vLLM's own steps (its --enable-logging-iteration-details
line) against the rebuild. Runs only when vLLM's interpreter is configured:
ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python (skipped otherwise)."""

import pytest

from enginetui.vllm_watch.capture import capture_burst, matching_steps, replay_burst, vllm_logged_steps
from enginetui.vllm_watch.launch import vllm_python
from enginetui.vllm_watch.reconstruct import agreement
from tests.vllm_watch.recorded import MODEL_DIR

PYTHON = vllm_python()
pytestmark = [pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
              pytest.mark.timeout(1800), pytest.mark.slow]


def test_the_rebuild_follows_a_fresh_burst_on_a_live_vllm(tmp_path):
    assert capture_burst(PYTHON, str(MODEL_DIR), tmp_path, first=500) == 0  # prompts no fixture has
    rebuild = replay_burst(tmp_path).rebuild  # the capture's recording, replayed as it went by
    logged = vllm_logged_steps(tmp_path)
    agree, total = agreement(rebuild.checks)
    print(f"readings {agree}/{total}; steps alike {matching_steps(rebuild, logged)}/{len(logged)}; "
          f"preemptions {rebuild.num_preemptions} rebuilt, vLLM {rebuild.checks[-1].preemptions:.0f}")
    # the target: within ±1 on 95% of readings (five captures of 2026-12-03: 564 of 567)
    assert total >= 20 and agree >= 0.95 * total
    assert rebuild.checks[-1].preemptions > 0  # the pool is small enough to preempt
    assert abs(rebuild.num_preemptions - rebuild.checks[-1].preemptions) <= 2
    assert len(logged) > 300 and matching_steps(rebuild, logged) >= 0.9 * len(logged)
