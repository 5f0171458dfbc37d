"""The C++ CPU kernels (kernels/cpu_kernels.py) against the torch reference, like the Triton kernels.

The first test that needs them builds them (cached for later runs). The caches are poisoned with
NaN outside each request's slots, so a kernel that reads past a sequence fails the comparison.
"""

import os
import shutil
import subprocess
import sys

import pytest
import torch

from enginetui.kernels import cpu_kernels
from enginetui.kernels.cpu_kernels import paged_attention_cpu, reshape_and_cache_cpu
from enginetui.kernels.paged_batch import REL_TOL, max_rel_error
from enginetui.kernels.reference import paged_attention_ref, reshape_and_cache_ref
from tests.kernels.cases import KV_WRITE_CASES, kv_write, slice_query_out_of_qkv, take_step_kv_out
from tests.kernels.cpu_cases import CASES, DTYPES, assert_build_matches_reference, case_batch, cpu_flags
from tests.support.checkout import REPO_ROOT

PARAMS = [
    pytest.param(case, dtype, id=f"{name}-{str(dtype).removeprefix('torch.')}")
    for name, case in CASES.items()
    for dtype in DTYPES
]


@pytest.mark.parametrize("case,dtype", PARAMS)
def test_paged_attention_matches_reference(case, dtype):
    batch = case_batch(case, dtype)
    out = torch.full_like(batch.query, float("nan"))  # [num_tokens, num_heads, head_size]
    assert paged_attention_cpu(*batch.args(), out=out) is out  # on the poisoned caches
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))  # [num_tokens, num_heads, head_size]
    assert max_rel_error(out, expected) < REL_TOL[dtype]


def test_thread_count_changes_nothing():
    """Each (request, head, rows) item runs whole on one thread: results are bitwise the same."""
    batch = case_batch(([1, 40, 1, 17], [300, 90, 33, 17], 8, 2, 64, 16))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = paged_attention_cpu(*batch.args())
        torch.set_num_threads(2)
        two = paged_attention_cpu(*batch.args())
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


def test_int64_metadata_strided_query_and_out_none():
    """int64 metadata (block table included), a query sliced out of a fused qkv tensor, no out."""
    batch = case_batch(([3, 1], [20, 35], 4, 2, 16, 16), index_dtype=torch.int64)
    slice_query_out_of_qkv(batch)
    out = paged_attention_cpu(*batch.args())  # [num_tokens, num_heads, head_size]
    expected = paged_attention_ref(*batch.args(*batch.clean_caches()))
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


def test_bad_inputs_are_errors_not_crashes():
    batch = case_batch(([1, 2], [10, 20], 4, 2, 16, 16))
    batch.block_table[1, 0] = 10_000  # no such block
    with pytest.raises(RuntimeError, match="block id 10000 is not in the cache"):
        paged_attention_cpu(*batch.args())
    batch = case_batch(([1], [5], 4, 2, 16, 16))
    with pytest.raises(RuntimeError, match="share a dtype"):
        paged_attention_cpu(batch.query.double(), batch.key_cache, batch.value_cache, *batch.args()[3:])
    with pytest.raises(RuntimeError, match="multiple of num_kv_heads"):
        paged_attention_cpu(torch.randn(1, 3, 16), *batch.args()[1:])
    with pytest.raises(RuntimeError, match="past the cache"):
        reshape_and_cache_cpu(
            torch.randn(1, 2, 16), torch.randn(1, 2, 16), batch.key_cache, batch.value_cache, torch.tensor([10_000])
        )


