"""The one engine configuration object, validated once.

Validation needs no torch (only `device="cuda"` asks torch whether CUDA is there), so a command
line can check every flag value in a fraction of a second, before any engine process starts.
"""

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from enginetui.core.worker.graph_sizes import CaptureSizeError, check_capture_sizes

if TYPE_CHECKING:
    import torch

_DTYPES = ("float32", "float16", "bfloat16")  # the dtypes a model may run in (torch attribute names)
_DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
# LLM's step budget on CPU when none is given: vLLM's for its offline LLM class on CPU (its server keeps
# 2048, as ours); fewer, larger prefill steps (docs/speed.md "Step budget").
OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS = 4096
# vLLM's CPU KV cache size in GiB (a whole number, as vLLM reads it); our --kv-cache-memory-bytes wins over it.
CPU_KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"


class ConfigError(ValueError):
    """A configuration value that is not allowed; `field` names it (an EngineConfig field, or an
    environment variable), so a command line can name its flag."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field  # the EngineConfig field (or environment variable) at fault


@dataclass(slots=True)
class EngineConfig:
    """Everything the engine needs to know; flag names follow vLLM's."""

    model: str | None = (
        None  # local HF directory (a path-like is taken too), HF hub id, or None / "default" for the embedded model
    )
    tokenizer: str | None = None  # tokenizer directory or id (path-like taken too); defaults to the model's
    skip_tokenizer_init: bool = False  # run on token ids only (no text in or out)
    load_format: str = "auto"  # "auto" (safetensors, else .bin) or "dummy" (random weights)
    dtype: str = "auto"  # "auto" (float32 on CPU, the checkpoint's on CUDA), float32, float16, bfloat16
    device: str = "auto"  # "auto" (cuda when available), "cpu" or "cuda"
    seed: int = 0  # seeds dummy weights and the sampler of requests without their own seed
    block_size: int = 16  # tokens per KV block
    num_gpu_blocks_override: int | None = None  # fixed KV pool size in blocks (else from kv memory)
    kv_cache_memory_bytes: int | None = (
        None  # KV pool memory; wins over gpu_memory_utilization (core/engine/kv_sizing.py)
    )
    # Share of the device's memory for weights + activations + KV (vLLM's); None: 0.92 on CUDA, and the pool
    # is then no larger than max_num_seqs requests of max_model_len tokens need (core/engine/kv_sizing.py)
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None  # longest prompt + output; default the model's max positions
    max_num_batched_tokens: int = 2048  # token budget of one step
    max_num_seqs: int = 256  # most requests running at once
    enable_chunked_prefill: bool = True  # split prompts over steps to fit the budget
    enable_prefix_caching: bool = False  # reuse KV blocks of identical prompt prefixes
    scheduling_policy: str = "fcfs"  # "fcfs" or "priority"
    # vLLM scheduler rules that can be switched back to older vLLM behaviour (docs/architecture.md "Scheduling rules"):
    scheduler_reserve_full_isl: bool = True  # admit a waiting request only if its whole sequence fits free blocks
    long_prefill_token_threshold: int = 0  # most tokens one request may take per step when others wait (0: no cap)
    async_scheduling: bool | None = None  # plan step N+1 while step N executes; None: on for CUDA, off on CPU (as vLLM)
    stream_interval: int = 1  # new tokens a streamed output carries at least (first and last at once), as vLLM's
    # CUDA graphs of decode steps (vLLM's flags; core/worker/cuda_graphs.py); never on CPU:
    enforce_eager: bool = False  # capture none: every step runs eagerly
    cudagraph_capture_sizes: list[int] | None = (
        None  # decode batch sizes to capture; None: vLLM's list (graph_sizes.py)
    )
    max_cudagraph_capture_size: int | None = None  # the default list's largest size; None: min(2 x max_num_seqs, 512)
    # CPU engines (core/worker/cpu_threads.py; None: the environment's OMP_NUM_THREADS / GOMP_SPINCOUNT, else measured defaults):
    cpu_threads: int | None = None  # threads EngineCore computes with; default every usable core less the reserved
    cpu_reserved_cores: int = 0  # usable cores left to the front-end (client, dashboard) when cpu_threads is not given
    cpu_spin_count: int | None = (
        None  # OpenMP spin loops before a waiting thread sleeps (GOMP_SPINCOUNT); default 10000
    )
    enable_step_events: bool = True  # build and publish a StepEvent per step
    debug_invariants: bool = False  # check pool and scheduler invariants after every step (slow)
    # The model runner class: "auto" (core.worker.model_runner.ModelRunner) or "package.module:Class"
    # (as vLLM's worker_cls; tests run the engine with a runner of fixed tokens, core/worker/runner_class.py).
    model_runner: str = "auto"

    def __post_init__(self) -> None:
        self.model = os.fspath(self.model) if isinstance(self.model, os.PathLike) else self.model
        self.tokenizer = os.fspath(self.tokenizer) if isinstance(self.tokenizer, os.PathLike) else self.tokenizer
        if self.model == "default":
            self.model = None
        if self.load_format not in ("auto", "dummy", "safetensors", "pt"):
            raise ConfigError(
                "load_format", f"load_format must be auto, dummy, safetensors or pt, got {self.load_format!r}"
            )
        self.dtype = _DTYPE_ALIASES.get(self.dtype, self.dtype)
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise ConfigError("dtype", f"dtype must be auto, float32, float16 or bfloat16, got {self.dtype!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError("device", f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.device == "cuda" and not _cuda_available():
            raise ConfigError("device", "device 'cuda' was asked for but no CUDA device is available")
        if self.block_size not in (1, 2, 4, 8, 16, 32, 64, 128):
            raise ConfigError("block_size", f"block_size must be a power of two up to 128, got {self.block_size}")
        _check_positive("num_gpu_blocks_override", self.num_gpu_blocks_override)
        _check_positive("kv_cache_memory_bytes", self.kv_cache_memory_bytes)
        utilization = self.gpu_memory_utilization
        if utilization is not None and (
            isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1
        ):
            raise ConfigError(
                "gpu_memory_utilization", f"gpu_memory_utilization must be a fraction in (0, 1], got {utilization!r}"
            )
        cpu_kv_space_bytes()  # a bad VLLM_CPU_KVCACHE_SPACE fails here, not in EngineCore
        _check_positive("max_model_len", self.max_model_len)
        _check_positive("max_num_batched_tokens", self.max_num_batched_tokens)
        _check_positive("max_num_seqs", self.max_num_seqs)
        _check_positive("stream_interval", self.stream_interval)
        _check_positive("cpu_threads", self.cpu_threads)
        _check_non_negative("cpu_reserved_cores", self.cpu_reserved_cores)
        _check_non_negative("cpu_spin_count", self.cpu_spin_count)
        if self.async_scheduling not in (None, True, False):
            raise ConfigError(
                "async_scheduling",
                f"async_scheduling must be True, False or None (by device), got {self.async_scheduling!r}",
            )
        self._check_cuda_graph_flags()
        if not isinstance(self.scheduler_reserve_full_isl, bool):
            raise ConfigError(
                "scheduler_reserve_full_isl",
                f"scheduler_reserve_full_isl must be True or False, got {self.scheduler_reserve_full_isl!r}",
            )
        threshold = self.long_prefill_token_threshold
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
            raise ConfigError(
                "long_prefill_token_threshold",
                f"long_prefill_token_threshold must be a non-negative integer (0: no cap), got {threshold!r}",
            )
        if self.max_model_len is not None and self.long_prefill_token_threshold > self.max_model_len:
            raise ConfigError(
                "long_prefill_token_threshold",
                f"long_prefill_token_threshold ({self.long_prefill_token_threshold}) cannot be greater "
                f"than max_model_len ({self.max_model_len})",
            )
        if self.model_runner != "auto" and (not isinstance(self.model_runner, str) or ":" not in self.model_runner):
            raise ConfigError(
                "model_runner", f"model_runner must be 'auto' or 'package.module:Class', got {self.model_runner!r}"
            )
        if self.scheduling_policy not in ("fcfs", "priority"):
            raise ConfigError(
                "scheduling_policy", f"scheduling_policy must be fcfs or priority, got {self.scheduling_policy!r}"
            )
        if not self.enable_chunked_prefill and self.max_model_len is not None:
            if self.max_num_batched_tokens < self.max_model_len:
                raise ConfigError(
                    "max_num_batched_tokens",
                    f"without chunked prefill, max_num_batched_tokens ({self.max_num_batched_tokens}) must be "
                    f">= max_model_len ({self.max_model_len}), or long prompts could never be scheduled",
                )

    def _check_cuda_graph_flags(self) -> None:
        if not isinstance(self.enforce_eager, bool):
            raise ConfigError("enforce_eager", f"enforce_eager must be True or False, got {self.enforce_eager!r}")
        sizes = self.cudagraph_capture_sizes
        if sizes is not None:
            if (
                isinstance(sizes, (str, bytes))
                or not isinstance(sizes, (list, tuple))
                or not sizes
                or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes)
            ):
                raise ConfigError(
                    "cudagraph_capture_sizes",
                    f"cudagraph_capture_sizes must be a non-empty list of positive integers, got {sizes!r}",
                )
            self.cudagraph_capture_sizes = list(sizes)
        _check_positive("max_cudagraph_capture_size", self.max_cudagraph_capture_size)
        try:
            check_capture_sizes(
                self.cudagraph_capture_sizes, self.max_cudagraph_capture_size, self.max_num_batched_tokens
            )
        except CaptureSizeError as exc:
            raise ConfigError("max_cudagraph_capture_size", str(exc)) from None

    @property
    def device_type(self) -> str:
        """`"cpu"` or `"cuda"`: the device asked for; for `"auto"`, the one torch finds (only then is
        torch imported)."""
        if self.device == "auto":
            return "cuda" if _cuda_available() else "cpu"
        return self.device

    @property
    def torch_device(self) -> "torch.device":
        import torch

        return torch.device(self.device_type)

    @property
    def use_async_scheduling(self) -> bool:
        """Whether the engine plans step N+1 while step N executes: as asked, else on for CUDA only."""
        if self.async_scheduling is None:
            return self.device_type == "cuda"
        return self.async_scheduling

    def torch_dtype(self, checkpoint_dtype: "torch.dtype | None") -> "torch.dtype":
        """The compute dtype: the asked one, else float32 on CPU and the checkpoint's on CUDA."""
        import torch

        if self.dtype != "auto":
            return getattr(torch, self.dtype)
        if self.device_type == "cuda" and checkpoint_dtype in (torch.float16, torch.bfloat16):
            return checkpoint_dtype
        return torch.float32


