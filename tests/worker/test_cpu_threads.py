"""EngineCore's CPU thread policy: what it puts in the child's environment, and that the child gets it."""

from types import SimpleNamespace

import pytest
import torch

from enginetui.core import LLM
from enginetui.core.config import EngineConfig
from enginetui.core.worker.cpu_threads import (
    ADAPT_ENV,
    DEFAULT_SPIN_COUNT,
    engine_process_env,
    engine_threads,
    usable_cores,
)

OMP_VARS = ("OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


@pytest.fixture
def clean_env(monkeypatch):
    for name in OMP_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_defaults_use_every_usable_core_and_a_short_spin(clean_env):
    env = engine_process_env(EngineConfig(device="cpu"))
    assert env == {
        "OMP_NUM_THREADS": str(usable_cores()),
        "GOMP_SPINCOUNT": str(DEFAULT_SPIN_COUNT),
        ADAPT_ENV: "1",
    }  # a count of its own choosing: it may adapt to busy neighbours


def test_reserved_cores_are_left_to_the_front_end_but_one_thread_remains(clean_env):
    assert engine_threads(EngineConfig(device="cpu", cpu_reserved_cores=1)) == max(1, usable_cores() - 1)
    assert engine_threads(EngineConfig(device="cpu", cpu_reserved_cores=1000)) == 1


def test_the_users_environment_is_kept_and_config_fields_win(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "1")
    clean_env.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert engine_process_env(EngineConfig(device="cpu")) == {"OMP_NUM_THREADS": "1"}  # no spin count over it
    clean_env.setenv("GOMP_SPINCOUNT", "77")
    assert engine_process_env(EngineConfig(device="cpu")) == {"OMP_NUM_THREADS": "1"}
    env = engine_process_env(EngineConfig(device="cpu", cpu_threads=3, cpu_spin_count=0))
    assert env == {"OMP_NUM_THREADS": "3", "GOMP_SPINCOUNT": "0"}


def test_nothing_is_set_for_a_gpu_engine(clean_env):
    assert engine_process_env(SimpleNamespace(torch_device=torch.device("cuda"))) == {}


@pytest.mark.parametrize(
    "field,value", [("cpu_threads", 0), ("cpu_reserved_cores", -1), ("cpu_spin_count", -5), ("cpu_threads", True)]
)
def test_bad_values_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        EngineConfig(**{field: value})


@pytest.mark.slow
def test_the_engine_child_starts_with_the_policy_in_its_environment(tiny_opt_dir, clean_env):
    llm = LLM(
        model=tiny_opt_dir,
        skip_tokenizer_init=True,
        num_gpu_blocks_override=16,
        device="cpu",
        cpu_threads=1,
        cpu_spin_count=123,
        multiprocess=True,
    )
    try:
        pid = llm.engine.client.engine_pid
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        assert env[b"OMP_NUM_THREADS"] == b"1" and env[b"GOMP_SPINCOUNT"] == b"123"
        assert len(llm.generate([[1, 2, 3]], use_tqdm=False)[0].outputs[0].token_ids) > 0
    finally:
        llm.shutdown()
