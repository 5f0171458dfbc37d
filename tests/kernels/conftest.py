"""Run the Triton kernels on CPU tensors through triton's interpreter.

Triton picks interpreted or compiled when it decorates a function, its own library included, so
TRITON_INTERPRET=1 must be set before triton is first imported (transformers imports it too):
at the top of tests/conftest.py, or in the environment. Setting it here is enough only when this
directory is collected before anything imports triton.
"""

import os
import sys

import pytest

_IMPORTED_COMPILED = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def _triton_interpreted():
    """Fail each kernel test with the cause, not with an obscure interpreter error."""
    if _IMPORTED_COMPILED:
        pytest.fail("triton was imported before TRITON_INTERPRET=1 was set: set it at the top of tests/conftest.py")
