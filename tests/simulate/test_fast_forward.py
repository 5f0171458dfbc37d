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


def test_prompt_block_hashes_are_equal_exactly_when_the_prefix_is():
    """Two prompts' block hashes agree up to the first block in which their tokens differ, and from there on
    differ (the chain: a block's hash stands for it and everything before it)."""
    from enginetui.simulate.simulator import prompt_block_hashes

    rng = np.random.default_rng(7)
    for length in (5, 16, 100, 1000, 12_000):
        tokens = rng.integers(2, 128_000, size=length).tolist()
        hashes = prompt_block_hashes(tokens, 16)
        assert len(hashes) == length // 16 and len(set(hashes)) == len(hashes)
        assert prompt_block_hashes(list(tokens), 16) == hashes
        for where in {0, length // 2, length - 1}:
            changed = list(tokens)
            changed[where] += 1
            other = prompt_block_hashes(changed, 16)
            first = where // 16
            assert other[:first] == hashes[:first]
            assert all(a != b for a, b in zip(other[first:], hashes[first:]))
    same_blocks = [5] * 64  # equal blocks at different places still differ: each holds what came before
    assert len(set(prompt_block_hashes(same_blocks, 16))) == 4
