"""Running as if on an AVX2-only CPU (kernels/cpu_isa.py): what each library is told, that each one
takes its AVX2 code (torch's ATen, oneDNN, our C++ kernels, vLLM's build), and the benchmarks'
`--cpu-isa`, which restarts them with it."""

import os
import subprocess
import sys

import pytest

from enginetui import cli
from enginetui.kernels import cpu_isa, cpu_kernels
from enginetui.vllm_launch import find_vllm_python
from tests.kernels.cpu_cases import DTYPES, assert_build_matches_reference, cpu_flags

NARROWS = cpu_isa.NARROWER_ISAS["avx2"].cpu_flag in cpu_flags()  # else the native build already is the AVX2 one
ISA_PROBE = (
    "import torch, torch.cpu; print(torch.backends.cpu.get_cpu_capability(), "
    "torch.cpu._is_avx512_supported(), torch.cpu._is_amx_tile_supported())"
)


def test_environment_tells_every_library_and_is_idempotent(monkeypatch):
    env = cpu_isa.environment("avx2", {"PYTHONPATH": "/elsewhere"})
    assert env["ENGINETUI_CPU_ISA"] == "avx2"
    assert (env["ATEN_CPU_CAPABILITY"], env["ONEDNN_MAX_CPU_ISA"], env["MKL_ENABLE_INSTRUCTIONS"]) == (
        "avx2",
        "AVX2",
        "AVX2",
    )
    assert env["PYTHONPATH"] == os.pathsep.join([str(cpu_isa.SITE_DIR), "/elsewhere"])
    assert cpu_isa.environment("avx2", env) == env  # a restarted process computes the same environment
    monkeypatch.setattr(os, "environ", env)
    assert cpu_isa.applied("avx2") and cpu_isa.emulated() == "avx2"
    assert cpu_isa.kernel_compile_flags() == ["-mno-avx512f"]


def test_an_unknown_isa_is_an_error(monkeypatch):
    monkeypatch.setenv(cpu_isa.CPU_ISA_ENV, "avx10")
    with pytest.raises(ValueError, match="ENGINETUI_CPU_ISA='avx10': must be one of avx2"):
        cpu_isa.kernel_compile_flags()
    monkeypatch.delenv(cpu_isa.CPU_ISA_ENV)
    assert cpu_isa.emulated() is None and cpu_isa.kernel_compile_flags() == []


def test_torch_and_onednn_take_their_avx2_code():
    """A Python started with the environment: ATen dispatches to AVX2, torch.cpu's feature queries say
    no AVX-512 / AMX (the sitecustomize), and oneDNN reports AVX2 as the ISA it runs."""
    code = ISA_PROBE + "; torch.nn.functional.linear(torch.ones(4, 8), torch.ones(16, 8))"
    env = {**cpu_isa.environment("avx2"), "ONEDNN_VERBOSE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["AVX2", "False", "False"]
    code = (
        "import torch; w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(16, 8), 4); "
        "torch.ops.mkldnn._linear_pointwise(torch.ones(4, 8), w, None, 'none', [], '')"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    isa = [line for line in done.stdout.splitlines() if ",info,cpu,isa:" in line]
    assert isa and isa[0].rsplit("isa:", 1)[1].strip() == "Intel AVX2"


@pytest.mark.slow
def test_the_kernels_build_without_avx512_and_match_the_reference(tmp_path):
    """Under ENGINETUI_CPU_ISA=avx2 the C++ kernels are a build of their own, with no 512-bit
    (zmm) register anywhere in it, and it computes every case as the reference does."""
    assert_build_matches_reference(
        {**cpu_isa.environment("avx2"), cpu_kernels.CACHE_ENV: str(tmp_path / "cache")}, DTYPES
    )
    (library,) = (tmp_path / "cache").glob("enginetui_cpu_*.so")
    disassembly = subprocess.run(["objdump", "-d", str(library)], capture_output=True, text=True, timeout=120).stdout
    assert "ymm" in disassembly and "zmm" not in disassembly


@pytest.mark.skipif(find_vllm_python() is None, reason="set ENGINETUI_VLLM_PYTHON to vLLM's interpreter")
@pytest.mark.slow
def test_vllm_loads_its_avx2_build():
    """vLLM's interpreter, started with the environment, loads `vllm._C_AVX2` (what it loads on an
    AVX2-only CPU); without it, on a CPU with AVX-512, another build."""
    code = (
        "from vllm.platforms import current_platform; current_platform.import_kernels(); "
        "print(sorted({line.rsplit('/', 1)[-1].split('.')[0] for line in open('/proc/self/maps') "
        "if '/vllm/_C' in line}))"
    )
    for env, expected in ((cpu_isa.environment("avx2"), "['_C_AVX2']"), (dict(os.environ), None)):
        done = subprocess.run([find_vllm_python(), "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        loaded = done.stdout.strip().splitlines()[-1]
        if expected is not None:
            assert loaded == expected
        elif NARROWS:
            assert "_C_AVX2" not in loaded and loaded != "[]"


def test_bench_restarts_itself_with_the_environment(monkeypatch):
    """`enginetui bench ... --cpu-isa avx2` replaces its process with the same command line under
    `environment("avx2")`, before anything starts; once restarted it does not restart again."""
    calls = []

    class Restarted(Exception):
        pass

    def execve(path, argv, env):
        calls.append((path, argv, env))
        raise Restarted

    monkeypatch.setattr(os, "execve", execve)
    argv = ["bench", "throughput", "--model", "no/such-model", "--cpu-isa", "avx2"]
    with pytest.raises(Restarted):
        cli.main(argv)
    ((path, restart_argv, env),) = calls
    assert path == sys.executable and restart_argv == [sys.executable, "-m", "enginetui", *argv]
    assert env == cpu_isa.environment("avx2")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main(argv) == 2  # restarted: runs (and fails on the model) without restarting
    assert len(calls) == 1
