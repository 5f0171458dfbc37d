"""A simulated fleet: each router policy's choice on a hand-built fleet state, the fleet run's accounting,
the replica sweep, and bad fleet input on the command line."""

from array import array
from dataclasses import dataclass, field

import numpy as np
import pytest

from enginetui.cli import main
from enginetui.core.config import EngineConfig
from enginetui.core.record.reader import read_recording
from enginetui.simulate import simulate
from enginetui.simulate.api import per_replica
from enginetui.simulate.arrivals import arrival_times, with_arrivals
from enginetui.simulate.fleet import FleetReplica, run_fleet
from enginetui.simulate.hardware import accelerator
from enginetui.simulate.model_shape import load_model_shape
from enginetui.simulate.report import describe_setup
from enginetui.simulate.roofline import RooflineModel, RooflineParams
from enginetui.simulate.routers import BALANCE_ABS_THRESHOLD, ROUTERS, CacheAware, RoundRobin, make_router
from enginetui.simulate.simulator import FrontEnd, RequestTimes, Simulator, _engine_request
from enginetui.simulate.workload import SimRequest, random_workload, shared_prefix_workload

BLOCK = 16


@dataclass
class FakeReplica:
    """A replica as a router reads it, set by hand."""

    index: int
    loaded: int = 0
    cached: set = field(default_factory=set)  # block hashes its prefix cache holds
    waiting: int = 0
    usage: float = 0.0

    def load(self):
        return self.loaded

    def cached_prefix_blocks(self, hashes):
        n = 0
        for h in hashes:
            if h not in self.cached:
                break
            n += 1
        return n

    def num_waiting(self):
        return self.waiting

    def kv_usage(self):
        return self.usage


def prompt(name: str, tokens: int, shared: SimRequest | None = None):
    """An engine request with distinct tokens (after `shared`'s prefix when given)."""
    prefix = list(_engine_request(shared, True).prompt_token_ids) if shared else None
    return _engine_request(SimRequest(name, 0.0, tokens + (len(prefix) if prefix else 0), 4, prefix=prefix), True)


def fleet(*loads):
    return [FakeReplica(k, load) for k, load in enumerate(loads)]


def test_round_robin_random_and_least_outstanding():
    rr = make_router("round-robin", 3, BLOCK)
    replicas = fleet(5, 0, 9)
    assert [rr.route(prompt(f"r{i}", 32), replicas, 0.0) for i in range(5)] == [0, 1, 2, 0, 1]
    rnd = make_router("random", 4, BLOCK, seed=1)
    picks = [rnd.route(prompt("x", 32), fleet(0, 0, 0, 0), 0.0) for _ in range(400)]
    assert set(picks) == {0, 1, 2, 3} and max(np.bincount(picks)) < 140
    lor = make_router("least-outstanding", 4, BLOCK)
    assert lor.route(prompt("x", 32), fleet(3, 1, 1, 2), 0.0) == 1  # the lowest load, the first on a tie


def test_power_of_two_takes_the_lighter_of_two_distinct_replicas():
    p2 = make_router("power-of-two", 2, BLOCK, seed=0)
    assert {p2.route(prompt("x", 32), fleet(5, 1), 0.0) for _ in range(50)} == {1}
    p3 = make_router("power-of-two", 3, BLOCK, seed=0)
    picks = [p3.route(prompt("x", 32), fleet(9, 5, 0), 0.0) for _ in range(300)]
    assert 0 not in picks  # the busiest never wins a pair
    assert picks.count(2) == pytest.approx(200, abs=40)  # the idle one wins both pairs it is in (2 of 3)


def test_consistent_hash_sends_equal_prompts_to_one_replica_and_spreads_others():
    ch = make_router("consistent-hash", 4, BLOCK)
    replicas = fleet(0, 0, 0, 0)
    same = prompt("a", 200)
    assert len({ch.route(same, replicas, 0.0) for _ in range(10)}) == 1
    spread = [ch.route(prompt(f"p{i}", 200), replicas, 0.0) for i in range(400)]
    assert set(spread) == {0, 1, 2, 3} and max(np.bincount(spread)) < 160
    assert ch.route(same, fleet(50, 50, 50, 50), 0.0) == ch.route(same, replicas, 0.0)  # load plays no part


