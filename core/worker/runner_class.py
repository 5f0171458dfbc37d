"""Which model runner EngineCore builds: the real one, or one named in the configuration.

A runner is made once per engine as `cls(model, num_blocks, block_size, max_num_reqs, max_model_len,
dtype, device, seed)` (ModelRunner's signature) and then asked, once per step, to `execute` the
scheduler's plan. A runner keeps the tokens it samples: the scheduler sends a running request's
new tokens only when the runner has not produced them itself (with asynchronous scheduling the next
plan is made before this step's tokens reach the scheduler, and the runner feeds them to it). `EngineConfig.model_runner` names the class ("auto": ModelRunner), so the choice
travels with the configuration to an EngineCore child process too. A runner with a
`setup_cuda_graphs(config) -> GraphSetup` method (ModelRunner's) is asked to capture its decode graphs once it is built.
"""

import importlib
from typing import Protocol

import torch

from enginetui.core.sched.output import SchedulerOutput
from enginetui.core.worker.model_runner import ModelRunner, ModelRunnerOutput


class Runner(Protocol):
    """What EngineCore needs from a model runner."""

    model: torch.nn.Module  # the model it runs (EngineCore describes it to clients)

    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput: ...


def runner_class(name: str) -> type:
    """The class `name` names: "auto" (ModelRunner) or "package.module:Class"."""
    if name == "auto":
        return ModelRunner
    module_name, _, attr = name.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"model_runner {name!r} cannot be imported: {exc}") from None
    if not callable(getattr(cls, "execute", None)):
        raise ValueError(f"model_runner {name!r} has no execute() method")
    return cls
