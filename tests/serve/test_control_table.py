"""One table of control operations (core.engine.control.OPS): every client, the server's route,
the attached and replay engines and the dashboard's protocol use its names; errors travel as
typed values."""

import inspect

import msgspec
import pytest

from enginetui.core.engine import control, wire
from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.llm_engine import LLMEngine
from enginetui.dashboard.engine_link import Engine
from enginetui.replay.engine import RecordedEngine
from enginetui.serve.remote_engine import RemoteEngine


@pytest.mark.parametrize("cls", [AsyncLLM, RemoteEngine, RecordedEngine])
def test_every_engine_has_a_method_per_op_under_its_name(cls):
    for name in [*control.OPS, "control"]:
        assert inspect.iscoroutinefunction(getattr(cls, name, None)), f"{cls.__name__}.{name}"
    assert callable(LLMEngine.control)


def test_the_dashboards_protocol_names_its_controls_as_the_table_does():
    methods = {n for n, f in vars(Engine).items() if inspect.iscoroutinefunction(f)} - {"abort"}
    assert methods and methods <= set(control.OPS), methods - set(control.OPS)


def test_each_op_says_its_value_and_what_it_does():
    for op in control.OPS.values():
        assert op.summary and (op.value is None) == (op.name != "set_step_interval")
    assert [op.name for op in control.OPS.values() if not op.changes_engine] == ["snapshot"]


@pytest.mark.parametrize(
    "code, cls",
    [
        ("bad_call", control.BadControlCall),
        ("not_allowed", control.ControlNotAllowed),
        ("failed", control.ControlFailed),
        ("from-a-newer-side", control.ControlFailed),
    ],
)
def test_an_error_travels_as_a_value_and_arrives_as_its_exception(code, cls):
    reply = wire.ControlReply(call_id=1, step=2, error=control.ControlError(code=code, message="why"))
    arrived = wire.decode_output(wire.encode(reply))
    with pytest.raises(cls, match="^why$") as raised:
        control.raise_error(arrived.error)
    assert type(raised.value) is cls
    assert msgspec.json.decode(msgspec.json.encode(arrived.error), type=control.ControlError) == arrived.error


def test_a_bad_call_is_a_value_error_with_its_code():
    with pytest.raises(ValueError, match="unknown control op 'step'") as raised:
        control.check("step")
    assert raised.value.error.code == "bad_call"
