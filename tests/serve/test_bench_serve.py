"""`enginetui bench serve`: the workload over HTTP from a server it starts, and the comparison
with LLM.generate on the same workload, on the tiny model (the numbers are not the point here)."""

import json
import sys

import psutil
import pytest

from enginetui.bench import serve_overhead
from enginetui.bench.serve_load import serve_flags
from enginetui.bench.serve_overhead import generate_kwargs, take_turns
from enginetui.simulate.workload import SimRequest
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args
from tests.support.vllm_marks import FAKE_VLLM


def test_engine_arguments_become_serve_flags():
    kwargs = {
        "model": None,
        "max_num_seqs": 8,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": False,
        "skip_tokenizer_init": True,
    }
    assert serve_flags(kwargs) == [
        "--max-num-seqs",
        "8",
        "--no-enable-chunked-prefill",
        "--enable-prefix-caching",
        "--skip-tokenizer-init",
    ]
    # a list flag's values follow it one by one, as argparse's nargs="+" reads them (not as a Python list)
    assert serve_flags({"cudagraph_capture_sizes": [1, 2, 4]}) == ["--cudagraph-capture-sizes", "1", "2", "4"]


def test_llm_generate_runs_the_servers_step_budget():
    assert generate_kwargs({"model": None})["max_num_batched_tokens"] == 2048  # not LLM's offline 4096 on CPU
    assert generate_kwargs({"model": None, "max_num_batched_tokens": 512})["max_num_batched_tokens"] == 512


def test_server_and_generate_passes_take_turns_each_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(serve_overhead, "server_pass", lambda *a: calls.append("server") or 4.0)
    monkeypatch.setattr(serve_overhead, "generate_pass_alone", lambda *a: calls.append("generate") or 2.0)
    o = serve_overhead.overhead({}, [SimRequest("a", 0.0, 2, 10), SimRequest("b", 0.0, 1, 30)], [], 3, 0, 60.0)
    assert calls == ["server", "generate", "generate", "server", "server", "generate"]
    assert o.http_s == [4.0] * 3 and o.generate_s == [2.0] * 3
    assert (o.http_tok_s, o.generate_tok_s, o.ratio) == (10.0, 20.0, 0.5)


def test_four_kinds_of_pass_take_turns_forwards_then_backwards():
    calls = []
    passes = {name: (lambda name=name: calls.append(name) or 1.0) for name in "abcd"}
    durations = take_turns(passes, 3)
    assert "".join(calls) == "abcddcbaabcd" and durations == {name: [1.0] * 3 for name in "abcd"}


@pytest.mark.slow
def test_bench_serve_runs_the_workload_over_http_and_against_generate(tiny_opt_dir, tmp_path):
    path = tmp_path / "serve.json"
    args = bench_args(
        "serve",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--request-rate",
        "50",
        "--compare",
        "generate",
        "--repeats",
        "1",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    run = data["run"]
    assert data["request_rate"] == 50.0 and run["ttft_ms"]["count"] == 5 and run["e2e_ms"]["count"] == 5
    assert run["ttft_ms"]["p50"] <= run["e2e_ms"]["p50"]
    o = data["overhead"]
    assert len(o["http_s"]) == len(o["generate_s"]) == 1 and o["output_tokens"] == data["output_tokens"]
    assert o["ratio"] > 0


@pytest.mark.slow
def test_vllm_generate_compares_both_servers_with_their_generate(tiny_opt_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(FAKE_VLLM))  # the stand-in vLLM: its LLM and its server
    monkeypatch.setenv("FAKE_VLLM_SERVER_LOG", str(tmp_path / "fake-server.jsonl"))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    path = tmp_path / "serve.json"
    args = bench_args(
        "serve",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--request-rate",
        "50",
        "--compare",
        "vllm-generate",
        "--vllm-python",
        sys.executable,
        "--repeats",
        "2",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    for o in (data["overhead"], data["vllm_overhead"]):
        assert len(o["http_s"]) == len(o["generate_s"]) == 2 and o["output_tokens"] == data["output_tokens"]
        assert o["ratio"] == pytest.approx(o["http_tok_s"] / o["generate_tok_s"]) and o["ratio"] > 0
    out = capsys.readouterr().out
    assert "vLLM's server (streamed)" in out and "vLLM's LLM.generate" in out and "ours / vLLM's: servers" in out
    assert "vLLM's server" in out.rstrip().splitlines()[-1]
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before  # every server and engine ended


def test_vllm_generate_needs_vllms_interpreter_before_anything_starts(tiny_opt_dir, monkeypatch, capsys):
    monkeypatch.delenv("ENGINETUI_VLLM_PYTHON", raising=False)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    args = bench_args("serve", tiny_opt_dir, *SMALL_WORKLOAD, "--compare", "vllm-generate")
    assert args.func(args) != 0
    assert "--vllm-python PATH" in capsys.readouterr().err
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
