"""What tools/bench_cpu_attention.py's timings and K/V read rate are made of (kernels/paged_batch.py)."""

import time

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


def test_prompts_are_timed_through_the_kernel_and_through_sdpa_on_the_same_keys(monkeypatch, capsys):
    from tools import bench_cpu_attention

    monkeypatch.setattr(bench_cpu_attention, "PROMPT_LENS", (20, 70))
    calls = []
    real = bench_cpu_attention.prompt_attention

    def spy(query, key, value, scale, out):
        real(query, key, value, scale, out)
        calls.append((query.shape, key.shape, scale))

    monkeypatch.setattr(bench_cpu_attention, "prompt_attention", spy)
    bench_cpu_attention.time_prompts(torch.float32, iters=1, clock=time.perf_counter)
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [tuple(row.split()[:2]) for row in rows] == [(h, n) for h in ("opt-125m", "llama-3") for n in ("20", "70")]
    assert all(row.endswith("x") for row in rows)
    assert (torch.Size([70, 32, 128]), torch.Size([70, 8, 128]), 128**-0.5) in calls  # the prompt's own keys
