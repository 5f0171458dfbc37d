"""Attention kernels: one dispatch point for the Triton kernels (CUDA), the C++ kernels (CPU) and the
torch reference (the specification, and the CPU fallback).

`ENGINETUI_ATTENTION_BACKEND` forces a backend: `torch`, `triton` (runs on CPU tensors under
`TRITON_INTERPRET=1`) or `cpp`. Unset, CUDA tensors use Triton and CPU tensors the C++ kernels
(built at first use; the torch reference where they cannot be built).
"""

import importlib.machinery
import importlib.util
import os
import sys


def _installed_namesake() -> importlib.machinery.ModuleSpec | None:
    """The installed `kernels` distribution (Hugging Face's, which transformers >= 5.25 requires and
    imports), looked up on sys.path without this repository's root."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    return importlib.machinery.PathFinder.find_spec("kernels", path)


# This folder installs as `enginetui.kernels`. Imported as top-level `kernels`, it is the repository
# root on sys.path (a script, `python -m` or pytest run from there) shadowing the installed package
# of that name: hand the name to that package, so `import transformers` works from the repository.
if __name__ == "kernels" and (_namesake := _installed_namesake()) is not None and _namesake.loader is not None:
    _module = importlib.util.module_from_spec(_namesake)
    sys.modules["kernels"] = _module  # the import statement returns what sys.modules holds once this file has run
    _namesake.loader.exec_module(_module)

__all__ = ["paged_attention", "prompt_attention", "prompt_sdpa", "reshape_and_cache", "select_backend"]


def __getattr__(name: str):
    """The dispatch functions, imported at first use: the package itself imports no torch, so the
    command line can read `enginetui.kernels.cpu_isa` without it."""
    if name in __all__:
        from enginetui.kernels import dispatch

        return getattr(dispatch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
