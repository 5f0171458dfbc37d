"""Where the tests find vLLM: the stand-in package (always there) and the real vLLM's interpreter
(the ENGINETUI_VLLM_PYTHON environment variable, when set; the tests that need it are skipped otherwise)."""

import os

import pytest

from enginetui.vllm_launch import VLLM_PYTHON_ENV
from tests.support.checkout import REPO_ROOT

FAKE_VLLM = REPO_ROOT / "tests" / "fakes" / "vllm_package"  # holds a package named vllm: the names the runners use
REAL_VLLM = os.environ.get(VLLM_PYTHON_ENV, "")  # the real vLLM's interpreter, or ""
needs_real_vllm = pytest.mark.skipif(
    not (REAL_VLLM and os.path.exists(REAL_VLLM)), reason=f"{VLLM_PYTHON_ENV} does not name vLLM's interpreter"
)
