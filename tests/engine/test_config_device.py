"""The engine configuration's device decisions: made without torch wherever the device is named."""

import subprocess
import sys

import torch

from enginetui.core import config as config_module
from enginetui.core.config import OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS, EngineConfig


def test_the_device_default_is_decided_without_torch_where_the_device_is_named(monkeypatch):
    code = (
        "import sys; from enginetui.core.config import EngineConfig, offline_config; "
        "config = EngineConfig(device='cpu'); "
        "print(config.use_async_scheduling, config.device_type, "
        "offline_config(device='cpu').max_num_batched_tokens, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "cpu", str(OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS), "False"]
    assert EngineConfig().use_async_scheduling is torch.cuda.is_available()  # auto: the device torch finds
    monkeypatch.setattr(config_module, "_cuda_available", lambda: True)  # as on a CUDA machine
    assert EngineConfig(device="cuda").use_async_scheduling is True
    assert EngineConfig(device="cuda").torch_device == torch.device("cuda")
