"""Turns SimSettings into the simulation's parts: the workload, the step-time model, the recording."""

import math

from enginetui.core.config import EngineConfig
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.simulate.arrivals import arrival_times, with_arrivals
from enginetui.simulate.model_shape import ModelShape, load_model_shape
from enginetui.simulate.step_time import ReplayedStepTimes, StepTimeModel
from enginetui.simulate.traces import TRACE_DATASETS, trace_requests
from enginetui.simulate.workload import SimRequest, random_workload, shared_prefix_workload

DATASETS = ("random", "sharegpt", "shared-prefix", "azure-conv", "mooncake")  # --dataset choices


def make_workload(s, vocab_size: int, max_model_len: int = 2048, notes: list[str] | None = None) -> list[SimRequest]:
    """The requests of `s` (SimSettings), arrivals set; what the reader should know of them goes to `notes`."""
    if s.trace or s.dataset in TRACE_DATASETS:  # a trace brings its own arrivals
        return trace_requests(s, max_model_len, notes)
    if s.num_prompts < 1:
        raise ValueError(f"--num-prompts must be at least 1, got {s.num_prompts}")
    if s.dataset == "random":
        requests = random_workload(s.num_prompts, s.input_len, s.output_len, s.range_ratio, s.seed)
    elif s.dataset == "shared-prefix":
        requests = shared_prefix_workload(
            s.num_prompts, s.num_prefixes, s.prefix_len, s.input_len, s.output_len, s.range_ratio, s.seed, vocab_size
        )
    elif s.dataset == "sharegpt":
        from enginetui.simulate.sharegpt import sharegpt_workload

        requests = sharegpt_workload(s.num_prompts, s.seed, s.tokenizer)
    else:
        raise ValueError(f"unknown dataset {s.dataset!r}: choose one of {', '.join(DATASETS)}")
    return with_arrivals(requests, arrival_times(len(requests), s.request_rate, s.burstiness, s.burst_size, s.seed))


def step_model(s, recorded_steps) -> tuple[StepTimeModel, ModelShape | None, dict]:
    """(the step-time model, the model's shape when known, engine flags it implies: a fitted model's
    engine's pool and max_model_len)."""
    if s.step_times == "recorded":
        if recorded_steps is None:
            raise ValueError("--step-times recorded replays a recording's step times: give --from-recording FILE")
        return ReplayedStepTimes(recorded_steps), _shape_or_none(s.model), {}
    if s.step_times == "roofline":
        from enginetui.simulate.hardware import accelerator
        from enginetui.simulate.precision import kv_bytes, weight_bytes
        from enginetui.simulate.roofline import RooflineModel, RooflineParams

        model_shape = load_model_shape(s.model)
        params = RooflineParams(
            model_shape,
            accelerator(s.hardware),
            s.tensor_parallel_size,
            weight_bytes(s.weight_dtype),
            kv_bytes(s.kv_cache_dtype),
        )
        changes = {k: v for k, v in (("mfu", s.mfu), ("mbu", s.mbu)) if v is not None}
        if s.overhead_ms is not None:
            changes["overhead_s"] = s.overhead_ms / 1e3
        from dataclasses import replace

        return RooflineModel(replace(params, **changes)), model_shape, {}
    from enginetui.simulate.fitted import load_fitted

    try:
        fitted = load_fitted(s.step_times)
    except FileNotFoundError:
        raise ValueError(
            f"--step-times {s.step_times}: no such file (roofline, recorded, or a file written by "
            f"`enginetui simulate --calibrate`)"
        ) from None
    shape = _shape_or_none(fitted.info.model) or _shape_or_none(s.model)
    measured = fitted.info.engine_config
    implied = {"num_gpu_blocks_override": measured.get("num_blocks"), "max_model_len": measured.get("max_model_len")}
    return fitted, shape, {k: v for k, v in implied.items() if v is not None}


def _shape_or_none(model: str | None) -> ModelShape | None:
    if model is None:
        return None
    if model == "default":
        from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

        model = str(DEFAULT_MODEL_DIR)
    try:
        return load_model_shape(model)
    except ValueError:
        return None


def event_writer(
    s,
    config: EngineConfig,
    shape: ModelShape | None,
    num_blocks: int,
    max_model_len: int,
    step_times: str,
    live=None,
    replicas: list[str] | None = None,
    replica_models: list[str] | None = None,
):
    """A StepEventBuilder for --record and a live view (None with neither); `step_times`: the step-time model's
    name (a mixed fleet's: each one's); `replicas`: a fleet's roles, for the recording's header (its events come
    from fleet_events.replica_builders; each carries its own replica's KV pool); `replica_models`: a mixed
    fleet's, what each replica runs on. `live(info, source)`: the
    live view's EventSink for a run of the engine `info` describes."""
    if not s.record and live is None:
        return None
    from enginetui.simulate.event_sinks import EventSink, RecordingSink, StepEventBuilder

    if s.from_recording:  # the recorded engine, simulated
        import msgspec

        from enginetui.core.record.reader import read_recording

        info = msgspec.structs.replace(
            read_recording(s.from_recording).header.engine, device=f"simulated {step_times}", pid=0
        )
        source = f"enginetui simulate --from-recording {s.from_recording}"
    else:
        kv_values = shape.kv_elements_per_token if shape else 0
        info = EngineInfo(
            model_name=shape.name if shape else s.model,
            model_dir=None,
            architecture=shape.architecture if shape else "unknown",
            num_parameters=shape.num_params if shape else 0,
            kv_bytes_per_token=kv_values * (1 if s.kv_cache_dtype == "fp8" else 2),
            vocab_size=shape.vocab_size if shape else 0,
            max_model_len=max_model_len,
            num_blocks=num_blocks,
            block_size=config.block_size,
            device=f"simulated {step_times}",
            dtype=s.weight_dtype,
            eos_token_ids=[],
            default_sampling={},
            pid=0,
        )
        rate = "all at once" if math.isinf(s.request_rate) else f"{s.request_rate:g} req/s"
        source = f"enginetui simulate ({s.dataset}, {rate})"
    sinks: list[EventSink] = (
        [RecordingSink(s.record, config, info, source, replicas, replica_models)] if s.record else []
    )
    if live is not None:
        sinks.append(live(info, source))
    return StepEventBuilder(config, sinks)
