"""Fixtures for the dashboard tests: the app wired to a ScriptedEngine (the real engine with the
scripted model runner), with notifications recorded."""

import pytest

from tests.dashboard.scenes import RecordingApp
from tests.fakes.scripted_engine import ScriptedEngine


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