def test_cache_aware_follows_the_tree_while_balanced_and_the_lowest_load_when_not():
    ca = make_router("cache-aware", 3, BLOCK)
    base = SimRequest("base", 0.0, 640, 4)
    assert ca.route(prompt("base", 640), fleet(2, 0, 1), 0.0) == 1  # nothing matched: the lowest load
    # the same prefix, over 30% of the prompt: the replica holding it, though busier
    assert ca.route(prompt("follow", 320, shared=base), fleet(0, 5, 0), 0.0) == 1
    # a load gap over the absolute threshold but max under 1.5x min is no imbalance: still the tree
    busy = BALANCE_ABS_THRESHOLD + 10
    assert ca.route(prompt("near", 320, shared=base), fleet(200, 200 + busy, 200), 0.0) == 1
    # a prompt matching under 30% of itself: the lowest load (the first of equals)
    assert ca.route(prompt("long", 4000, shared=base), fleet(0, 5, 0), 0.0) == 0
    # imbalanced (gap over the threshold and over 1.5x): the lowest load, though replica 0 now holds the
    # prefix last
    assert ca.route(prompt("again", 320, shared=base), fleet(busy, 3, 4), 0.0) == 1
    assert ca.route(prompt("again2", 320, shared=base), fleet(0, 0, 0), 0.0) == 1  # ... and "again" taught it


def test_cache_aware_evicts_each_tree_least_recently_inserted_first():
    ca = make_router("cache-aware", 2, BLOCK)
    ca.max_blocks = 40  # blocks a tree keeps
    old, new = SimRequest("old", 0.0, 320, 4), SimRequest("new", 0.0, 320, 4)
    assert ca.route(prompt("old", 320), fleet(0, 1), 0.0) == 0
    assert ca.route(prompt("new", 320), fleet(1, 0), 1.0) == 1
    assert ca.route(prompt("new-again", 320, shared=new), fleet(0, 0), 2.0) == 1  # new's 20 blocks, touched
    assert ca.route(prompt("new-more", 320, shared=new), fleet(0, 0), 3.0) == 1  # tree 1: 60 blocks
    assert ca.route(prompt("old-again", 320, shared=old), fleet(1, 0), 4.0) == 0  # tree 0: 40, at the limit
    ca.route(prompt("filler", 320, shared=old), fleet(0, 1), 200.0)  # after an eviction: tree 1 kept its 40
    assert len(ca.held[1]) == 40 and all(h in ca.held[1] for h in ca.block_hashes(prompt("new", 320)))
    # tree 0, past the limit only now, still answers for old's blocks until the next eviction
    assert ca.route(prompt("old-3", 320, shared=old), fleet(0, 0), 201.0) == 0


def test_prefix_score_weighs_the_cached_prefix_the_queue_and_kv_usage():
    ps = make_router("prefix-score", 3, BLOCK)
    request = prompt("q", 320)
    hashes = ps.block_hashes(request)
    replicas = fleet(0, 0, 0)
    replicas[2].cached = set(hashes)  # holds the whole prompt: 3 more points than the others
    replicas[2].usage = 0.9  # costs 1.8
    assert ps.route(request, replicas, 0.0) == 2
    replicas[2].waiting = 4  # the longest queue: costs 2 more
    assert ps.route(request, replicas, 0.0) in (0, 1)
    replicas[1].usage = 0.5
    assert ps.route(request, replicas, 0.0) == 0


def test_unknown_router_is_refused():
    with pytest.raises(ValueError, match="no such router"):
        make_router("fastest", 2, BLOCK)
    assert set(ROUTERS) == {
        "round-robin",
        "random",
        "power-of-two",
        "consistent-hash",
        "cache-aware",
        "least-outstanding",
        "prefix-score",
    }


def _model():
    return RooflineModel(RooflineParams(load_model_shape("llama-3.1-8b"), accelerator("h200")))


