"""enginetui's inference engine: a from-scratch vLLM-V1-style engine.

    from enginetui.core import LLM, SamplingParams
    llm = LLM()  # the embedded default model; or LLM(model="facebook/opt-125m")
    out = llm.generate(["The function"], SamplingParams(max_tokens=20))

The names below are imported on first use (PEP 562), so `import core.config` (a command line
checking its flags) does not pay for torch and the engine.
"""

import importlib

_EXPORTS = {  # public name -> the module that defines it
    "LLM": "enginetui.core.engine.llm",
    "SamplingParams": "enginetui.core.sampling_params",
    "EngineConfig": "enginetui.core.config",
    "RequestOutput": "enginetui.core.outputs",
    "CompletionOutput": "enginetui.core.outputs",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'enginetui.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
