"""Engine output goes to a log file while the dashboard owns the terminal."""

import logging
import os
import sys
import warnings

from enginetui.dashboard.logs import (
    KEEP_LOGS,
    default_log_file,
    display_path,
    route_python_output,
)


def test_the_default_log_is_in_the_xdg_cache_and_old_ones_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "enginetui"
    folder.mkdir()
    for i in range(KEEP_LOGS + 5):
        (folder / f"engine-{i}.log").write_text("old")
        os.utime(folder / f"engine-{i}.log", (1000 + i, 1000 + i))
    path = default_log_file()
    assert path == folder / f"engine-{os.getpid()}.log"
    left = sorted(p.name for p in folder.glob("engine-*.log"))
    assert len(left) == KEEP_LOGS - 1  # room for this run's
    assert "engine-0.log" not in left and f"engine-{KEEP_LOGS + 4}.log" in left


def test_display_path_shortens_home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/ada")
    assert display_path("/home/ada/.cache/enginetui/engine-1.log") == "~/.cache/enginetui/engine-1.log"
    assert display_path("/tmp/engine.log") == "/tmp/engine.log"


def test_logging_and_warnings_go_to_the_log_file_while_routed(tmp_path, capsys):
    library = logging.getLogger("some_library")  # like transformers: its own handler on the terminal
    own = logging.StreamHandler(sys.stderr)
    library.addHandler(own)
    library.propagate = False
    path = tmp_path / "engine.log"
    root_handlers = list(logging.getLogger().handlers)
    try:
        with route_python_output(path), warnings.catch_warnings():
            warnings.simplefilter("always")
            library.warning("library says hello")
            logging.getLogger("enginetui.test").warning("dashboard warning")
            logging.getLogger("enginetui.test").info("too quiet to keep")
            warnings.warn("careful now", UserWarning, stacklevel=1)
        library.warning("back on the terminal")
    finally:
        library.removeHandler(own)
    text = path.read_text()
    assert "library says hello" in text and "dashboard warning" in text and "careful now" in text
    assert "too quiet" not in text and "back on the terminal" not in text
    err = capsys.readouterr().err
    assert "back on the terminal" in err and "hello" not in err and "careful" not in err
    assert own.stream is sys.stderr and logging.getLogger().handlers == root_handlers  # all restored