def _check_positive(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(name, f"{name} must be a positive integer, got {value!r}")


def _check_non_negative(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ConfigError(name, f"{name} must be a non-negative integer, got {value!r}")


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def cpu_kv_space_bytes() -> int | None:
    """VLLM_CPU_KVCACHE_SPACE in bytes (None: unset or empty, as vLLM reads it); ConfigError if not a whole
    number of GiB above 0 (vLLM's 0 means "size it for me", which is our default anyway: also None)."""
    text = os.environ.get(CPU_KV_SPACE_ENV, "").strip()
    if not text:
        return None
    try:
        gib = int(text)
    except ValueError:
        raise ConfigError(CPU_KV_SPACE_ENV, f"{CPU_KV_SPACE_ENV} must be a whole number of GiB, got {text!r}") from None
    if gib < 0:
        raise ConfigError(CPU_KV_SPACE_ENV, f"{CPU_KV_SPACE_ENV} must be a whole number of GiB, got {text!r}")
    return gib * 1024**3 if gib else None


def offline_config(**engine_args) -> EngineConfig:
    """The configuration of an offline engine (`LLM`): as given, with vLLM's offline step budget on CPU
    when none is given."""
    config = EngineConfig(**engine_args)
    if engine_args.get("max_num_batched_tokens") is None and config.device_type == "cpu":
        config = dataclasses.replace(config, max_num_batched_tokens=OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS)
    return config
