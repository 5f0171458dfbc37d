"""ControlGate's rules on a stand-in engine: watch only unless allowed, and what a caller sets
ends with it (a dashboard detaching) or, for a pause, at the time limit."""

import asyncio
import logging

import pytest

from enginetui.core.engine import control
from enginetui.core.entrypoints.openai import control_gate
from enginetui.core.entrypoints.openai.control_gate import Caller, ControlGate
from enginetui.serve import cli as server_cli


class RecordingEngine:
    """Takes control calls and records them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []  # (op, value), in order
        self.is_running = True  # as AsyncLLM's

    async def control(self, op: str, value=None):
        self.calls.append((op, value))


A = Caller(address="127.0.0.1:5001", dashboard="a1b2")
CURL = Caller(address="127.0.0.1:5002", dashboard=None)


async def test_watch_only_refuses_changes_and_answers_reads():
    engine = RecordingEngine()
    gate = ControlGate(engine, allow=False)
    for op, value in (("pause", None), ("set_step_interval", 1.0), ("step_once", None)):
        with pytest.raises(control.ControlNotAllowed):
            await gate.call(op, value, A)
    await gate.call("snapshot", None, A)
    with pytest.raises(control.BadControlCall):
        await gate.call("set_step_interval", -1, A)
    assert engine.calls == [("snapshot", None)]


async def test_a_pause_and_slow_motion_end_when_their_dashboard_detaches(caplog):
    caplog.set_level(logging.INFO, "uvicorn.error")
    engine = RecordingEngine()
    gate = ControlGate(engine, allow=True, max_pause_s=60)
    await gate.call("pause", None, A)
    await gate.call("set_step_interval", 0.5, A)
    await gate.detached("someone-else")
    assert engine.calls == [("pause", None), ("set_step_interval", 0.5)]
    await gate.detached("a1b2")
    assert engine.calls[2:] == [("resume", None), ("set_step_interval", 0.0)]
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith(
        "engine paused by dashboard a1b2 (127.0.0.1:5001): requests wait until it resumes "
        "(when that dashboard detaches, or after 60s at the latest"
    )
    assert "engine resumed: dashboard a1b2 (127.0.0.1:5001), which paused it, detached" in said
    gate.close()


async def test_a_pause_ends_at_the_time_limit_whoever_made_it(caplog):
    caplog.set_level(logging.INFO, "uvicorn.error")
    engine = RecordingEngine()
    gate = ControlGate(engine, allow=True, max_pause_s=0.05)
    await gate.call("pause", None, CURL)
    for _ in range(200):
        if ("resume", None) in engine.calls:
            break
        await asyncio.sleep(0.01)
    assert engine.calls == [("pause", None), ("resume", None)] and gate.pause_holder is None
    assert any("the pause by 127.0.0.1:5002 reached 0.05s" in r.getMessage() for r in caplog.records)


def test_the_serve_flag_defaults_to_the_gates_limit():
    assert server_cli.DEFAULT_MAX_PAUSE_S == control_gate.DEFAULT_MAX_PAUSE_S


async def test_a_resume_cancels_the_time_limit():
    engine = RecordingEngine()
    gate = ControlGate(engine, allow=True, max_pause_s=0.05)
    await gate.call("pause", None, A)
    await gate.call("resume", None, CURL)
    await asyncio.sleep(0.1)
    assert engine.calls == [("pause", None), ("resume", None)]