@pytest.mark.parametrize("key_dtype,cache_dtype,block_size", KV_WRITE_CASES, ids=str)
def test_reshape_and_cache_matches_reference_exactly(key_dtype, cache_dtype, block_size):
    w = kv_write(key_dtype, cache_dtype, block_size, head_size=16)
    reshape_and_cache_cpu(w.key, w.value, w.key_cache, w.value_cache, w.slot_mapping)
    reshape_and_cache_ref(w.key, w.value, w.key_ref, w.value_ref, w.slot_mapping)
    torch.testing.assert_close(w.key_cache, w.key_ref, rtol=0, atol=0, equal_nan=True)  # rounding as torch's .to()
    torch.testing.assert_close(w.value_cache, w.value_ref, rtol=0, atol=0, equal_nan=True)
    assert w.written_slots() == w.expected_slots()


def test_reshape_then_attend_matches_reference():
    """The two kernels together, as one model step uses them: write this step's K/V, then attend."""
    batch = case_batch(([4, 1], [10, 21], 4, 2, 16, 16))
    key, value, slots, expected = take_step_kv_out(batch)
    reshape_and_cache_cpu(key, value, batch.key_cache, batch.value_cache, slots)
    out = paged_attention_cpu(*batch.args())
    assert max_rel_error(out, expected) < REL_TOL[torch.float32]


def test_the_build_is_cached_per_source_torch_compiler_and_cpu():
    assert cpu_kernels.available()
    built = sorted(cpu_kernels.cache_dir().glob("enginetui_cpu_*.so"))
    assert built, "the library should be in the cache directory"
    newest = max(built, key=lambda p: p.stat().st_mtime)
    stamp = newest.stat().st_mtime_ns
    code = "from enginetui.kernels import cpu_kernels; assert cpu_kernels.available()"
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True, timeout=120)
    assert newest.stat().st_mtime_ns == stamp  # loaded, not rebuilt


# Builds for CPUs with fewer instructions than this one (the AVX2 build, 8-lane vectors, is
# ENGINETUI_CPU_ISA=avx2's: tests/kernels/test_cpu_isa.py): (the compiler flag that takes them away, the
# CPU flag without which the native build already is that build, the dtypes to check).
NARROWER_BUILDS = {
    "no-avx512-bf16": ("-mno-avx512bf16", "avx512_bf16", [torch.bfloat16]),  # widened bf16, no vdpbf16ps
    "sse": ("-mno-avx", "avx", DTYPES),  # 4-lane vectors
}


@pytest.mark.slow
@pytest.mark.parametrize("build", list(NARROWER_BUILDS))
def test_builds_for_narrower_cpus_match_reference(tmp_path, build):
    """The kernels as built for a CPU without AVX512-BF16 or without AVX (SSE):
    each vector width and dot product path must match the reference, whatever CPU runs the tests."""
    flag, cpu_flag, dtypes = NARROWER_BUILDS[build]
    if cpu_flag not in cpu_flags():
        pytest.skip(f"the CPU has no {cpu_flag}: the native build is this build, and the tests above cover it")
    compiler = tmp_path / f"c++-{build}"
    compiler.write_text(f'#!/bin/sh\nexec {shutil.which("c++") or shutil.which("g++")} "$@" {flag}\n')
    compiler.chmod(0o755)
    assert_build_matches_reference(
        {**os.environ, "CXX": str(compiler), cpu_kernels.CACHE_ENV: str(tmp_path / "cache")}, dtypes
    )


@pytest.mark.slow
def test_without_a_compiler_the_reference_runs_after_one_warning_line(tmp_path):
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), cpu_kernels.CACHE_ENV: str(tmp_path / "cache")}
    env.pop("ENGINETUI_ATTENTION_BACKEND", None)
    code = (
        "import torch; from enginetui.kernels import select_backend; "
        "print(select_backend(torch.device('cpu')), select_backend(torch.device('cpu')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch", "torch"]
    warnings = [line for line in done.stderr.splitlines() if "C++ CPU kernels unavailable" in line]
    assert len(warnings) == 1 and "using the torch reference" in warnings[0]
    env["ENGINETUI_ATTENTION_BACKEND"] = "cpp"  # forcing it where it cannot build is an error
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "ENGINETUI_ATTENTION_BACKEND=cpp" in done.stderr
