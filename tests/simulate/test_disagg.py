"""Disaggregated prefill: each request's prefill on the prefill pool, its KV over the link, its decode on the decode
pool; TTFT holds all three; every request finishes once; the flags and their bad values."""

import numpy as np
import pytest

from enginetui.cli import main
from enginetui.core.config import EngineConfig
from enginetui.simulate import simulate
from enginetui.simulate.disagg import run_disaggregated
from enginetui.simulate.hardware import accelerator
from enginetui.simulate.model_shape import load_model_shape
from enginetui.simulate.roofline import RooflineModel, RooflineParams
from enginetui.simulate.routers import make_router
from enginetui.simulate.summary import summarize
from enginetui.simulate.workload import SimRequest, random_workload

BLOCK = 16
KV_PER_TOKEN = 131072.0  # bytes: Llama-3.1-8B's bf16 K and V of one token
BANDWIDTH = 10e9  # bytes per second


def roofline():
    return RooflineModel(RooflineParams(load_model_shape("llama-3.1-8b"), accelerator("h100"), 1, 2, 2))


def serve(workload, num_p, num_d, policy="round-robin", caching=False, blocks=4096):
    config = EngineConfig(device="cpu", async_scheduling=False, enable_prefix_caching=caching)
    return run_disaggregated(
        config,
        blocks,
        8192,
        roofline(),
        make_router(policy, num_p, BLOCK),
        make_router(policy, num_d, BLOCK, 1),
        workload,
        KV_PER_TOKEN,
        BANDWIDTH,
    )


def test_a_lone_request_is_prefilled_moved_and_decoded_in_that_order():
    """One request: its TTFT is exactly the prefill replica's prompt step, the transfer, and the decode replica's
    first step (one token: the last prompt token, its KV not moved, as vLLM's connector does)."""
    r = SimRequest("r0", 0.0, 1000, 5)
    fleet = serve([r], 1, 1)
    (prefill, decode) = fleet.replicas
    model = roofline()
    assert list(prefill.timeline.num_prefill_tokens) == [1000] and prefill.times.num_output[0] == 1
    prefill_end = prefill.timeline.end[0]
    moved = 1000 * KV_PER_TOKEN / BANDWIDTH
    assert fleet.transfer_seconds == [pytest.approx(moved)]
    # the decode replica: one token of prefill (context 1000), then only decodes, all its 5 tokens
    assert list(decode.timeline.num_prefill_tokens) == [1, 0, 0, 0, 0]
    assert list(decode.timeline.num_decode_tokens) == [0, 1, 1, 1, 1]
    assert decode.timeline.end[0] - decode.timeline.seconds[0] == pytest.approx(
        model.next_start(prefill_end + moved, 1)
    )
    ttft = decode.times.first_token[0] - decode.times.arrival[0]  # from its arrival at the fleet, 0
    assert decode.times.arrival[0] == 0.0 and ttft == pytest.approx(decode.timeline.end[0])
    assert ttft > prefill_end + moved and decode.times.num_output[0] == 5


@pytest.mark.parametrize("policy", ["round-robin", "cache-aware", "prefix-score"])
def test_every_request_is_prefilled_once_and_decoded_once(policy):
    workload = random_workload(120, 600, 40, 0.5, seed=3)
    for k, r in enumerate(workload):
        r.arrival = k * 0.01
    fleet = serve(workload, 2, 3, policy, caching=policy != "round-robin")
    prefill, decode = fleet.replicas[:2], fleet.replicas[2:]
    prefilled = sorted(r.request_id for run in prefill for r in run.requests)
    decoded = sorted(r.request_id for run in decode for r in run.requests)
    assert prefilled == decoded == sorted(r.request_id for r in workload)
    for run in prefill:  # each prompt computed there (less what its prefix cache holds), one token sampled
        computed = sum(run.timeline.num_prefill_tokens) + sum(run.timeline.num_decode_tokens)
        assert computed == sum(r.prompt_len for r in run.requests) - run.prefix_hits
        assert all(n == 1 for n in run.times.num_output)
    by_id = {r.request_id: r for r in workload}
    for run in decode:  # all output generated on the decode pool, the prompt not computed again
        finish = np.frombuffer(run.times.finish, dtype=np.float64)
        assert not np.isnan(finish).any()
        assert [n for n in run.times.num_output] == [by_id[r.request_id].output_len for r in run.requests]
        assert sum(run.timeline.num_prefill_tokens) == len(run.requests)  # the last prompt token each
    assert sorted(set(fleet.decode_choices)) == [0, 1, 2] and len(fleet.choices) == 120


def test_decode_starts_after_the_kv_arrives_and_a_slower_link_delays_the_first_token():
    workload = [SimRequest(f"r{k}", k * 0.05, 2000, 20) for k in range(20)]
    fast = serve(workload, 1, 1)
    config = EngineConfig(device="cpu", async_scheduling=False)
    slow = run_disaggregated(
        config, 4096, 8192, roofline(), make_router("round-robin", 1, BLOCK), make_router("round-robin", 1, BLOCK),
        workload, KV_PER_TOKEN, BANDWIDTH / 10,
    )  # fmt: skip
    for fleet in (fast, slow):
        prefill, decode = fleet.replicas
        ends = dict(zip((r.request_id for r in prefill.requests), prefill.times.finish))
        moved = dict(zip((r.request_id for r in workload), fleet.transfer_seconds))
        for k, r in enumerate(decode.requests):
            assert decode.times.first_token[k] > ends[r.request_id] + moved[r.request_id]
    ttft = [np.nanmean(np.subtract(f.replicas[1].times.first_token, f.replicas[1].times.arrival)) for f in (fast, slow)]
    assert ttft[1] > ttft[0] + 0.9 * 2000 * KV_PER_TOKEN * (10 / BANDWIDTH - 1 / BANDWIDTH)


