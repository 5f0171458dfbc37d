"""`enginetui bench serve`: the workload over HTTP from a server it starts, and the comparison
with LLM.generate on the same workload, on the tiny model (the numbers are not the point here)."""

import json

import pytest

from enginetui.bench import serve
from enginetui.bench.serve import generate_kwargs, serve_flags
from enginetui.bench.workload import BenchRequest
from tests.bench.conftest import SMALL_WORKLOAD, bench_args


def test_engine_arguments_become_serve_flags():
    kwargs = {"model": None, "max_num_seqs": 8, "enable_prefix_caching": True, "enable_chunked_prefill": False,
              "skip_tokenizer_init": True}
    assert serve_flags(kwargs) == ["--max-num-seqs", "8", "--no-enable-chunked-prefill", "--enable-prefix-caching",
                                   "--skip-tokenizer-init"]


def test_llm_generate_runs_the_servers_step_budget():
    assert generate_kwargs({"model": None})["max_num_batched_tokens"] == 2048  # not LLM's offline 4096 on CPU
    assert generate_kwargs({"model": None, "max_num_batched_tokens": 512})["max_num_batched_tokens"] == 512


def test_server_and_generate_passes_take_turns_each_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(serve, "_server_pass", lambda *a: calls.append("server") or 4.0)
    monkeypatch.setattr(serve, "_generate_pass_alone", lambda *a: calls.append("generate") or 2.0)
    o = serve._overhead({}, [BenchRequest([1, 2], 10), BenchRequest([3], 30)], [], 3, 0, 60.0)
    assert calls == ["server", "generate", "generate", "server", "server", "generate"]
    assert o.http_s == [4.0] * 3 and o.generate_s == [2.0] * 3
    assert (o.http_tok_s, o.generate_tok_s, o.ratio) == (10.0, 20.0, 0.5)


@pytest.mark.slow
def test_bench_serve_runs_the_workload_over_http_and_against_generate(tiny_opt_dir, tmp_path):
    path = tmp_path / "serve.json"
    args = bench_args("serve", tiny_opt_dir, *SMALL_WORKLOAD, "--request-rate", "50", "--compare", "generate",
                      "--repeats", "1", "--json", str(path))
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    run = data["run"]
    assert data["request_rate"] == 50.0 and run["ttft_ms"]["count"] == 5 and run["e2e_ms"]["count"] == 5
    assert run["ttft_ms"]["median"] <= run["e2e_ms"]["median"]
    o = data["overhead"]
    assert len(o["http_s"]) == len(o["generate_s"]) == 1 and o["output_tokens"] == data["output_tokens"]
    assert o["ratio"] > 0