@pytest.mark.parametrize("router", ROUTERS)
def test_a_fleet_run_finishes_every_request_once_and_its_replicas_add_up(router):
    config = EngineConfig(device="cpu", enable_prefix_caching=True, max_num_seqs=32)
    workload = with_arrivals(
        shared_prefix_workload(120, 4, 64, 100, 40, 0.8, 3, 32000), arrival_times(120, 40.0, seed=1)
    )
    run = run_fleet(config, 2000, 4096, _model(), 3, make_router(router, 3, BLOCK, seed=2), workload)
    ids = [r.request_id for rep in run.replicas for r in rep.requests]
    assert sorted(ids) == sorted(r.request_id for r in workload)  # each request on exactly one replica
    assert len(run.choices) == len(workload)
    assert [len(rep.requests) for rep in run.replicas] == list(np.bincount(run.choices, minlength=3))
    for rep in run.replicas:
        assert not np.isnan(np.array(rep.times.finish)).any()
        assert list(rep.times.num_output) == [r.output_len for r in rep.requests]  # every token, finished once
    result = simulate(
        num_prompts=120,
        dataset="shared-prefix",
        num_prefixes=4,
        prefix_len=64,
        input_len=100,
        output_len=40,
        range_ratio=0.8,
        request_rate=40.0,
        seed=3,
        replicas=3,
        router=router,
        enable_prefix_caching=True,
        num_gpu_blocks_override=2000,
        max_model_len=4096,
        max_num_seqs=32,
    )
    fleet_m, parts = result.summary, result.fleet.summaries
    assert fleet_m.num_completed == sum(m.num_completed for m in parts) == 120
    assert fleet_m.num_steps == sum(m.num_steps for m in parts)
    assert fleet_m.prefix_hits == sum(m.prefix_hits for m in parts) > 0
    assert fleet_m.prefix_queries == sum(m.prefix_queries for m in parts)
    outputs = sum(sum(r.times.num_output) for r in result.fleet.runs)
    assert outputs == sum(result.run.times.num_output)
    assert outputs == pytest.approx(fleet_m.output_throughput * fleet_m.duration_s)


def test_a_fleet_of_one_is_the_single_engine():
    config = EngineConfig(device="cpu", enable_prefix_caching=True, max_num_seqs=16)

    def workload():
        return with_arrivals(random_workload(80, 200, 30, 0.9, 4), arrival_times(80, 30.0, seed=4))

    alone = Simulator(config, 500, 4096, _model()).run(workload())
    one = run_fleet(config, 500, 4096, _model(), 1, RoundRobin(1, BLOCK), workload()).replicas[0]
    for name in ("arrival", "first_token", "finish", "num_output", "num_preemptions"):
        assert np.array_equal(np.array(getattr(alone.times, name)), np.array(getattr(one.times, name)), equal_nan=True)
    assert list(alone.timeline.end) == list(one.timeline.end)


def test_a_request_enters_its_engine_only_after_its_front_end_queue():
    # four prompts at once, then one alone a second later, on two round-robin replicas: each replica's
    # front-end takes its burst one at a time (10 ms each), so its engine takes r0 (r1) in at 10 ms and r2 (r3)
    # at 20 ms, after its first step began: without a front-end both enter at 0 and share the first step
    workload = [SimRequest(f"r{k}", 0.0, 32, 8) for k in range(4)] + [SimRequest("late", 1.0, 32, 8)]
    config = EngineConfig(device="cpu", max_num_seqs=16)
    engine = run_fleet(config, 500, 4096, _model(), 2, RoundRobin(2, BLOCK), workload)
    served = run_fleet(config, 500, 4096, _model(), 2, RoundRobin(2, BLOCK), workload, front_end_seconds=0.010)
    for before, after in zip(engine.replicas, served.replicas):
        assert (
            before.timeline.end[0] - before.timeline.seconds[0] == 0.0 and before.timeline.num_prefill_tokens[0] == 64
        )
        first_start = after.timeline.end[0] - after.timeline.seconds[0]
        assert first_start == pytest.approx(0.010) and after.timeline.num_prefill_tokens[0] == 32
        assert list(after.times.arrival) == list(before.times.arrival)  # the client's arrivals
        ids = [r.request_id for r in after.requests]
        first = dict(zip(ids, after.times.first_token))
        one, two = ids[0], ids[1]
        assert first[one] == pytest.approx(after.timeline.end[0])  # sampled at the end of the first step
        assert first[two] > after.timeline.end[0]  # the second's prompt is computed in a later step
    late = served.replicas[0].requests[-1]  # round-robin's fifth: replica 0's, alone at its front-end
    assert late.request_id == "late" and served.replicas[0].times.first_token[-1] == pytest.approx(
        1.010 + served.replicas[0].timeline.seconds[0]
    )  # its lone prompt priced as r0's was


