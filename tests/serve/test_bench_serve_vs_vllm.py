"""`enginetui bench serve --compare vllm-server`, `--goodput` and `--record`: our server and vLLM's
(a stand-in vLLM server always; the real one when ENGINETUI_VLLM_PYTHON names its interpreter),
taking turns pass by pass on the same requests and arrivals; no process outlives the benchmark. No
timing assertions: the numbers are not the point here."""

import json
import sys

import psutil
import pytest

from enginetui.bench.latency import RequestTiming, request_latencies
from enginetui.bench.serve_vs_vllm import turns
from enginetui.bench.vllm_peer import server_flags
from enginetui.latency_figures import goodput, parse_slos
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args
from tests.support.models import make_opt_dir
from tests.support.vllm_marks import FAKE_VLLM, needs_real_vllm


def test_vllm_gets_its_engine_keywords_as_flags():
    flags = server_flags(
        {
            "dtype": "float32",
            "seed": 0,
            "enable_prefix_caching": False,
            "skip_tokenizer_init": True,
            "enforce_eager": True,
        }
    )
    assert flags == [
        "--disable-log-stats",
        "--uvicorn-log-level",
        "warning",
        "--dtype",
        "float32",
        "--seed",
        "0",
        "--no-enable-prefix-caching",
        "--skip-tokenizer-init",
        "--enforce-eager",
    ]
    logged = server_flags({}, log_steps=True)
    assert "--enable-logging-iteration-details" in logged and "--disable-log-stats" not in logged


def test_goodput_counts_requests_within_every_slo():
    fast = RequestTiming(sent=0.0, token_times=[0.1, 0.2, 0.3], num_output_tokens=3, done=0.3)  # TTFT 100, TPOT 100
    slow = RequestTiming(sent=0.0, token_times=[0.5, 0.6], num_output_tokens=2, done=0.6)  # TTFT 500
    one = RequestTiming(sent=0.0, token_times=[0.2], num_output_tokens=1, done=0.2)  # no TPOT: passes it
    slos = parse_slos(["ttft:200", "tpot:150"])
    assert slos == {"ttft": 200.0, "tpot": 150.0}
    assert goodput(slos, 2.0, *request_latencies([fast, slow, one])) == pytest.approx(1.0)  # 2 good requests in 2 s
    assert goodput({}, 2.0, *request_latencies([fast, slow, one])) is None
    with pytest.raises(ValueError, match="unknown SLO"):
        parse_slos(["latency:5"])


def test_the_servers_take_turns_abba_so_a_drift_weighs_on_both_alike():
    assert turns(1) == [0, 1]
    assert turns(2) == [0, 1, 1, 0]
    assert turns(3) == [0, 1, 1, 0, 0, 1]
    assert all(turns(n).count(0) == turns(n).count(1) == n for n in range(1, 8))


