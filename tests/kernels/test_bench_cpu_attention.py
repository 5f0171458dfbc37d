"""What tools/bench_cpu_attention.py's timings and K/V read rate are made of (kernels/paged_batch.py)."""

import torch

from enginetui.kernels.paged_batch import context_kv_bytes, make_paged_batch, time_ms


def test_context_kv_bytes_counts_the_keys_and_values_of_every_context_token():
    batch = make_paged_batch([1, 1], [20, 45], num_heads=4, num_kv_heads=2, head_size=16, dtype=torch.bfloat16)
    assert context_kv_bytes(batch) == (20 + 45) * 2 * 16 * 2 * 2  # tokens x kv heads x head x (K, V) x bytes


def test_time_ms_calls_every_batch_in_turn_and_reports_one_call():
    batches = [make_paged_batch([1], [8], seed=s) for s in range(3)]
    seen = []
    ticks = iter(range(0, 1000, 6))  # each round of 3 calls takes 6 clock units

    def fn(query, *rest, out):
        seen.append(query.data_ptr())

    ms = time_ms(fn, batches, iters=4, clock=lambda: next(ticks))
    assert ms == 2 * 1e3  # 6 units / 3 calls, in milliseconds
    assert seen == [b.query.data_ptr() for b in batches] * 5  # a warm-up round, then 4 timed rounds
