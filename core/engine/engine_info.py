"""EngineInfo: what EngineCore tells its clients about itself once it has started (model, limits,
KV pool); made in core/engine/core.py, sent over the wire, recorded, and read by the processor,
the server and the dashboards."""

import msgspec


class EngineInfo(msgspec.Struct, kw_only=True):
    """Facts about a started engine that the client needs to validate and display requests."""

    model_name: str  # what the user asked for ("default" for the embedded model)
    model_dir: str | None  # resolved local directory (None for a name-only dummy model)
    architecture: str  # the model class that runs it, e.g. "LlamaForCausalLM"
    num_parameters: int  # parameters, a tied lm_head counted once
    kv_bytes_per_token: int  # KV cache bytes one token takes, all layers
    vocab_size: int  # valid token ids are [0, vocab_size)
    max_model_len: int  # prompt + output limit
    num_blocks: int  # KV pool size
    block_size: int  # tokens per block
    device: str  # "cpu" / "cuda:0"
    dtype: str  # compute dtype
    eos_token_ids: list[int]  # the model's EOS ids (generation_config.json, else config.json)
    default_sampling: dict[str, int | float]  # SamplingParams defaults from the generation config
    pid: int  # EngineCore's process id
    kv_pool_rule: str = ""  # how num_blocks was chosen, in words (core/engine/kv_sizing.py; "" in older recordings)
    # CPU threads a step computes with on an uncontended machine (the thread governor may drop a step
    # to fewer beside busy processes: StepEvent.compute_threads); 0: not on a CPU, or an older recording
    cpu_threads: int = 0
    # CUDA graphs of decode steps (core/worker/cuda_graphs.py; empty in older recordings):
    cuda_graph_sizes: list[int] = []  # decode batch sizes captured at start-up
    cuda_graph_capture_s: float = 0.0  # seconds the capture took
    cuda_graphs_off: str = ""  # why none were captured

    @property
    def cuda_graphs_text(self) -> str:
        """The decode graphs of a CUDA engine in a few words ("" on CPU, where there are none, and in older recordings)."""
        if not self.device.startswith("cuda"):
            return ""
        sizes = self.cuda_graph_sizes
        if sizes:
            return f"CUDA graphs {sizes[0]}-{sizes[-1]} ({len(sizes)} sizes, captured in {self.cuda_graph_capture_s:.1f} s)"
        return f"eager: {self.cuda_graphs_off}" if self.cuda_graphs_off else ""

    @property
    def kv_pool_tokens(self) -> int:
        """Tokens the whole KV pool holds."""
        return self.num_blocks * self.block_size
