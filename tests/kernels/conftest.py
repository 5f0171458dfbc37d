"""Run the Triton kernels on CPU tensors: the interpreter must be chosen before triton decorates them."""

import os

os.environ["TRITON_INTERPRET"] = "1"
