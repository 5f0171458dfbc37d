"""`--compare vllm`: the vLLM runner and its pipe, driven through a stand-in vLLM package (always),
and through the real vLLM when ENGINETUI_VLLM_PYTHON names its interpreter (skipped otherwise).

No timing assertions: the benchmarks measure speed, the tests check the plumbing and the counts.
"""

import os
import sys

import pytest

from enginetui.bench import latency, throughput
from enginetui.bench.throughput import greedy_agreement
from enginetui.bench.vllm_peer import VLLMPeer, vllm_engine_kwargs
from enginetui.bench.workload import draw_workload, spec_from_args
from enginetui.core.worker.cpu_threads import usable_cores
from enginetui.vllm_launch import EAGER_ENV, VLLM_PYTHON_ENV, VLLMError, vllm_env, vllm_python
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args
from tests.support.models import make_opt_dir
from tests.support.vllm_marks import needs_real_vllm


def test_the_interpreter_comes_from_the_flag_or_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(VLLM_PYTHON_ENV, raising=False)
    with pytest.raises(ValueError, match=f"--vllm-python PATH or set {VLLM_PYTHON_ENV}"):
        vllm_python(None)
    with pytest.raises(ValueError, match="not an executable file"):
        vllm_python(str(tmp_path / "python"))
    monkeypatch.setenv(VLLM_PYTHON_ENV, sys.executable)
    assert vllm_python(None) == sys.executable
    assert vllm_python("/bin/sh") == "/bin/sh"  # the flag wins


