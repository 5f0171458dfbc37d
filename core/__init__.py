"""enginetui's inference engine: a from-scratch vLLM-V1-style engine.

    from core import LLM, SamplingParams
    llm = LLM()  # the embedded default model; or LLM(model="facebook/opt-125m")
    out = llm.generate(["The function"], SamplingParams(max_tokens=20))
"""

from core.config import EngineConfig
from core.engine.llm import LLM
from core.outputs import CompletionOutput, RequestOutput
from core.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "EngineConfig", "RequestOutput", "CompletionOutput"]