def test_one_engine_takes_a_request_in_after_its_front_end():
    workload = [SimRequest("a", 0.0, 32, 4), SimRequest("b", 0.0, 32, 4)]
    config = EngineConfig(device="cpu", max_num_seqs=16)
    run = Simulator(config, 500, 4096, _model(), front_end_seconds=0.005).run(workload)
    assert run.timeline.end[0] - run.timeline.seconds[0] == pytest.approx(0.005)  # a enters at 5 ms, b at 10
    assert run.timeline.num_prefill_tokens[0] == 32 and list(run.times.arrival) == [0.0, 0.0]


def test_a_streaming_front_end_serves_its_work_in_the_order_it_came():
    # a request, a step's 3 tokens queued at 1 ms (one of them a first token, one an end), a request at 1.5 ms,
    # a step's token at 2 ms, a request at 50 ms: one queue, each piece of work after the one before it
    times = RequestTimes(*(array("d", [0.0] * 2) for _ in range(3)), array("l"), array("l"), array("f"))
    front = FrontEnd(request_s=0.004, token_s=0.001)
    assert front.take(0.0) == pytest.approx(0.004)
    front.stream(0.001, 3, [0], [1], times)
    assert front.take(0.0015) == pytest.approx(0.007 + 0.004)  # behind the request before, then the 3 tokens
    front.stream(0.002, 1, [], [0], times)
    assert times.first_token[0] == pytest.approx(0.007) and times.finish[1] == pytest.approx(0.007)
    assert front.take(0.050) == pytest.approx(0.054)  # the 2 ms step's token went out at 12 ms: idle since
    assert times.finish[0] == pytest.approx(0.012)
    front.stream(0.060, 2, [1], [], times)
    front.flush()
    assert times.first_token[1] == pytest.approx(0.062)
    per_step = FrontEnd(request_s=0.004, token_s=0.001, step_s=0.002)  # a step's outputs taken in: 2 ms more
    assert per_step.take(0.0) == pytest.approx(0.004)
    per_step.stream(0.001, 3, [0], [], times)
    per_step.flush()
    assert times.first_token[0] == pytest.approx(0.004 + 0.002 + 0.003)


def test_a_streaming_front_end_delays_the_next_request_and_the_tokens_of_a_busy_engine():
    # one engine; a request decoding alone, then a second arriving while it streams: the second's way in
    # waits for the first one's tokens, and every token reaches its client after the front-end streamed it
    workload = [SimRequest("a", 0.0, 32, 40), SimRequest("b", 0.1, 32, 4)]
    config = EngineConfig(device="cpu", max_num_seqs=16)
    plain = Simulator(config, 500, 4096, _model(), front_end_seconds=0.002).run(workload)
    same = Simulator(config, 500, 4096, _model(), front_end_seconds=0.002, front_end_token_seconds=0.0).run(workload)
    for name in ("first_token", "finish"):
        assert list(getattr(plain.times, name)) == list(getattr(same.times, name))  # 0 a token: as before
    busy = Simulator(config, 500, 4096, _model(), front_end_seconds=0.002, front_end_token_seconds=0.003).run(workload)
    # a's first token is its first step's end, streamed (3 ms) after the front-end took it in (2 ms, idle since)
    assert busy.times.first_token[0] == pytest.approx(busy.timeline.end[0] + 0.003)
    assert busy.times.first_token[1] > plain.times.first_token[1]
    assert busy.times.finish[0] > plain.times.finish[0]
    assert list(busy.times.arrival) == [0.0, 0.1]
    settings = dict(
        num_prompts=40, input_len=64, output_len=16, request_rate=20.0, seed=5, replicas=2, router="round-robin"
    )
    fleet = simulate(**settings, front_end_ms=2.0)
    streamed = simulate(**settings, front_end_ms=2.0, front_end_us_per_token=500.0)
    assert streamed.summary.ttft.p50 > fleet.summary.ttft.p50 and streamed.summary.e2e.p50 > fleet.summary.e2e.p50
    stepped = simulate(**settings, front_end_ms=2.0, front_end_us_per_step=500.0)
    assert stepped.summary.ttft.p50 > fleet.summary.ttft.p50


