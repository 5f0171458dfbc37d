"""The probe inside vLLM's own Scheduler and AsyncScheduler, checked against vLLM's state at every event.

vLLM runs in its own interpreter (ENGINETUI_VLLM_PYTHON; skipped when unset, as the scheduler
differential is). tests/vllm_probe/probe_driver.py runs the differential's random traces
(tests/sched/traces.py: chunked prefill, preemption, prefix caching, aborts, priorities, resets) through
vLLM's schedulers with the probe in them, no model, and compares every published event with vLLM's
state read directly; each trace also runs without the probe (it must not change a step), without a
subscriber (nothing published) and with the probe failing part-way (logged once, switched off).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import enginetui_site
from tests.sched.traces import random_trace

VLLM_PYTHON = os.environ.get("ENGINETUI_VLLM_PYTHON", "")
NUM_TRACES = 300
NUM_ASYNC_TRACES = 150
DRIVER = Path(__file__).with_name("probe_driver.py")

pytestmark = [
    pytest.mark.skipif(
        not VLLM_PYTHON or not Path(VLLM_PYTHON).exists(),
        reason="set ENGINETUI_VLLM_PYTHON to a Python interpreter with vLLM installed",
    ),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory) -> dict:
    traces = [random_trace(seed) for seed in range(NUM_TRACES)]
    traces += [random_trace(seed, async_scheduling=True) for seed in range(NUM_ASYNC_TRACES)]
    workdir = tmp_path_factory.mktemp("vllm-probe")
    traces_path, results_path = workdir / "traces.json", workdir / "results.json"
    traces_path.write_text(json.dumps(traces))
    site = enginetui_site(workdir / "site")  # this checkout's enginetui, as installed
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(site))
    env.pop("ENGINETUI_PROBE", None)
    done = subprocess.run(
        [VLLM_PYTHON, str(DRIVER), str(traces_path), str(results_path), str(DEFAULT_MODEL_DIR)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, f"the probe driver failed:\n{done.stderr[-4000:]}"
    return json.loads(results_path.read_text())


def test_every_event_of_every_trace_equals_vllms_state(probe_run):
    counts, problems = probe_run["counts"], probe_run["problems"]
    assert counts["traces"] == NUM_TRACES + NUM_ASYNC_TRACES
    assert not problems, f"{counts['problems']} mismatches; first:\n" + "\n".join(problems)
    # one event per busy-loop step of vLLM's engine (plus one per prefix-cache reset), each one checked
    assert counts["events"] >= counts["probe steps"] > 0.9 * counts["trace steps"]


def test_the_traces_exercise_what_the_events_tell(probe_run):
    counts = probe_run["counts"]
    minimum = {
        "async traces": NUM_ASYNC_TRACES,
        "events": 8000,
        "preemptions": 150,
        "admissions": 2000,
        "chunks": 2000,
        "finishes": 2000,
        "additions": 3000,
        "blocks allocated": 5000,
        "cached-free blocks": 5000,
        "shared blocks": 100,
        "placeholders": 2000,
        "combined async steps": 2000,
        "recompute tokens vLLM counts as generation": 50,
    }
    short = {name: counts.get(name, 0) for name, least in minimum.items() if counts.get(name, 0) < least}
    assert not short, f"the traces no longer exercise: {short} (all counts: {counts})"


def test_without_a_subscriber_or_with_a_failing_probe_vllm_runs_as_without_it(probe_run):
    counts = probe_run["counts"]
    assert counts["quiet traces"] == 20 and counts["fault traces"] == 20
    assert counts["probes switched off"] >= 15  # the fault comes at the third schedule(): most traces get there


def test_a_bad_or_missing_setting_is_one_line_and_vllm_runs_without_the_probe(probe_run):
    startup = probe_run["startup"]
    for case in ("unset", "bad", "bad json", "address taken"):
        off, lines = startup[case]
        lines = [line for line in lines if "is not a version it was tested with" not in line]  # another vLLM's
        assert off and len(lines) == 1 and "not publishing" in lines[0], (case, lines)
    on, lines = startup["unknown version"]
    lines = [line for line in lines if "publishing step events on" not in line]  # info: vLLM 0.30 logs it too
    assert not on and len(lines) == 1 and "0.99.1 is not a version it was tested with" in lines[0]


def test_inside_vllm_it_imports_only_the_event_schema_and_publisher(probe_run):
    allowed = {
        "enginetui",
        "enginetui.core",
        "enginetui.core.engine",
        "enginetui.core.engine.event_publisher",
        "enginetui.core.engine.events",
        "enginetui.core.sampling_params",
        "enginetui.core.sched",
        "enginetui.core.sched.step_shape",
        "enginetui.vllm_probe",
        "enginetui.vllm_probe.config",
        "enginetui.vllm_probe.probe",
        "enginetui.vllm_probe.schedulers",
    }
    assert set(probe_run["modules"]) <= allowed and not probe_run["textual"]
