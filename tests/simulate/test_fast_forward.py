"""The simulator's decode fast-forward gives the same run, step for step, as stepping the scheduler each step."""

import numpy as np
import pytest

from enginetui.core.config import EngineConfig
from enginetui.simulate.arrivals import arrival_times, with_arrivals
from enginetui.simulate.hardware import accelerator
from enginetui.simulate.model_shape import load_model_shape
from enginetui.simulate.roofline import RooflineModel, RooflineParams
from enginetui.simulate.simulator import Simulator
from enginetui.simulate.workload import shared_prefix_workload


@pytest.mark.parametrize("caching", [False, True])
@pytest.mark.parametrize("num_blocks", [100_000, 300])  # 300: the pool runs dry, requests are preempted
def test_fast_forward_changes_nothing(caching, num_blocks):
    model = RooflineModel(RooflineParams(load_model_shape("llama-3.1-8b"), accelerator("h200")))
    config = EngineConfig(device="cpu", enable_prefix_caching=caching, max_num_seqs=64)

    def run(fast_forward):
        workload = with_arrivals(
            shared_prefix_workload(150, 3, 100, 200, 100, 0.9, 1, 32000), arrival_times(150, 20.0, seed=2)
        )
        return Simulator(config, num_blocks, 4096, model, fast_forward=fast_forward).run(workload)

    slow, fast = run(False), run(True)
    for name in ("arrival", "first_token", "finish", "num_output", "num_preemptions"):
        assert np.array_equal(np.array(getattr(slow.times, name)), np.array(getattr(fast.times, name)), equal_nan=True)
    assert sorted(slow.times.itl) == sorted(fast.times.itl)  # the same gaps (appended in another order)
    for name in slow.timeline.__slots__:
        assert list(getattr(slow.timeline, name)) == list(getattr(fast.timeline, name)), name
    assert (slow.prefix_hits, slow.prefix_queries) == (fast.prefix_hits, fast.prefix_queries)
    assert sum(fast.times.num_output) == sum(r.output_len for r in fast.requests)
    if num_blocks == 300:
        assert sum(fast.times.num_preemptions) > 0
    if caching:
        assert fast.prefix_hits > 0


def test_prompt_block_hashes_are_the_engines():
    from enginetui.core.kv.block_hash import update_block_hashes
    from enginetui.simulate.simulator import _engine_request
    from enginetui.simulate.workload import SimRequest

    for length in (5, 16, 100, 1000):
        ours = _engine_request(SimRequest(f"r{length}", 0.0, length, 3), True, 16)
        engine = _engine_request(SimRequest(f"r{length}", 0.0, length, 3), True)
        assert ours.block_hashes == update_block_hashes(engine, 16) and len(ours.block_hashes) == length // 16
