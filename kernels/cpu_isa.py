"""Running as if on a CPU with fewer instructions than this one: `ENGINETUI_CPU_ISA=avx2`.

With it in the environment every library that picks its code by the CPU picks its AVX2 code, in this
process and every process started from it: our C++ kernels build with `-mno-avx512f`, torch's ATen,
oneDNN and MKL take their AVX2 paths (`ATEN_CPU_CAPABILITY`, `ONEDNN_MAX_CPU_ISA`,
`MKL_ENABLE_INSTRUCTIONS`), and a Python with `cpu_isa_site/` on its path finds torch's CPU feature
queries answering as on an AVX2-only CPU, so vLLM loads its AVX2 build. It emulates the instruction
set, not the machine (caches, memory and clock stay this one's). The benchmarks take `--cpu-isa avx2`
and restart themselves with `environment()`.
"""

import os
from dataclasses import dataclass
from pathlib import Path

CPU_ISA_ENV = "ENGINETUI_CPU_ISA"  # the instruction set to run as if on ("avx2"); unset: this CPU's own
SITE_DIR = Path(__file__).with_name("cpu_isa_site")  # holds the sitecustomize.py torch's queries are answered by


@dataclass(frozen=True)
class NarrowerIsa:
    """What running as if on a CPU with only this instruction set changes."""

    compile_flags: tuple[str, ...]  # added to the C++ kernels' compiler flags
    cpu_flag: str  # the /proc/cpuinfo flag this CPU must have for the emulation to narrow anything
    library_env: dict[str, str]  # what torch's ATen, oneDNN and MKL read to choose their code


NARROWER_ISAS = {
    "avx2": NarrowerIsa(
        compile_flags=("-mno-avx512f",),
        cpu_flag="avx512f",
        library_env={"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    ),
}


def emulated() -> str | None:
    """The instruction set this process runs as if on (from ENGINETUI_CPU_ISA), or None; an error
    for a name that is not one of NARROWER_ISAS."""
    name = os.environ.get(CPU_ISA_ENV, "")
    if not name:
        return None
    if name not in NARROWER_ISAS:
        raise ValueError(f"{CPU_ISA_ENV}={name!r}: must be one of {', '.join(NARROWER_ISAS)} (or unset)")
    return name


def kernel_compile_flags() -> list[str]:
    """The C++ kernels' extra compiler flags for the emulated instruction set (none without one)."""
    name = emulated()
    return list(NARROWER_ISAS[name].compile_flags) if name else []


def environment(name: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with everything that makes a process and its
    children run as if on a CPU with only the instruction set `name`."""
    isa = NARROWER_ISAS[name]
    env = dict(os.environ if base is None else base)
    env.update(isa.library_env)
    env[CPU_ISA_ENV] = name
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE_DIR)]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *paths])  # first, so its sitecustomize runs
    return env


def applied(name: str) -> bool:
    """Whether this process already runs with `environment(name)` (set before it started)."""
    return all(os.environ.get(key) == value for key, value in environment(name).items())
