"""ENGINETUI_PROBE: where the probe publishes, per data-parallel rank, and one clear line for a bad value."""

import subprocess
import sys

import pytest

from enginetui.vllm_probe.config import ProbeConfig, ProbeConfigError, parse_probe_config, probe_config_from_env


def test_an_address_or_a_json_object():
    assert parse_probe_config("tcp://127.0.0.1:5600") == ProbeConfig("tcp://127.0.0.1:5600")
    assert parse_probe_config(" ipc:///tmp/p.sock ") == ProbeConfig("ipc:///tmp/p.sock")
    assert parse_probe_config('{"endpoint": "tcp://127.0.0.1:5600", "hwm": 8}') == ProbeConfig(
        "tcp://127.0.0.1:5600", 8
    )
    assert probe_config_from_env({}) is None and probe_config_from_env({"ENGINETUI_PROBE": " "}) is None


def test_a_data_parallel_rank_publishes_beside_rank_0():
    assert ProbeConfig("tcp://127.0.0.1:5600").endpoint_for_rank(0) == "tcp://127.0.0.1:5600"
    assert ProbeConfig("tcp://127.0.0.1:5600").endpoint_for_rank(3) == "tcp://127.0.0.1:5603"
    assert ProbeConfig("tcp://127.0.0.1:0").endpoint_for_rank(2) == "tcp://127.0.0.1:0"  # the OS picks each
    assert ProbeConfig("ipc:///tmp/p.sock").endpoint_for_rank(1) == "ipc:///tmp/p.sock_dp1"


@pytest.mark.parametrize(
    "value, says",
    [
        ("udp://127.0.0.1:1", "endpoint 'udp://127.0.0.1:1' is not tcp://HOST:PORT or ipc://PATH"),
        ("tcp://127.0.0.1", "is not tcp://HOST:PORT"),
        ("tcp://127.0.0.1:99999", "is not tcp://HOST:PORT"),
        ("{nope", "ENGINETUI_PROBE is not valid JSON"),
        ('{"endpoint": "ipc:///x", "port": 1}', "unknown keys ['port']"),
        ('{"hwm": 4}', 'needs an "endpoint"'),
        ('{"endpoint": "ipc:///x", "hwm": 0}', '"hwm" must be a positive integer'),
    ],
)
def test_a_bad_value_is_one_line_naming_it(value, says):
    with pytest.raises(ProbeConfigError) as failed:
        parse_probe_config(value)
    assert says in str(failed.value) and "\n" not in str(failed.value)


def test_the_parts_that_run_without_vllm_import_neither_torch_nor_textual():
    code = (
        "import sys, enginetui.vllm_probe, enginetui.vllm_probe.probe; "
        "print(sorted(m for m in ('torch', 'textual', 'vllm', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
