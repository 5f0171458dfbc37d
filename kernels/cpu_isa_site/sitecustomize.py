"""Run by every Python that starts with this folder on its path (kernels/cpu_isa.py puts it on
PYTHONPATH): under ENGINETUI_CPU_ISA=avx2, torch's CPU feature queries answer as on an AVX2-only
CPU, so code that chooses its kernels by them (vLLM loads `vllm._C_AVX2` when
`torch.cpu._is_avx512_supported()` is False) chooses what it would there. Standalone: it also runs
in vLLM's interpreter, which has none of this repository's packages. Then the sitecustomize this
one shadows, if the interpreter has one, runs as it would have.
"""

import importlib.machinery
import importlib.util
import os
import sys

ABSENT_ON_AVX2 = (
    "_is_avx512_supported",
    "_is_avx512_vnni_supported",
    "_is_avx512_bf16_supported",
    "_is_amx_tile_supported",
    "_is_amx_fp16_supported",
)  # torch.cpu queries an AVX2-only CPU answers False

if os.environ.get("ENGINETUI_CPU_ISA") == "avx2":
    import torch.cpu

    for query in ABSENT_ON_AVX2:
        if hasattr(torch.cpu, query):
            setattr(torch.cpu, query, lambda: False)

_here = os.path.dirname(os.path.abspath(__file__))
_shadowed = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _shadowed is not None and _shadowed.loader is not None:
    _shadowed.loader.exec_module(importlib.util.module_from_spec(_shadowed))
