"""Fixtures for the dashboard tests: the app wired to a FakeEngine, with notifications recorded."""

import pytest
from textual.notifications import SeverityLevel

from enginetui.app import EngineTUI
from tests.dashboard.fake_engine import FakeEngine
from tests.dashboard.scenes import FIXED_PROCESS

SIZE = (120, 40)  # terminal size of the Pilot tests


class RecordingApp(EngineTUI):
    """EngineTUI that remembers every notification it shows."""

    def __init__(self, engine: FakeEngine, **kwargs) -> None:
        super().__init__(engine, probe=lambda pid: FIXED_PROCESS, seed=0, **kwargs)
        self.fake = engine  # the engine under the app
        self.notes: list[tuple[SeverityLevel, str]] = []  # (severity, message) of each notification

    def notify(self, message, *, severity: SeverityLevel = "information", **kwargs) -> None:
        self.notes.append((severity, str(message)))
        super().notify(message, severity=severity, **kwargs)


@pytest.fixture
def make_app():
    """Build a RecordingApp over a FakeEngine made with the given keyword arguments."""

    def make(**engine_kwargs) -> RecordingApp:
        return RecordingApp(FakeEngine(**engine_kwargs))

    return make
