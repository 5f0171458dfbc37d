"""A model runner whose decode graphs are EagerReplay, on any device: the sizes CUDA would capture, the same
static buffers and padding, the forward rerun at each replay. Named by `EngineConfig.model_runner` in the CPU
tests of the graph path and in `python tools/graph_check.py --cpu-smoke`."""

from enginetui.core.config import EngineConfig
from enginetui.core.worker.cuda_graphs import EagerReplay, GraphSetup, decode_capture_sizes
from enginetui.core.worker.model_runner import ModelRunner


class EagerReplayRunner(ModelRunner):
    """ModelRunner with EagerReplay standing in for torch.cuda.CUDAGraph."""

    def setup_cuda_graphs(self, config: EngineConfig) -> GraphSetup:
        sizes = decode_capture_sizes(config)
        if config.enforce_eager or not sizes:
            return GraphSetup([], off_reason="--enforce-eager" if config.enforce_eager else "no capture size")
        return self.capture_cuda_graphs(sizes, EagerReplay)
