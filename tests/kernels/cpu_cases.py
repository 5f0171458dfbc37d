"""The C++ kernels' cases (the shared ones and more only they can afford in every dtype), and a build's check in a fresh Python."""

import subprocess
import sys
from pathlib import Path

import torch

from enginetui.kernels.paged_batch import REL_TOL, make_paged_batch
from tests.kernels.cases import ATTENTION_CASES
from tests.support.checkout import REPO_ROOT

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


# The shared cases, and more that only the fast C++ kernel can afford to run in every dtype.
CASES = {
    **ATTENTION_CASES,
    "gqa_group8": ([1, 2, 1], [70, 40, 3], 8, 1, 64, 16),
    "head32": ([1, 19], [33, 19], 4, 4, 32, 16),
    "head64_opt125m": ([1, 40, 1, 1], [45, 300, 16, 257], 12, 12, 64, 16),
    "head256": ([1, 21], [70, 21], 2, 2, 256, 16),
    "head72_not_a_multiple_of_16": ([1, 6], [20, 30], 2, 1, 72, 16),
    "block64": ([1, 70], [130, 70], 4, 2, 64, 64),
    # Prompts long enough for many softmax spans (four key tiles each), the causal mask inside the last
    # spans of each item; head 80 leaves channels past the register blocks, block 8 makes tiles of 8 keys.
    "long_prompt_head80_block8": ([300, 1], [300, 40], 4, 2, 80, 8),
    "long_chunk_over_history": ([200, 1], [450, 90], 4, 2, 64, 16),
    # Enough decodes that each takes all its kv heads in one item (few decodes split them).
    "many_decodes_gqa_head80": ([1] * 24 + [5], [17 + 23 * i for i in range(24)] + [40], 8, 2, 80, 16),
}


def case_batch(case, dtype=torch.float32, **kwargs):
    q_lens, seq_lens, num_heads, num_kv_heads, head_size, block_size = case
    return make_paged_batch(
        q_lens,
        seq_lens,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_size=head_size,
        block_size=block_size,
        dtype=dtype,
        **kwargs,
    )


def cpu_flags() -> set[str]:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return set(next(line for line in lines if line.startswith("flags")).split())
    except (OSError, StopIteration):
        return set()


def assert_build_matches_reference(env: dict[str, str], dtypes: list[torch.dtype]) -> None:
    """In a fresh Python with `env` (which decides the build), the attention kernels match the reference on
    every case in every dtype of `dtypes`, and the linear kernel matches F.linear."""
    code = (
        "import torch; from enginetui.kernels import cpu_kernels; from enginetui.kernels.paged_batch import max_rel_error; "
        "from enginetui.kernels.reference import paged_attention_ref; from tests.kernels.cpu_cases import CASES, case_batch\n"
        "assert cpu_kernels.available(), cpu_kernels.unavailable_reason()\n"
        f"for dtype in {[str(d) for d in dtypes]}:\n"
        "    for case in CASES.values():\n"
        "        b = case_batch(case, getattr(torch, dtype.removeprefix('torch.')))\n"
        "        print(dtype, max_rel_error(cpu_kernels.paged_attention_cpu(*b.args()), "
        "paged_attention_ref(*b.args(*b.clean_caches()))))\n"
        "x, w = torch.randn(8, 77), torch.randn(45, 77)  # the linear kernel, tails of its vectors included\n"
        "for m in range(1, 9):\n"
        "    torch.testing.assert_close(cpu_kernels.skinny_linear_cpu(x[:m], w, None), "
        "torch.nn.functional.linear(x[:m], w), rtol=1e-4, atol=1e-4)\n"
        "    xb, wb = x[:m].bfloat16(), w.bfloat16()\n"
        "    torch.testing.assert_close(cpu_kernels.skinny_linear_cpu(xb, wb, None), "
        "torch.nn.functional.linear(xb.float(), wb.float()).bfloat16(), rtol=1.6e-2, atol=1e-2)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    errors = [line.split() for line in done.stdout.split("\n") if line]
    assert len(errors) == len(CASES) * len(dtypes)
    for dtype, error in errors:
        assert float(error) < REL_TOL[getattr(torch, dtype.removeprefix("torch."))], (dtype, error)
