"""The watcher is light: it never imports torch (nor transformers), and it idles on little CPU.

Measured in a fresh interpreter (this test process has imported torch long ago)."""

import json
import subprocess
import sys

from tests.fakes.vllm_server import FakeVllm
from tests.support.checkout import REPO_ROOT, checkout_env

IDLE_CPU_LIMIT = 0.25  # of one core: far above what it takes (see docs/vllm.md), far below a busy loop


def test_the_watcher_loads_no_torch_and_idles_lightly():
    fake = FakeVllm()  # here: its threads' CPU is not the watcher's
    try:
        fake.play_all()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.vllm_watch.light_watcher",
                fake.url,
                fake.kv_endpoint,
                fake.replay_endpoint,
                str(fake.last_seq),
            ],
            cwd=REPO_ROOT,
            env=checkout_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        fake.stop()
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"idle CPU: {100 * result['idle_cpu_share']:.1f}% of a core")
    assert result["heavy_modules"] == []
    assert result["idle_cpu_share"] < IDLE_CPU_LIMIT