def test_core_modes_set_vllms_thread_binding_and_kv_space():
    default = vllm_env("default", {"PATH": "/bin"})
    assert default == {"PATH": "/bin", "VLLM_CPU_KVCACHE_SPACE": "2"}  # vLLM's own binding otherwise
    every = vllm_env("all", {"VLLM_CPU_KVCACHE_SPACE": "4"})
    cpus = sorted(os.sched_getaffinity(0))
    assert every["VLLM_CPU_OMP_THREADS_BIND"] == ",".join(map(str, cpus))
    assert every["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0" and every["VLLM_CPU_KVCACHE_SPACE"] == "4"
    with pytest.raises(ValueError, match="default, all"):
        vllm_env("half")


def test_vllm_keeps_its_defaults_but_shares_the_flags_given(monkeypatch):
    ours = {"model": "m", "seed": 3, "max_num_seqs": 8, "num_gpu_blocks_override": 64, "skip_tokenizer_init": True}
    monkeypatch.delenv(EAGER_ENV, raising=False)  # as a benchmark runs: vLLM compiles, as its users run it
    assert vllm_engine_kwargs(ours, "float32") == {"dtype": "float32", "seed": 3, "max_num_seqs": 8}
    monkeypatch.setenv(EAGER_ENV, "1")  # as the tests run it
    assert vllm_engine_kwargs(ours, "float32") == {
        "dtype": "float32",
        "seed": 3,
        "max_num_seqs": 8,
        "enforce_eager": True,
    }


def test_greedy_agreement_counts_identical_requests_and_the_agreeing_prefix():
    a = greedy_agreement([[1, 2, 3], [4, 5, 6, 7]], [[1, 2, 3], [4, 9, 6, 7]])
    assert (a.identical_requests, a.num_requests) == (1, 2)
    assert a.agreeing_token_share == pytest.approx((3 + 1) / 7)


def test_throughput_compares_with_vllm_per_cores_mode_and_load(tiny_opt_dir, fake_vllm):
    args = bench_args(
        "throughput",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--compare",
        "vllm",
        "--vllm-cores",
        "default",
        "all",
        "--competing",
        "none",
        "busy",
        "--temperature",
        "0",
        "--seed",
        "5",
    )
    result = throughput.run(args)
    workload = draw_workload(spec_from_args(args), 512)
    assert [(v.cores, v.competing) for v in result.vllm_runs] == [
        ("default", "none"),
        ("default", "busy"),
        ("all", "none"),
        ("all", "busy"),
    ]
    assert all(v.output_tokens == sum(r.output_len for r in workload) for v in result.vllm_runs)
    assert result.vllm_version == "0.0-fake"
    assert set(result.vllm_ratio) == {"vllm-default", "vllm-default+busy", "vllm-all", "vllm-all+busy"}
    assert result.vllm_ratio["vllm-all"] == pytest.approx(
        result.best["on"].output_tokens_per_s / result.vllm_best["vllm-all"].output_tokens_per_s
    )
    assert result.vllm_agreement.num_requests == 5  # the fake counts up, our random model does not
    assert set(result.competing_ratio) == {"busy"} and "vllm-all" in result.summary


def test_every_vllm_pass_starts_from_a_cold_prefix_cache(tiny_opt_dir, fake_vllm, quiet_waits):
    """vLLM keeps the blocks of the last pass's prompts: timed from them, its passes would skip prefill."""
    args = bench_args("throughput", tiny_opt_dir, *SMALL_WORKLOAD, "--compare", "vllm", "--repeats", "3")
    result = throughput.run(args)
    assert len(quiet_waits) == len(result.runs) + len(result.vllm_runs) == 6  # each timed pass waited for quiet
    assert [v.repeat for v in result.vllm_runs] == [0, 1, 2]
    assert [v.cached_prompt_tokens for v in result.vllm_runs] == [0, 0, 0]
    assert [r.cached_prompt_tokens for r in result.runs] == [0, 0, 0]


def test_latency_compares_with_vllm_on_the_same_arrivals(tiny_opt_dir, fake_vllm):
    args = bench_args("latency", tiny_opt_dir, *SMALL_WORKLOAD, "--compare", "vllm", "--request-rate", "50")
    result = latency.run(args)
    assert [r.label for r in result.runs] == ["enginetui", "vllm-default"]
    ours, peer = result.runs
    assert peer.ttft_ms.count == 5 and peer.itl_ms.count == result.output_tokens - 5  # one gap per later token
    assert ours.e2e_ms.count == 5 and "vllm-default:" in result.summary and "ours " in result.summary


def test_a_failing_runner_raises_with_its_log_and_keeps_it(tmp_path, fake_vllm):
    with pytest.raises(VLLMError, match="vLLM failed in 'start'") as info:
        VLLMPeer(fake_vllm, str(tmp_path), {})  # no model there
    assert "is not a model directory" in str(info.value)
    log = str(info.value).rsplit("log ", 1)[-1].strip()
    assert os.path.exists(log)
    os.unlink(log)


@pytest.mark.slow
def test_busy_and_dashboard_loads_run_beside_the_engine(tiny_opt_dir):
    # a pass of over 1 s: the dashboard, paced by its CPU budget, redraws at least once a second
    long_enough = ["--num-prompts", "10", "--min-output-len", "420", "--max-output-len", "460"]
    args = bench_args(
        "throughput", tiny_opt_dir, *SMALL_WORKLOAD, *long_enough, "--competing", "none", "busy", "dashboard"
    )
    result = throughput.run(args)
    assert [r.label for r in result.runs] == ["on", "on+busy", "on+dashboard"]
    cost = result.runs[2].dashboard
    assert cost.events > 0 and cost.redraws > 0 and cost.cpu_s > 0 and 0 < cost.cpu_share, cost
    assert result.runs[0].dashboard is None and set(result.competing_ratio) == {"busy", "dashboard"}
    for run in result.runs:  # the EngineCore child's CPU time over the pass, per second: never more than its cores
        assert 0 < run.engine_cores <= usable_cores() + 0.1


def test_the_dashboard_load_needs_step_events(tiny_opt_dir, monkeypatch):
    args = bench_args("throughput", tiny_opt_dir, *SMALL_WORKLOAD, "--events", "off", "--competing", "dashboard")
    with pytest.raises(ValueError, match="needs the multiprocess engine with step events"):
        throughput.run(args)


@pytest.mark.slow
@needs_real_vllm
def test_real_vllm_same_weights_greedy_tokens_agree(tmp_path):
    model = make_opt_dir(tmp_path / "opt", hidden_size=128, word_embed_proj_dim=128, ffn_dim=256)  # head size 32
    args = bench_args(
        "throughput", model, *SMALL_WORKLOAD, "--compare", "vllm", "hf", "--temperature", "0", "--hf-batch-sizes", "8"
    )
    result = throughput.run(args)
    assert result.vllm_version and result.vllm_runs[0].output_tokens == result.output_tokens
    assert result.vllm_agreement.agreeing_token_share > 0.9  # fp32 on both sides: summation order only
    assert result.hf_runs and result.vllm_ratio["vllm-default"] > 0


@pytest.mark.slow
@needs_real_vllm
def test_real_vllm_latency_streams_every_token(tmp_path):
    model = make_opt_dir(tmp_path / "opt", hidden_size=128, word_embed_proj_dim=128, ffn_dim=256)
    args = bench_args("latency", model, *SMALL_WORKLOAD, "--compare", "vllm", "--request-rate", "50")
    result = latency.run(args)
    peer = result.runs[1]
    assert peer.engine == "vllm-default" and peer.e2e_ms.count == 5
    assert peer.output_tokens_per_s > 0 and peer.ttft_ms.p50 <= peer.e2e_ms.p50
