"""Clients of EngineCore. The in-process one lives here; the multiprocess ones in mp_client.py.

Every client has the same interface, so LLMEngine and AsyncLLM don't care where EngineCore runs.
`ENGINETUI_MULTIPROC=0` (or `multiprocess=False`) selects the in-process client for debugging.
"""

import os
from collections.abc import Callable

import torch

from core.config import EngineConfig
from core.engine.core import EngineCore
from core.engine.events import StepEvent
from core.engine.processor import EngineInfo
from core.models.generation_config import generation_defaults
from core.outputs import EngineCoreOutputs, EngineCoreRequest

MULTIPROC_ENV = "ENGINETUI_MULTIPROC"


def engine_info(core: EngineCore, pid: int) -> EngineInfo:
    """What a client needs to know about a started EngineCore."""
    generation = generation_defaults(core.model_dir, core.hf_config)
    return EngineInfo(
        model_name=core.config.model or "default",
        model_dir=str(core.model_dir) if core.model_dir is not None else None,
        vocab_size=core.hf_config.vocab_size,
        max_model_len=core.max_model_len,
        num_blocks=core.num_blocks,
        block_size=core.config.block_size,
        device=str(core.config.torch_device),
        dtype=str(next(core.runner.model.parameters()).dtype).removeprefix("torch."),
        eos_token_ids=generation.eos_token_ids,
        default_sampling=generation.sampling,
        pid=pid,
    )


class InprocClient:
    """Runs EngineCore in this process: get_output() drives one step."""

    def __init__(self, config: EngineConfig, on_event: Callable[[StepEvent], None] | None = None) -> None:
        self.core = EngineCore(config)  # the engine itself
        self.info = engine_info(self.core, os.getpid())  # limits and identity
        self.on_event = on_event  # receives each step's event (if events are on)

    def add_request(self, request: EngineCoreRequest) -> None:
        self.core.add_request(request)

    def abort_requests(self, request_ids: list[str]) -> None:
        self.core.abort_requests(request_ids)

    def get_output(self) -> EngineCoreOutputs:
        """Run one step if there is work; pending outputs (aborts, rejections) come back too."""
        if not self.core.has_work() or self.core.paused:
            return EngineCoreOutputs(outputs=self.core.scheduler.take_pending_outputs(), step=self.core.step_count, timestamp=0.0)
        return self.step_once()

    def pause(self) -> None:
        self.core.paused = True

    def resume(self) -> None:
        self.core.paused = False

    def step_once(self) -> EngineCoreOutputs:
        """Exactly one engine step (whether paused or not); its event goes to on_event."""
        outputs, event = self.core.step()
        if event is not None and self.on_event is not None:
            self.on_event(event)
        return outputs

    def snapshot(self) -> StepEvent:
        return self.core.snapshot()

    def reset_prefix_cache(self) -> bool:
        return self.core.reset_prefix_cache()

    def shutdown(self) -> None:
        self.core = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def use_multiprocess(flag: bool | None) -> bool:
    """The explicit flag if given, else ENGINETUI_MULTIPROC (default on)."""
    if flag is not None:
        return flag
    return os.environ.get(MULTIPROC_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
