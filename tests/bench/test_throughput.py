"""`bench throughput` on the tiny model: sane results whose token counts match the workload exactly.

No timing assertions: speed is what the benchmark measures, never what a test checks.
"""

import json

import pytest

from enginetui.bench import throughput
from enginetui.bench.report import engine_settings
from enginetui.bench.workload import draw_workload, spec_from_args
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args


def _expected(args) -> tuple[int, int]:
    workload = draw_workload(spec_from_args(args), 512)  # the tiny model's vocabulary
    return sum(len(r.prompt_token_ids) for r in workload), sum(r.output_len for r in workload)


def test_in_process_runs_write_json_that_matches_the_workload(tiny_opt_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENGINETUI_MULTIPROC", "0")
    path = tmp_path / "tp.json"
    args = bench_args(
        "throughput", tiny_opt_dir, *SMALL_WORKLOAD, "--events", "off", "on", "--repeats", "2", "--json", str(path)
    )
    assert args.func(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    data = json.loads(path.read_text())
    assert lines[-1] == data["summary"] and lines[-1].startswith("throughput custom:")
    prompt_tokens, output_tokens = _expected(args)
    assert [(r["events"], r["repeat"]) for r in data["runs"]] == [("off", 0), ("on", 0), ("off", 1), ("on", 1)]
    for run in data["runs"]:
        assert run["num_requests"] == 5 and run["prompt_tokens"] == prompt_tokens
        assert run["output_tokens"] == output_tokens
        assert run["output_tokens_per_s"] == pytest.approx(output_tokens / run["elapsed_s"])
        assert run["total_tokens_per_s"] == pytest.approx((prompt_tokens + output_tokens) / run["elapsed_s"])
        assert run["cached_prompt_tokens"] == 0 and run["steps"] is None
        assert run["engine_cores"] is None  # the engine ran in this process: no EngineCore child to measure
    assert set(data["best"]) == {"off", "on"} and set(data["events_ratio"]) == {"on"}
    assert data["events_ratio"]["on"] > 0 and data["hf_runs"] == [] and data["hf_best"] is None
    assert data["workload"]["num_prompts"] == 5 and data["device"] == "cpu"
    # What it prints: the engine's flags as flags, and no column of "-" without a word why.
    engine_line = next(line for line in lines if line.startswith("engine: "))
    assert "{" not in engine_line and ", flags --" in engine_line
    assert engine_settings({"model": None}) == "the engine's default flags"
    assert (
        engine_settings({"model": "m", "max_num_seqs": 8, "enable_prefix_caching": False})
        == "flags --max-num-seqs 8 --no-enable-prefix-caching"
    )
    header = next(line for line in lines if line.split()[:2] == ["events", "competing"])
    assert "steps" not in header and "prefill tok" not in header and "engine cores" not in header
    assert (
        "not shown: prefill tok, steps and preempted are summed from the step events by a live subscriber "
        "(--events subscriber)" in lines
    )
    assert any(line.startswith("not shown: engine cores:") for line in lines)


def test_live_subscriber_sums_the_steps_and_prefix_caching_saves_prefill(tiny_opt_dir):
    args = bench_args(
        "throughput",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--prefix-len",
        "48",
        "--enable-prefix-caching",
        "--events",
        "subscriber",
        "--repeats",
        "2",
    )
    result = throughput.run(args)
    prompt_tokens, output_tokens = _expected(args)
    for run in result.runs:  # the second pass starts from a reset prefix cache, like the first
        steps = run.steps
        assert run.output_tokens == output_tokens and steps.missed == 0 and steps.preemptions == 0
        assert 0 < run.cached_prompt_tokens < prompt_tokens
        assert steps.prefill_tokens == prompt_tokens - run.cached_prompt_tokens
        assert steps.decode_tokens == output_tokens - run.num_requests  # a request's first token ends its prefill
    assert result.runs[0].cached_prompt_tokens == result.runs[1].cached_prompt_tokens


def test_compare_hf_uses_the_same_workload_and_counts_useful_tokens(tiny_opt_dir):
    args = bench_args(
        "throughput",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--load-format",
        "dummy",
        "--compare",
        "hf",
        "--hf-batch-sizes",
        "2",
        "8",
    )
    result = throughput.run(args)
    prompt_tokens, output_tokens = _expected(args)
    assert [h.batch_size for h in result.hf_runs] == [2, 5]  # 8 > 5 prompts: one batch of all
    for h in result.hf_runs:
        assert (h.prompt_tokens, h.output_tokens) == (prompt_tokens, output_tokens)
        assert h.generated_tokens >= h.output_tokens
    assert result.hf_best in result.hf_runs
    assert result.hf_ratio == pytest.approx(result.best["on"].output_tokens_per_s / result.hf_best.output_tokens_per_s)
    assert "x HF" in result.summary
