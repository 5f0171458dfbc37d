"""The vLLM probe: vLLM's own scheduler, publishing this project's step events from inside a real vLLM.

    pip install -c VLLM_PINS -e /path/to/enginetui   # into vLLM's environment, its packages pinned (docs/vllm.md)
    ENGINETUI_PROBE=tcp://127.0.0.1:5600 vllm serve MODEL --scheduler-cls enginetui.vllm_probe.ProbeAsyncScheduler

`ProbeScheduler` and `ProbeAsyncScheduler` are imported on first use (PEP 562): this package's
other modules (config, probe) import without vLLM.
"""

import importlib

_EXPORTS = {
    "ProbeScheduler": "enginetui.vllm_probe.schedulers",
    "ProbeAsyncScheduler": "enginetui.vllm_probe.schedulers",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'enginetui.vllm_probe' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