def test_several_rates_need_the_vllm_server_comparison(tiny_opt_dir, capsys):
    args = bench_args("serve", tiny_opt_dir, *SMALL_WORKLOAD, "--request-rate", "1", "2")
    assert args.func(args) == 2
    assert "several --request-rate values are for --compare vllm-server" in capsys.readouterr().err
    args = bench_args("serve", tiny_opt_dir, *SMALL_WORKLOAD, "--step-times")
    assert args.func(args) == 2
    assert "--step-times compares the steps of two servers: it needs --compare vllm-server" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_serve_records_for_the_accuracy_check(tiny_opt_dir, tmp_path):
    from enginetui.simulate.measured import compare_recording

    path, record = tmp_path / "serve.json", tmp_path / "serve.etrec"
    args = bench_args(
        "serve",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--request-rate",
        "50",
        "--record",
        str(record),
        "--goodput",
        "ttft:60000",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    assert data["record"] == str(record) and data["goodput"] > 0
    rows = {label: (m, p) for label, m, p, _ in compare_recording(str(record), "recorded")}
    assert rows["output tok/s"][0] == pytest.approx(rows["output tok/s"][1])  # recorded step times: exact


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.slow
def test_compare_with_a_stand_in_vllm_server(tiny_opt_dir, tmp_path, monkeypatch, capsys):
    log = tmp_path / "fake-server.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(FAKE_VLLM))
    monkeypatch.setenv("FAKE_VLLM_SERVER_LOG", str(log))
    path = tmp_path / "vs.json"
    before = _descendants()
    args = bench_args(
        "serve",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--compare",
        "vllm-server",
        "--vllm-python",
        sys.executable,
        "--request-rate",
        "50",
        "inf",
        "--goodput",
        "ttft:60000",
        "--repeats",
        "2",
        "--step-times",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    assert data["request_rates"] == [50.0, None] and data["vllm_version"] == "0.0-fake" and data["repeats"] == 2
    for side in ("ours", "vllm"):
        assert [[p["run"]["e2e_ms"]["count"] for p in point["passes"]] for point in data[side]] == [[5, 5], [5, 5]]
        assert all(p["goodput"] > 0 for point in data[side] for p in point["passes"])
        # each server's own process (not its engine): CPU per token streamed, read in clock ticks of 10 ms
        # (a pass of this tiny workload may take less than one), more than none over the passes
        front_end = [p["front_end_us_per_token"] for point in data[side] for p in point["passes"]]
        assert all(0 <= us < 1e6 for us in front_end) and sum(front_end) > 0

    def median_tok_s(point):  # the median of two passes: their mean
        return sum(p["run"]["output_tokens_per_s"] for p in point["passes"]) / 2

    for ratios, ours, theirs in zip(data["ratios"], data["ours"], data["vllm"]):
        assert ratios["output tok/s"] == pytest.approx(median_tok_s(ours) / median_tok_s(theirs))
    started = json.loads(log.read_text())
    argv = started["argv"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--dtype") + 1] == "float32"
    assert "--no-enable-prefix-caching" in argv and "--skip-tokenizer-init" in argv
    assert started["env"]["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0" and started["env"]["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert (
        not psutil.pid_exists(started["engine_core_pid"])
        or psutil.Process(started["engine_core_pid"]).status() == psutil.STATUS_ZOMBIE
    )
    assert _descendants() <= before  # both servers and everything they started are gone
    assert "--enable-logging-iteration-details" in argv
    # the stand-in logs a step per token: each request's first a prompt step, the rest one-request decodes
    steps = data["steps"]
    tokens = sum(
        p["run"]["itl_ms"]["count"] + p["run"]["e2e_ms"]["count"] for point in data["vllm"] for p in point["passes"]
    )  # every pass's tokens (the warm-ups add more)
    assert steps["vllm_steps"] >= tokens and steps["ours_steps"] > 0
    rows = {r["kind"]: r for r in steps["rows"]}
    assert rows["decode 1"]["vllm_ms"] == 1.0 and rows["prompt 1-128 tok"]["vllm_steps"] >= 20
    assert sum(r["ours_steps"] for r in steps["rows"]) == steps["ours_steps"]
    out = capsys.readouterr().out
    assert (
        "request rate 50 req/s, median of 2 passes each, interleaved" in out
        and "ours/vLLM" in out
        and out.rstrip().splitlines()[-1].startswith("serve ")
    )
    assert "model time per engine step" in out and "all steps: ours" in out


@pytest.mark.slow
@needs_real_vllm
def test_compare_with_the_real_vllm_server(tmp_path):
    model = make_opt_dir(tmp_path / "opt", hidden_size=128, word_embed_proj_dim=128, ffn_dim=256)  # head size 32
    path = tmp_path / "vs.json"
    before = _descendants()
    args = bench_args(
        "serve",
        model,
        *SMALL_WORKLOAD,
        "--compare",
        "vllm-server",
        "--request-rate",
        "50",
        "--repeats",
        "1",
        "--goodput",
        "ttft:60000",
        "tpot:60000",
        "--step-times",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    assert data["vllm_version"] and data["vllm_args"]["dtype"] == "float32"
    theirs = data["vllm"][0]["passes"][0]["run"]
    assert theirs["e2e_ms"]["count"] == 5 and theirs["output_tokens_per_s"] > 0
    assert data["vllm"][0]["passes"][0]["goodput"] > 0 and data["ratios"][0]["output tok/s"] > 0
    steps = data["steps"]  # vLLM logged its steps: as many model steps as ours, give or take the warm-up's
    assert steps["vllm_steps"] > 0 and steps["ours_steps"] > 0 and steps["vllm_total_ms"] > 0
    assert sum(r["vllm_steps"] for r in steps["rows"]) == steps["vllm_steps"]
    assert _descendants() <= before


def test_without_vllms_interpreter_the_command_says_how_to_name_one(monkeypatch, capsys):
    from enginetui.cli import main

    monkeypatch.delenv("ENGINETUI_VLLM_PYTHON", raising=False)
    assert main(["bench", "serve", "--compare", "vllm-server"]) == 2
    assert capsys.readouterr().err.startswith(
        "enginetui bench serve: error: comparing with vLLM needs vLLM's interpreter: pass --vllm-python PATH or set "
        "ENGINETUI_VLLM_PYTHON"
    )
