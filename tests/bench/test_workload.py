"""Workloads are seeded and deterministic, and the flags change exactly what they name."""

import dataclasses

import pytest

from enginetui.bench.workload import PRESETS, WorkloadSpec, draw_workload, spec_from_args
from enginetui.cli import build_parser


def _spec(*flags: str) -> WorkloadSpec:
    return spec_from_args(build_parser().parse_args(["bench", "throughput", *flags]))


def test_same_spec_same_requests_other_seed_other_requests():
    spec = PRESETS["mixed"]
    a, b = draw_workload(spec, 50272), draw_workload(spec, 50272)
    assert [(r.prompt_token_ids, r.output_len) for r in a] == [(r.prompt_token_ids, r.output_len) for r in b]
    other = draw_workload(dataclasses.replace(spec, seed=1), 50272)
    assert [r.prompt_token_ids for r in other] != [r.prompt_token_ids for r in a]


def test_lengths_and_token_ids_stay_in_their_ranges():
    spec = PRESETS["mixed"]
    workload = draw_workload(spec, 1000)
    assert len(workload) == 64
    assert all(32 <= len(r.prompt_token_ids) <= 512 and 32 <= r.output_len <= 256 for r in workload)
    assert all(0 <= t < 1000 for r in workload for t in r.prompt_token_ids)
    assert len({r.output_len for r in workload}) > 10  # really mixed


def test_shared_prefix_preset_shares_exactly_its_prefix():
    workload = draw_workload(PRESETS["shared-prefix"], 50272)
    prefix = workload[0].prompt_token_ids[:400]
    assert all(r.prompt_token_ids[:400] == prefix for r in workload)
    assert all(416 <= len(r.prompt_token_ids) <= 464 and r.output_len == 32 for r in workload)
    assert len({tuple(r.prompt_token_ids[400:416]) for r in workload}) == 64  # the rest is distinct


def test_flags_override_the_preset():
    assert _spec() == PRESETS["quick"]
    assert _spec("--preset", "mixed", "--workload-seed", "3") == WorkloadSpec("mixed", 64, 32, 512, 32, 256, seed=3)
    spec = _spec("--input-len", "100", "--output-len", "20", "--range-ratio", "0.5", "--num-prompts", "7")
    assert (spec.name, spec.num_prompts, spec.min_input_len, spec.max_input_len) == ("custom", 7, 50, 150)
    assert (spec.min_output_len, spec.max_output_len) == (10, 30)
    spec = _spec("--input-len", "100", "--range-ratio", "0.5", "--max-input-len", "120")  # explicit bound wins
    assert (spec.min_input_len, spec.max_input_len) == (50, 120)
    assert _spec("--input-len", "64").max_input_len == 64  # range ratio 0: a fixed length


def test_bad_ranges_are_clear_errors():
    with pytest.raises(ValueError, match="input lengths"):
        _spec("--min-input-len", "200")  # above quick's max of 128
    with pytest.raises(ValueError, match="range-ratio"):
        _spec("--input-len", "10", "--range-ratio", "1.5")


def test_bench_and_simulate_draw_the_same_requests_for_the_same_settings():
    import numpy as np

    from enginetui.simulate.api import SimSettings
    from enginetui.simulate.arrivals import arrival_times, with_arrivals
    from enginetui.simulate.from_settings import make_workload

    flags = {"num_prompts": 12, "input_len": 200, "output_len": 40, "range_ratio": 0.5, "seed": 7}
    spec = _spec(*"--num-prompts 12 --input-len 200 --output-len 40 --range-ratio 0.5 --workload-seed 7".split())
    bench = with_arrivals(draw_workload(spec, 50272), arrival_times(12, 4.0, seed=spec.seed))  # as bench serve does
    simulated = make_workload(SimSettings(dataset="random", request_rate=4.0, **flags), 50272)
    assert [(r.prompt_len, r.output_len, r.arrival) for r in bench] == [
        (r.prompt_len, r.output_len, r.arrival) for r in simulated
    ]
    assert len({(r.prompt_len, r.output_len) for r in bench}) > 6 and np.ptp([r.arrival for r in bench]) > 0
    assert all(len(r.prompt_token_ids or []) == r.prompt_len for r in bench)  # bench's prompts carry their tokens
