"""The checkout under test, and the environments of subprocesses that import it or only what is installed."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout under test: the one place a test finds it


def checkout_env(**extra: str) -> dict[str, str]:
    """The environment for a Python subprocess that must import this checkout's packages
    (not an installed copy of them), plus `extra` variables."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def installed_env() -> dict[str, str]:
    """The environment of a user who installed the package: no PYTHONPATH, so only what the install put on
    the path imports (a module that imports only from inside the checkout, as `core`, does not)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