def test_a_router_that_asks_every_replica_to_tokenize_waits_for_their_front_ends():
    """vllm-router's cache_aware has each replica tokenize a prompt before routing it: that work lands in every
    replica's front-end queue, and the request reaches its own replica's front-end when all have answered."""
    front = FrontEnd(request_s=0.004, token_s=0.0)
    assert front.work(0.0, 0.006) == pytest.approx(0.006) and front.take(0.001) == pytest.approx(0.010)
    # one request alone, then a second while replica 0's front-end is still busy with the first
    workload = [SimRequest("a", 0.0, 32, 4), SimRequest("b", 0.002, 32, 4)]
    config = EngineConfig(device="cpu", max_num_seqs=16)
    plain = run_fleet(config, 500, 4096, _model(), 2, CacheAware(2, BLOCK), workload, front_end_seconds=0.004)
    asked = run_fleet(
        config, 500, 4096, _model(), 2, CacheAware(2, BLOCK), workload, front_end_seconds=0.004,
        router_tokenize_seconds=0.006,
    )  # fmt: skip
    starts = [r.timeline.end[0] - r.timeline.seconds[0] for r in (*plain.replicas, *asked.replicas)]
    assert starts[:2] == pytest.approx([0.004, 0.006])  # a and b each through their own front-end
    # a: tokenized on both (6 ms), then taken in by replica 0 (4 ms); b: tokenized on replica 0 behind a's
    # intake (10 + 6 ms), then taken in by replica 1 (4 ms)
    assert starts[2:] == pytest.approx([0.010, 0.020])
    rr = run_fleet(
        config, 500, 4096, _model(), 2, RoundRobin(2, BLOCK), workload, front_end_seconds=0.004,
        router_tokenize_seconds=0.006,
    )  # fmt: skip
    assert [r.timeline.end[0] - r.timeline.seconds[0] for r in rr.replicas] == pytest.approx([0.004, 0.006])


def test_a_fleet_simulated_with_a_front_end_reports_its_clients_view():
    settings = dict(
        num_prompts=40, input_len=64, output_len=16, request_rate=2.0, seed=5, replicas=2, router="round-robin"
    )
    engine = simulate(**settings)
    served = simulate(**settings, front_end_ms=7.0)
    # requests 0.5 s apart on average rarely queue at a 7 ms front-end: the TTFT grows by about its 7 ms
    assert served.summary.ttft.p50 == pytest.approx(engine.summary.ttft.p50 + 7.0, abs=1.0)
    assert served.summary.tpot.p50 == pytest.approx(engine.summary.tpot.p50)  # the stream itself is the engine's
    assert served.summary.e2e.p50 == pytest.approx(engine.summary.e2e.p50 + 7.0, abs=1.0)
    for a, b in zip(engine.fleet.runs, served.fleet.runs):  # each engine takes its first request 7 ms later
        assert b.timeline.end[0] - b.timeline.seconds[0] == pytest.approx(
            a.timeline.end[0] - a.timeline.seconds[0] + 0.007
        )


def test_a_step_on_a_shared_host_is_slower_while_the_other_replica_is_busy():
    # two prompts at once on two round-robin replicas, then a third long after both finished: the first two
    # decode side by side, each step 1.5 times its price; the third runs alone, at its price
    workload = [SimRequest("a", 0.0, 32, 8), SimRequest("b", 0.0, 32, 8), SimRequest("c", 5.0, 32, 8)]
    config = EngineConfig(device="cpu", max_num_seqs=16)
    model = _model()
    apart = run_fleet(config, 500, 4096, model, 2, RoundRobin(2, BLOCK), workload)
    shared = run_fleet(config, 500, 4096, model, 2, RoundRobin(2, BLOCK), workload, shared_host_slowdown=0.5)
    for replica in (0, 1):
        one, two = apart.replicas[replica].timeline, shared.replicas[replica].timeline
        together = 8  # each of a and b: its prompt's step and 7 decode steps, both replicas busy throughout
        assert list(two.seconds[:together]) == pytest.approx([1.5 * s for s in one.seconds[:together]])
        assert list(two.seconds[together:]) == pytest.approx(list(one.seconds[together:]))
    assert len(shared.replicas[0].timeline.seconds) == 16  # c came to replica 0, alone
    # the slowdown that reaches the figures: a and b take 1.5 times as long, c as long
    assert shared.replicas[0].times.finish[0] == pytest.approx(1.5 * apart.replicas[0].times.finish[0])
    assert shared.replicas[0].times.finish[1] - 5.0 == pytest.approx(apart.replicas[0].times.finish[1] - 5.0)


