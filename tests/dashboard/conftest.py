"""Fixtures for the dashboard tests: the app wired to a ScriptedEngine (the real engine with the
scripted model runner), with notifications recorded."""

import pytest
from textual.notifications import SeverityLevel

from enginetui.dashboard.app import EngineTUI
from tests.dashboard.scenes import FIXED_PROCESS
from tests.dashboard.scripted_engine import ScriptedEngine

SIZE = (120, 40)  # terminal size of the Pilot tests


class RecordingApp(EngineTUI):
    """EngineTUI that remembers every notification it shows."""

    def __init__(self, engine: ScriptedEngine, **kwargs) -> None:
        super().__init__(engine, probe=lambda pid: FIXED_PROCESS, seed=0, **kwargs)
        self.fake = engine  # the engine under the app
        self.notes: list[tuple[SeverityLevel, str]] = []  # (severity, message) of each notification

    def notify(self, message, *, severity: SeverityLevel = "information", **kwargs) -> None:
        self.notes.append((severity, str(message)))
        super().notify(message, severity=severity, **kwargs)


@pytest.fixture(autouse=True)
def shut_down_engines():
    """Every ScriptedEngine a test made is shut down after it (its EngineCore thread ends)."""
    yield
    while ScriptedEngine.made:
        ScriptedEngine.made.pop().shutdown()


@pytest.fixture
def make_app():
    """Build a RecordingApp over a ScriptedEngine made with the given keyword arguments."""

    def make(**engine_kwargs) -> RecordingApp:
        return RecordingApp(ScriptedEngine(**engine_kwargs))

    return make