def test_the_summary_has_a_figure_per_pool_and_the_fleet_counts_each_request_once(capsys):
    argv = ["simulate", "--dataset", "random", "--num-prompts", "60", "--random-input-len", "2048"]
    argv += ["--random-output-len", "32", "--request-rate", "20", "--prefill-replicas", "2", "--decode-replicas", "2"]
    argv += ["--decode-policy", "least-outstanding", "--kv-transfer-bandwidth", "25", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fleet         disaggregated: 2 prefill replicas behind cache-aware, 2 decode replicas behind " in out
    assert "least-outstanding; KV over 25 GB/s" in out
    assert "requests      60 completed of 60\n" in out
    assert "KV transfer   mean " in out and "(the prompt's KV over 25 GB/s)" in out
    assert "\nprefill " in out and "\ndecode  " in out


def test_a_disaggregated_fleet_against_one_engine_doing_both():
    """The same requests: one engine doing prefill and decode against a prefill and a decode engine, with a very
    fast link: decode no longer waits behind long prompts, so TPOT falls."""
    run = dict(dataset="random", num_prompts=80, input_len=4096, output_len=64, request_rate=8, seed=1)
    alone = simulate(**run)
    split = simulate(**run, prefill_replicas=1, decode_replicas=1, kv_transfer_bandwidth=1e6)
    assert split.summary.num_completed == alone.summary.num_completed == 80
    assert split.summary.tpot.p50 < alone.summary.tpot.p50
    assert summarize(split.fleet.runs[1]).num_completed == 80


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--prefill-replicas", "2"], "a disaggregated fleet needs at least one of each"),
        (["--prefill-replicas", "1", "--decode-replicas", "1", "--replicas", "3"], "--prefill-replicas P"),
        (["--prefill-replicas", "1", "--decode-replicas", "1", "--prefill-policy", "x"], "--prefill-policy 'x'"),
        (["--decode-policy", "random"], "only for a disaggregated fleet"),
        (["--prefill-replicas", "1", "--decode-replicas", "1", "--kv-transfer-bandwidth", "0"], "must be positive"),
    ],
)
def test_bad_disaggregation_input_is_one_line(argv, message, capsys):
    assert main(["simulate", "--num-prompts", "3", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


SWEPT = dict(dataset="random", input_len=2048, output_len=64, num_prompts=40, request_rate=40.0, goodput="ttft:300")


@pytest.mark.parametrize(("pool", "figure"), [("prefill", "ttft"), ("decode", "tpot")])
def test_a_sweep_of_either_pool_runs_each_size(pool, figure):
    from enginetui.simulate.api import SimSettings
    from enginetui.simulate.sweep import parse_sweep, run_sweep

    settings = SimSettings(**SWEPT, prefill_replicas=1, decode_replicas=1)
    results = run_sweep(parse_sweep(f"{pool}_replicas=1,2,4"), settings, {})
    for size, result in zip((1, 2, 4), results):
        assert result.fleet is not None and result.fleet.roles.count(pool) == size
        assert result.fleet.roles.count("decode" if pool == "prefill" else "prefill") == 1
        assert result.summary.num_completed == SWEPT["num_prompts"]
    medians = [getattr(r.summary, figure).p50 for r in results]  # the swept pool's own latency, not worse with more
    assert medians[0] > medians[-1] and all(b <= a * 1.01 for a, b in zip(medians, medians[1:]))


@pytest.mark.slow  # the plot: matplotlib
def test_a_pool_sweep_on_the_command_line_names_the_smallest_pool(tmp_path, capsys):
    argv = ["simulate", "--random-input-len", "2048", "--random-output-len", "64", "--num-prompts", "40"]
    argv += ["--request-rate", "40", "--goodput", "ttft:300", "--prefill-replicas", "1", "--decode-replicas", "1"]
    argv += ["--sweep", "prefill_replicas=1,2,4", "--plot", str(tmp_path / "pools.png"), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sweep         prefill_replicas = 1, 2, 4\n" in out
    assert "smallest      prefill_replicas=" in out or "smallest      none of these" in out


@pytest.mark.parametrize(
    "sweep, message",
    [
        ("prefill_replicas=2,0", "a disaggregated fleet needs at least one of each"),
        ("decode_replicas=1,0", "a disaggregated fleet needs at least one of each"),
        ("replicas=2,0", "--replicas"),
        ("router=round-robin,fastest", "--router 'fastest': no such router"),
    ],
)
def test_a_bad_value_anywhere_in_a_fleet_sweep_is_one_line_before_any_runs(sweep, message, capsys):
    argv = ["simulate", "--num-prompts", "3", "--no-progress", "--sweep", sweep]
    argv += ["--prefill-replicas", "1", "--decode-replicas", "1"] if "_replicas" in sweep else ["--replicas", "2"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1 and captured.out == ""
