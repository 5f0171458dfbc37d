"""Hand-built recordings for tests: a header for a made-up engine, written around given events."""

from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import SCHEMA_VERSION, StepEvent
from enginetui.core.record import format as fmt
from enginetui.core.record.writer import write_recording

INFO = EngineInfo(
    model_name="fake-opt", model_dir=None, architecture="OPTForCausalLM", num_parameters=1000, kv_bytes_per_token=64,
    vocab_size=512, max_model_len=512, num_blocks=8, block_size=16,
    device="cpu", dtype="float32", eos_token_ids=[2], default_sampling={}, pid=4242,
)  # fmt: skip


def header(**overrides) -> fmt.Header:
    fields = dict(
        event_schema_version=SCHEMA_VERSION,
        created=1000.0,
        source="test",
        enginetui_version="test",
        engine=INFO,
        config={"block_size": 16},
        tokenizer=None,
    )
    fields.update(overrides)
    return fmt.Header(**fields)


def write(path, events: list[StepEvent], **header_overrides) -> str:
    write_recording(path, header(**header_overrides), events)
    return str(path)
