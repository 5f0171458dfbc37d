"""`bench scheduling`: both modes side by side, on a tiny model (a run that proves the command,
not a measurement: figures need a quiet machine)."""

import json

from enginetui.bench.scheduling import overlap_ms
from enginetui.core.engine.events import StepPhase
from tests.bench.small_runs import bench_args


def test_overlap_counts_busy_loop_time_spent_while_the_model_executed():
    phases = [
        StepPhase(2, "schedule", 0.0, 0.002),
        StepPhase(1, "execute", 0.001, 0.010),
        StepPhase(1, "update", 0.010, 0.011),
        StepPhase(3, "schedule", 0.011, 0.012),
        StepPhase(2, "execute", 0.0115, 0.020),
    ]
    busy, hidden = overlap_ms(phases)
    assert round(busy, 6) == 4.0 and round(hidden, 6) == 1.5  # 1 ms of the first plan, 0.5 of the second


def test_both_modes_run_and_only_async_hides_overhead(tiny_opt_dir, tmp_path, capsys, slow_model_thread):
    path = tmp_path / "scheduling.json"
    args = bench_args(
        "scheduling",
        tiny_opt_dir,
        "--batch-sizes",
        "2",
        "--decode-prompt-len",
        "8",
        "--warmup-steps",
        "1",
        "--steps",
        "4",
        "--num-prompts",
        "3",
        "--min-input-len",
        "4",
        "--max-input-len",
        "8",
        "--min-output-len",
        "4",
        "--max-output-len",
        "6",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1] == data["summary"]
    decode = {row["mode"]: row for row in data["decode"]}
    assert set(decode) == {"sync", "async"} and decode["sync"]["hidden_pct"] == 0.0
    assert decode["async"]["hidden_pct"] > 0.0 and all(row["tokens_per_s"] > 0 for row in decode.values())
    assert [w["mode"] for w in data["workload"]] == ["sync", "async"]
    assert all(w["output_tokens"] == data["workload"][0]["output_tokens"] for w in data["workload"])