def test_a_mixed_fleet_runs_each_replica_on_its_own_hardware():
    # round-robin routes regardless of speed: each replica of an h200 + h100 fleet serves what it serves in
    # a fleet of its own hardware, step for step, with its own KV pool
    settings = dict(num_prompts=60, input_len=256, output_len=32, request_rate=20.0, seed=2, replicas=2)
    mixed = simulate(**settings, router="round-robin", hardware="h200,h100")
    for k, hardware in enumerate(("h200", "h100")):
        alike = simulate(**settings, router="round-robin", hardware=hardware)
        assert list(mixed.fleet.runs[k].timeline.end) == list(alike.fleet.runs[k].timeline.end)
        assert mixed.fleet.num_blocks[k] == alike.fleet.num_blocks[k] == alike.num_blocks
    assert mixed.fleet.num_blocks[0] > mixed.fleet.num_blocks[1]  # 141 GB against 80
    assert mixed.fleet.summaries[1].tpot.p50 > mixed.fleet.summaries[0].tpot.p50
    assert mixed.step_model == "roofline h200; roofline h100"
    assert f"KV pool       per replica {mixed.fleet.num_blocks[0]}, {mixed.fleet.num_blocks[1]} blocks" in "\n".join(
        describe_setup(mixed)
    )
    # least-outstanding sends more to the faster replica, which finishes its requests sooner
    steady = dict(num_prompts=300, input_len=512, output_len=64, request_rate=20.0, seed=2, replicas=2)
    spread = simulate(**steady, router="least-outstanding", hardware="h100*1,h200*1")
    assert [m.num_requests for m in spread.fleet.summaries] == [141, 159]


def test_a_mixed_fleets_recording_holds_each_replicas_own_pool(tmp_path):
    path = tmp_path / "mixed.etrec"
    result = simulate(num_prompts=20, input_len=128, output_len=8, replicas=2, hardware="h200,h100", record=str(path))
    recording = read_recording(str(path))
    assert recording.header.replicas == ["replica", "replica"]
    assert recording.header.engine.device == "simulated roofline h200; roofline h100"
    pools = {}
    for event in recording.events():
        pools.setdefault(event.replica, set()).add(event.num_blocks)
    assert pools == {0: {result.fleet.num_blocks[0]}, 1: {result.fleet.num_blocks[1]}}


def test_a_mixed_fleet_names_a_value_for_every_replica():
    assert per_replica("--hardware", "h200*2,h100", 3) == ["h200", "h200", "h100"]
    assert per_replica("--hardware", "l4", 3) == ["l4"] * 3
    config = EngineConfig(device="cpu")
    with pytest.raises(ValueError, match="a step-time model and a KV pool for each of its 2 replicas"):
        run_fleet(config, [500], 4096, _model(), 2, RoundRobin(2, BLOCK), [SimRequest("a", 0.0, 32, 4)])


def test_the_router_counts_a_request_until_it_finishes():
    from enginetui.simulate.simulator import EngineLoop

    loop = EngineLoop(EngineConfig(device="cpu"), 100, 2048, _model())
    replica = FleetReplica(0, loop)
    loop.add(SimRequest("a", 0.0, 16, 3))
    replica.routed = 1
    assert replica.load() == 1
    while loop.busy():
        loop.step()
    replica.now = loop.finish_times[0] - 1e-9
    assert replica.load() == 1  # it finishes after the router's now
    replica.now = loop.finish_times[0]
    assert replica.load() == 0


