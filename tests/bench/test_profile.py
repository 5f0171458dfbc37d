"""`bench profile`: per-stage shares of a decode step that add up, at each batch size asked."""

import json
import re

import pytest

from tests.bench.small_runs import bench_args


def test_profile_shares_sum_to_100_and_overhead_is_the_rest(tiny_opt_dir, tmp_path, capsys, allocator_tunings):
    path = tmp_path / "profile.json"
    args = bench_args(
        "profile",
        tiny_opt_dir,
        "--batch-sizes",
        "1",
        "4",
        "--input-len",
        "40",
        "--warmup-steps",
        "1",
        "--steps",
        "3",
        "--max-num-batched-tokens",
        "64",
        "--json",
        str(path),
    )
    assert args.func(args) == 0
    assert allocator_tunings == [True]  # on CPU the profile allocates as the EngineCore child does
    data = json.loads(path.read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1] == data["summary"]
    assert [row["batch_size"] for row in data["rows"]] == [1, 4]
    for row in data["rows"]:
        share = row["stage_share"]
        assert set(share) == {"schedule", "prepare", "forward", "sample", "update", "event"}
        assert sum(share.values()) == pytest.approx(100.0)
        assert row["overhead_pct"] == pytest.approx(100.0 - share["forward"] - share["sample"])
        assert row["step_ms"] == pytest.approx(sum(row["stage_ms"].values()))
        assert row["steps"] == 3 and row["tokens_per_s"] > 0


def test_a_batch_the_pool_cannot_hold_is_refused_up_front(tiny_opt_dir, capsys):
    args = bench_args(
        "profile",
        tiny_opt_dir,
        "--batch-sizes",
        "8",
        "--input-len",
        "40",
        "--steps",
        "3",
        "--num-gpu-blocks-override",
        "16",
    )
    assert args.func(args) == 2
    assert re.search("need 40 KV blocks .* the pool has 16 blocks", capsys.readouterr().err)
