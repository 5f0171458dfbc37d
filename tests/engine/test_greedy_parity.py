"""Greedy tokens equal transformers.generate on the same random weights."""

import pytest

from tests.support.models import make_opt_dir
from tests.support.parity import engine_greedy, hf_greedy, mixed_prompts


@pytest.fixture(scope="module")
def tiny_reference(tiny_opt_dir):
    prompts = mixed_prompts(8, 512, 1, 90)
    return prompts, hf_greedy(tiny_opt_dir, prompts, 24)


def test_tiny_opt_matches_transformers(tiny_opt_dir, tiny_reference):
    prompts, expected = tiny_reference
    got, events = engine_greedy(tiny_opt_dir, prompts, 24)
    assert got == expected
    assert all(e.num_blocks == e.num_free_blocks + sum(len(r.block_ids) for r in e.running) for e in events)


def test_mlp_in_row_slices_matches_transformers(tiny_opt_dir, tiny_reference, monkeypatch):
    """OPT's MLP (relu fused into fc1 on CPU) a slice of 8 rows at a time from 16 rows on."""
    from enginetui.core.models.layers import row_chunks

    monkeypatch.setattr(row_chunks, "CHUNK_ROWS", 8)
    monkeypatch.setattr(row_chunks, "MIN_ROWS", 16)
    prompts, expected = tiny_reference
    assert engine_greedy(tiny_opt_dir, prompts, 24)[0] == expected


def test_chunked_prefill_matches_transformers(tiny_opt_dir, tiny_reference):
    prompts, expected = tiny_reference
    got, events = engine_greedy(tiny_opt_dir, prompts, 24, max_num_batched_tokens=32)
    assert got == expected
    assert max(e.num_scheduled_tokens for e in events) <= 32
    # Some prompt was split over several steps.
    assert any(0 < r.num_computed_tokens < r.num_prompt_tokens for e in events for r in e.running)


def test_preemption_matches_transformers(tiny_opt_dir, tiny_reference):
    prompts, expected = tiny_reference
    got, events = engine_greedy(tiny_opt_dir, prompts, 24, num_gpu_blocks_override=12, block_size=16)
    assert got == expected
    assert sum(len(e.preempted) for e in events) > 0
    assert events[-1].num_free_blocks == 12


def test_post_layernorm_projected_opt_matches_transformers(tmp_path):
    # opt-350m's shape: post-LN, word_embed_proj_dim != hidden_size (project_in / project_out).
    d = make_opt_dir(tmp_path, seed=3, do_layer_norm_before=False, word_embed_proj_dim=32)
    prompts = mixed_prompts(4, 512, 3, 40, seed=1)
    got, _ = engine_greedy(d, prompts, 12)
    assert got == hf_greedy(d, prompts, 12)


@pytest.mark.slow
def test_opt125m_architecture_matches_transformers(opt125m_dir):
    prompts = mixed_prompts(4, 50272, 5, 60, seed=2)
    expected = hf_greedy(opt125m_dir, prompts, 8)
    got, _ = engine_greedy(opt125m_dir, prompts, 8, num_gpu_blocks_override=64)
    assert got == expected
    got_chunked, events = engine_greedy(opt125m_dir, prompts, 8, num_gpu_blocks_override=6, max_num_batched_tokens=16)
    assert got_chunked == expected
    assert sum(len(e.preempted) for e in events) > 0
