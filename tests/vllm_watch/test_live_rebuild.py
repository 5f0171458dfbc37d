"""The scheduler rebuild on a live vLLM (vLLM 0.32 CPU, the embedded model): a fresh burst through the
proxy, each /metrics reading and each of vLLM's own steps (its --enable-logging-iteration-details
line) against the rebuild. Runs only when vLLM's interpreter is configured:
ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python (skipped otherwise).

The agreement is a measurement of the wire: on a busy machine (CI runs slow tests beside other workers)
the tokens go by late and in lumps, so the bound is looser than on a quiet one (docs/vllm.md). Where the
machine was too busy for the watcher to take the readings it asks for, the test is skipped with the
counts (the recorded captures of test_sched_rebuild.py pin the agreement itself)."""

import subprocess
import sys

import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import find_vllm_python
from enginetui.vllm_watch.burst import BURST_MAX_TOKENS, BURST_POLL_S, matching_steps, replay_burst, vllm_logged_steps
from enginetui.vllm_watch.reconstruct import agreement
from tests.support.checkout import REPO_ROOT

PYTHON = find_vllm_python()
# Fewer readings than this are not compared: one lumped reading would move the share by 5% or more.
MIN_READINGS = 20
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
    pytest.mark.timeout(1800),
    pytest.mark.slow,
]


def test_the_rebuild_follows_a_fresh_burst_on_a_live_vllm(tmp_path):
    capture = [
        sys.executable,
        "tools/capture.py",
        "--burst",
        "--first",
        "500",
        "--vllm-python",
        PYTHON,  # prompts
        "--model",
        str(DEFAULT_MODEL_DIR),
        "--out",
        str(tmp_path),
    ]  # no fixture has
    proc = subprocess.run(capture, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rebuild = replay_burst(tmp_path).rebuild  # the capture's recording, replayed as it went by
    logged = vllm_logged_steps(tmp_path)
    agree, total = agreement(rebuild.checks)
    views = rebuild.entered.values()
    burst_s = max(v.token_times[-1] for v in views) - min(v.arrival for v in views)
    starved = total < max(MIN_READINGS, 0.5 * burst_s / BURST_POLL_S)
    print(
        f"readings {agree}/{total} over {burst_s:.1f} s{' (starved)' if starved else ''}; steps alike "
        f"{matching_steps(rebuild, logged)}/{len(logged)}; preemptions {rebuild.num_preemptions} rebuilt"
    )
    assert len(views) == 64 and all(len(v.token_times) == BURST_MAX_TOKENS for v in views)  # all through the proxy
    assert len(logged) > 300  # vLLM's line per step, kept
    assert rebuild.steps and not rebuild.sched.has_unfinished_requests()  # followed the wire to its end
    if starved:  # the machine, not the rebuild: too few readings to compare
        pytest.skip(
            f"the machine was too busy for /metrics every {BURST_POLL_S} s: {total} readings over a {burst_s:.1f} s "
            f"burst (at least {MIN_READINGS} and half of those asked for are compared)"
        )
    last = rebuild.checks[-1]  # the first reading back at rest: the rebuild at rest with vLLM
    assert last.running == last.waiting == last.rebuilt_running == last.rebuilt_waiting == 0
    # it preempted; lumped tokens hide whom vLLM preempted among requests admitted together (docs/vllm.md), so
    # beside other test workers the count is held to 15% of vLLM's (81 rebuilt against 72 once on CI)
    assert last.preemptions > 0
    assert abs(rebuild.num_preemptions - last.preemptions) <= max(5, 0.15 * last.preemptions)
    # ±1 on 95% of readings holds on a quiet machine; beside other test workers late readings leave a loose bound
    assert agree >= 0.6 * total
