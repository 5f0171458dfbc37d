"""The C++ CPU kernels (kernels/csrc/: attention, and linear layers of a few rows): built at first use, cached,
loaded.

EngineCore's model runner asks for them while the engine starts (before it reports ready), so a
build never lands inside a request; the build says so in the log, with the time it took.

The sources are compiled on the machine that runs it (-O3 -march=native, OpenMP) against this torch's
headers and libraries (paths from `torch.utils.cpp_extension`), and linked to torch's own OpenMP
runtime, so the kernels and torch's operators share one thread pool and one thread count. The
shared library is cached in `$ENGINETUI_KERNEL_CACHE` (default `~/.cache/enginetui/kernels`), one
file per version of the sources, torch version, compiler, CPU and flags (`ENGINETUI_CPU_ISA=avx2` builds without
AVX-512: kernels/cpu_isa.py): the first use builds it (about 10-30 s), later
processes load it in milliseconds (core/worker/cpu_linear.py keeps the GEMM choices it measures in the same
folder). Where it cannot be built (no compiler, another platform), `available()` is False, one warning line says
why, and the dispatch uses the torch reference.
"""

import fcntl
import glob
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from enginetui.kernels.cpu_isa import kernel_compile_flags

SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("cpu_attention.cpp", "cpu_linear.cpp"))
CACHE_ENV = "ENGINETUI_KERNEL_CACHE"  # where built kernels are kept
COMPILER_ENV = "CXX"  # the C++ compiler (default: c++, else g++)
COMPILE_FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fPIC", "-std=c++20", "-w"]
BUILD_TIMEOUT_S = 600  # a build that takes longer has failed

log = logging.getLogger("enginetui.kernels")

_state: dict[str, object] = {}  # "ok": bool once tried; "error": why it is not available; "library"; "ops": once loaded


def available() -> bool:
    """Whether the C++ kernels are loaded; builds (or loads the cached build) on the first call."""
    if "ok" not in _state:
        try:
            library = _build()
            torch.ops.load_library(str(library))
            _state["ok"], _state["library"] = True, library.name
        except Exception as exc:  # noqa: BLE001 - any failure means: use the reference instead
            _state["ok"] = False
            _state["error"] = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("enginetui: C++ CPU kernels unavailable (%s); using the torch reference", _state["error"])
    return bool(_state["ok"])


def unavailable_reason() -> str | None:
    """Why the kernels could not be built or loaded (None if they are, or were not tried yet)."""
    return _state.get("error")  # type: ignore[return-value]


def build_id() -> str:
    """What the kernels' speed depends on: the loaded library's name (its sources, torch, compiler, CPU and
    flags), else this CPU's model and flags."""
    return str(_state["library"]) if available() else cpu_fingerprint().decode()


def _ops():
    """The loaded operators (torch.ops.enginetui_cpu); an error if they cannot be built."""
    ops = _state.get("ops")
    if ops is None:
        if not available():
            raise RuntimeError(f"the C++ CPU kernels are unavailable: {unavailable_reason()}")
        ops = _state["ops"] = torch.ops.enginetui_cpu
    return ops


def skinny_linear_cpu(x, weight, bias, relu: bool = False):
    """F.linear (then relu if asked) of 1-8 float32 or bfloat16 rows, reading the weight once
    (kernels/csrc/cpu_linear.cpp)."""
    return _ops().skinny_linear(x, weight, bias, relu)


def reshape_and_cache_cpu(key, value, key_cache, value_cache, slot_mapping) -> None:
    """Write each token's K/V into its slot (kernels.reference.reshape_and_cache_ref semantics)."""
    _ops().reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)


def paged_attention_cpu(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale, out=None):
    """Varlen paged attention read in place from the cache (kernels.reference.paged_attention_ref semantics)."""
    if out is None:
        out = torch.empty(query.shape, dtype=query.dtype, device=query.device)  # [num_tokens, num_heads, head_size]
    if block_table.dtype != torch.int32:
        block_table = block_table.to(torch.int32)
    _ops().paged_attention(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, float(scale), out)
    return out


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "enginetui" / "kernels")


def _build() -> Path:
    """The shared library for these sources, torch, compiler and CPU: cached, else compiled now."""
    compiler = os.environ.get(COMPILER_ENV) or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        raise RuntimeError("no C++ compiler found (install g++ or set CXX)")
    torch_lib = _torch_lib_dir()
    openmp = _torch_openmp_runtime(torch_lib)
    flags = [*COMPILE_FLAGS, *kernel_compile_flags()]  # narrower under ENGINETUI_CPU_ISA (kernels/cpu_isa.py)
    key = hashlib.sha256(
        b"\0".join(
            [
                *(source.read_bytes() for source in SOURCES),
                torch.__version__.encode(),
                compiler.encode(),
                _compiler_version(compiler),
                cpu_fingerprint(),
                " ".join(flags).encode(),
                str(openmp).encode(),
            ]
        )
    ).hexdigest()[:16]
    folder = cache_dir()
    target = folder / f"enginetui_cpu_{key}.so"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then use its build
        if not target.exists():
            log.warning(
                "enginetui: building the C++ CPU kernels for this CPU and torch (once; about 10-30 s) into %s",
                target,
            )
            started = time.perf_counter()
            _compile(compiler, flags, torch_lib, openmp, target)
            log.warning("enginetui: C++ CPU kernels built in %.1f s", time.perf_counter() - started)
    return target


def _compile(compiler: str, flags: list[str], torch_lib: str, openmp: str | None, target: Path) -> None:
    """Compile and link in two steps: OpenMP pragmas at compile time, torch's runtime at link time."""
    from torch.utils.cpp_extension import include_paths

    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        objects, lib = [Path(tmp) / f"{source.stem}.o" for source in SOURCES], Path(tmp) / target.name
        includes = [f"-I{p}" for p in include_paths()]
        runtime = [openmp] if openmp else ["-fopenmp"]  # torch's own libgomp, else the compiler's
        compiles = [
            [compiler, *flags, abi, *includes, "-c", str(src), "-o", str(obj)] for src, obj in zip(SOURCES, objects)
        ]
        link = [compiler, "-shared", *map(str, objects), "-o", str(lib), f"-L{torch_lib}", "-lc10", "-ltorch_cpu"]
        for command in (*compiles, [*link, *runtime, f"-Wl,-rpath,{torch_lib}"]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                raise RuntimeError(f"building the kernels failed: {done.stderr.strip()[-2000:]}")
        os.replace(lib, target)  # atomic: a reader never sees a half-written library


def _torch_lib_dir() -> str:
    from torch.utils.cpp_extension import library_paths

    return library_paths()[0]


def _torch_openmp_runtime(torch_lib: str) -> str | None:
    """The OpenMP runtime torch itself loaded (a bundled libgomp), to link the kernels against."""
    site = os.path.dirname(os.path.dirname(torch.__file__))
    for pattern in (os.path.join(torch_lib, "libgomp*.so*"), os.path.join(site, "torch.libs", "libgomp*.so*")):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def _compiler_version(compiler: str) -> bytes:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"C++ compiler {compiler!r} does not run: {exc}") from None


def cpu_fingerprint() -> bytes:
    """What -march=native depends on: the CPU model and its feature flags."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features", "CPU part"))]
        return "".join(sorted(set(lines))).encode()
    except OSError:
        return f"{platform.machine()} {platform.processor()}".encode()