def test_a_replica_sweep_names_the_smallest_fleet_meeting_the_slos(tmp_path, capsys):
    plot = tmp_path / "replicas.png"
    assert (
        main(
            [
                "simulate",
                "--num-prompts",
                "60",
                "--random-input-len",
                "512",
                "--random-output-len",
                "32",
                "--request-rate",
                "100",
                "--sweep",
                "replicas=1,2,4",
                "--goodput",
                "ttft:100",
                "--router",
                "least-outstanding",
                "--plot",
                str(plot),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "fleet         behind least-outstanding\nsweep         replicas = 1, 2, 4\n" in out
    # one replica keeps 31.7% of the requests under 100 ms to the first token, two keep them all
    assert "smallest      2 replicas: 100.0% of requests met every SLO (ttft <= 100 ms; 90% needed)\n" in out
    assert plot.stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--replicas", "0"], "--replicas must be at least 1, got 0"),
        (["--replicas", "2", "--front-end-ms", "-1"], "--front-end-ms must be non-negative, got -1"),
        (["--replicas", "2", "--shared-host-slowdown", "-0.1"], "--shared-host-slowdown must be non-negative"),
        (["--shared-host-slowdown", "0.3"], "--shared-host-slowdown: only for a fleet of --replicas N (N > 1)"),
        (["--replicas", "2", "--router-tokenize-ms", "-1"], "--router-tokenize-ms must be non-negative, got -1"),
        (
            ["--replicas", "2", "--router", "round-robin", "--router-tokenize-ms", "5"],
            "--router-tokenize-ms: only for a fleet of --replicas N behind --router cache-aware",
        ),
        (["--router-tokenize-ms", "5"], "--router-tokenize-ms: only for a fleet of --replicas N behind"),
        (["--replicas", "2", "--hardware", "h200*3"], "--hardware 'h200*3' names 3 replicas: the fleet has 2"),
        (["--replicas", "2", "--hardware", "h200*two"], "write one value for every replica, or VALUE*COUNT"),
        (["--hardware", "h200,h100"], "a --hardware or --step-times per replica is for a fleet of --replicas N"),
        (["--replicas", "2", "--hardware", "h200,b200"], "unknown hardware 'b200'"),
        (["--replicas", "2", "--router", "fastest"], "--router 'fastest': no such router"),
        (["--replicas", "2", "--from-recording", "x.etrec"], "leave out --replicas"),
        (["--router", "random"], "one replica has nothing to route"),
        (["--replicas", "0", "--watch"], "--replicas must be at least 1, got 0"),
        (["--replicas", "2", "--router", "fastest", "--watch"], "--router 'fastest': no such router"),
    ],
)
def test_bad_fleet_input_is_one_line(argv, message, capsys):
    assert main(["simulate", "--num-prompts", "3", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


class PlainCacheAware:
    """cache-aware written plainly (one map of each block's latest inserter, kept from the start): what
    routers.CacheAware, which keeps that map only from the first eviction on, must choose alike."""

    def __init__(self, num_replicas, max_blocks):
        self.last, self.held, self.max_blocks = {}, [{} for _ in range(num_replicas)], max_blocks

    def route(self, hashes, num_prompt_tokens, loads):
        lowest, highest = min(loads), max(loads)
        matched = 0
        while matched < len(hashes) and hashes[matched] in self.last:
            matched += 1
        choice = loads.index(lowest)
        if not (highest - lowest > BALANCE_ABS_THRESHOLD and highest > lowest * 1.5):
            if matched and matched * BLOCK / num_prompt_tokens > 0.3:
                choice = self.last[hashes[matched - 1]]
        held = self.held[choice]
        for h in hashes:
            self.last[h] = choice
            held.pop(h, None)
            held[h] = None
        return choice

    def evict(self):
        for k, held in enumerate(self.held):
            for h in list(held)[: max(len(held) - self.max_blocks, 0)]:
                del held[h]
                if self.last.get(h) == k:
                    others = [j for j, other in enumerate(self.held) if h in other]
                    if others:
                        self.last[h] = others[0]
                    else:
                        del self.last[h]


def test_cache_aware_chooses_as_the_plain_algorithm_before_and_after_evictions():
    rng = np.random.default_rng(3)
    ca, plain = make_router("cache-aware", 3, BLOCK), PlainCacheAware(3, 60)
    ca.max_blocks = 60
    bases = [SimRequest(f"base{i}", 0.0, 160, 4) for i in range(4)]
    now, evicted = 0.0, False
    for i in range(300):
        now += float(rng.uniform(0, 3))
        if now >= ca.next_eviction:
            plain.evict()
            evicted = evicted or ca.last is not None
        shared = bases[int(rng.integers(4))] if rng.random() < 0.8 else None
        request = prompt(f"r{i}", int(rng.integers(1, 100)), shared=shared)
        loads = [int(x) for x in rng.integers(0, 3, size=3)] if rng.random() < 0.9 else [0, 70, 5]
        got = ca.route(request, fleet(*loads), now)
        assert got == plain.route(ca.block_hashes(request), request.num_prompt_tokens, loads), i
    assert evicted and [list(h) for h in ca.held] == [list(h) for h in plain.held]
