"""`enginetui bench roofline`: a step's bytes and FLOPs against hand counts, the floor and the fraction
of it reached, prompt chunks clipped to what one step can compute, and the command on the embedded
model with the smallest settings writing every field. No timing assertions."""

import argparse
import json

import pytest

from enginetui.bench.roofline import Limits, ModelShape, floor_ms, fraction, step_cost, step_kinds
from enginetui.cli import main

# two layers of 4 heads of 8 channels (2 KV heads), float32: K and V of a token are 2 x 2 x 2 x 8 x 4 bytes
TINY = ModelShape(
    layer_weights=1000,
    lm_head_weights=500,
    attention=((4, 8, None), (4, 8, None)),
    dtype_bytes=4,
    kv_bytes_per_token=256,
)


def test_a_decode_step_reads_the_weights_once_and_each_requests_keys():
    cost = step_cost(TINY, batch_size=3, context=10, prompt_len=0)
    assert cost.weight_bytes == 1500 * 4
    assert cost.kv_read_bytes == 3 * 11 * 256  # each request's 10 cached keys and its own
    assert cost.kv_written_bytes == 3 * 256
    assert cost.gemm_flops == 2 * (1000 * 3 + 500 * 3)  # every row needs its logits
    assert cost.attention_flops == 2 * 4 * 4 * 8 * 3 * 11  # layers x 4 x heads x head size x (query, key) pairs
    assert cost.bytes == 6000 + 8448 + 768 and cost.flops == 9000 + 8448


def test_a_prompt_chunk_computes_every_row_but_one_logit_and_causal_pairs():
    cost = step_cost(TINY, batch_size=0, context=0, prompt_len=5)
    assert cost.gemm_flops == 2 * (1000 * 5 + 500 * 1)
    assert cost.attention_flops == 2 * 4 * 4 * 8 * (1 + 2 + 3 + 4 + 5)
    assert (cost.kv_read_bytes, cost.kv_written_bytes) == (5 * 256, 5 * 256)
    windowed = ModelShape(1000, 500, ((4, 8, 4),), 4, 128)  # a query sees at most 4 keys, itself included
    assert step_cost(windowed, 0, 0, 5).attention_flops == 4 * 4 * 8 * (1 + 2 + 3 + 4 + 4)
    assert step_cost(windowed, 2, 10, 0).attention_flops == 4 * 4 * 8 * 2 * 4


def test_the_floor_is_the_slower_limit_and_the_fraction_is_floor_over_measured():
    limits = Limits(2, 10.0, [10.0], 64.0, 100.0, [100.0], 64, "float32", "test", {})
    cost = step_cost(TINY, 3, 10, 0)
    memory_ms, compute_ms = cost.bytes / 10e9 * 1e3, cost.flops / 100e9 * 1e3
    assert floor_ms(cost, limits) == (pytest.approx(max(memory_ms, compute_ms)), "memory")
    slow_gemm = Limits(2, 10.0, [10.0], 64.0, 0.001, [0.001], 64, "float32", "test", {})
    assert floor_ms(cost, slow_gemm) == (pytest.approx(cost.flops / 1e6 * 1e3), "compute")
    assert fraction(2.0, 8.0) == 0.25


def test_prompt_chunks_are_clipped_to_what_one_step_computes_and_say_so():
    args = argparse.Namespace(batch_sizes=[1, 8], contexts=[128], prompt_lens=[64, 512, 2048])
    kinds, notes = step_kinds(args, max_model_len=512, budget=4096)
    assert kinds == [(1, 128, 0), (8, 128, 0), (0, 0, 64), (0, 0, 511)]  # 512 and 2048 both clipped to 511
    assert notes == [
        "prefill 512 clipped to 511 tokens (max_model_len 512)",
        "prefill 2048 clipped to 511 tokens (max_model_len 512)",
    ]
    assert step_kinds(args, 4096, 256)[1][-1] == "prefill 2048 clipped to 256 tokens (the step budget 256)"


def test_the_command_on_the_embedded_model_writes_every_field(tmp_path, capsys, allocator_tunings):
    path = tmp_path / "roofline.json"
    flags = ["--batch-sizes", "2", "--contexts", "8", "600", "--prompt-lens", "16", "--warmup-steps", "1"]
    flags += ["--steps", "2", "--repeats", "1", "--array-mib", "1", "--gemm-size", "32", "--limit-repeats", "2"]
    argv = ["bench", "roofline", "--device", "cpu", *flags, "--json", str(path), "--save-result"]
    assert main([*argv, "--result-dir", str(tmp_path / "results")]) == 0
    data = json.loads(path.read_text())
    out = capsys.readouterr().out
    assert (
        out.strip().splitlines()[-1] == data["summary"] and "of roofline" in out and "limits: memory bandwidth" in out
    )
    [saved] = (tmp_path / "results").iterdir()
    assert "roofline" in saved.name and json.loads(saved.read_text())["summary"] == data["summary"]
    # the embedded OPT: 4 layers of hidden 128, FFN 512, 4 heads; a tied 4096-token embedding
    assert data["shape"] == {
        "layer_weights": 4 * (4 * 128 * 128 + 2 * 128 * 512),
        "lm_head_weights": 4096 * 128,
        "attention": [[4, 32, None]] * 4,
        "dtype_bytes": 4,
        "kv_bytes_per_token": 4 * 2 * 128 * 4,
    }
    limits = data["limits"]
    assert (
        limits["bandwidth_gb_s"] == max(limits["bandwidth_runs_gb_s"]) > 0 and len(limits["bandwidth_runs_gb_s"]) == 2
    )
    assert limits["gemm_gflop_s"] == max(limits["gemm_runs_gflop_s"]) > 0 and limits["gemm_dtype"] == "float32"
    assert limits["threads"] >= 1 and set(limits["cpu_flags"]) == {"avx2", "avx512f", "avx512_bf16", "amx"}
    decode, prefill = data["rows"]
    assert (decode["kind"], decode["batch_size"], decode["context"], decode["prompt_len"]) == ("decode 2 @ 8", 2, 9, 0)
    assert (prefill["kind"], prefill["batch_size"], prefill["prompt_len"]) == ("prefill 16", 0, 16)
    for row in data["rows"]:
        step_ms = row["ops"]["median_ms"]["ours"]["step"]
        assert row["fraction"]["ours"] == pytest.approx(row["floor_ms"] / step_ms)
        assert row["bound"] in ("memory", "compute") and row["cost"]["bytes"] > 0 and row["cost"]["flops"] > 0
        assert row["ops"]["median_ms"]["ours"]["gemm"] > 0  # the breakdown bench ops gives
    figures = data["figures"]
    assert figures["kind"] == "roofline" and [s["kind"] for s in figures["steps"]] == ["decode 2 @ 8", "prefill 16"]
    [note] = data["notes"]  # the embedded model's max_model_len is 512
    assert note.startswith("decode 2 @ 600 left out: ") and "lower --contexts" in note
    assert data["provenance"]["benchmark"] == "roofline"


def test_step_kinds_none_of_which_fits_are_refused_in_one_line(capsys):
    argv = ["bench", "roofline", "--device", "cpu", "--batch-sizes", "1", "--contexts", "600", "--prompt-lens"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("enginetui bench roofline: error: no step kind fits this engine: decode 1 @ 600 left out")
    assert err.count("\n") == 1


@pytest.mark.slow
def test_against_vllm_both_engines_reach_a_fraction_of_the_same_floor(tmp_path, fake_vllm, capsys):
    flags = ["--batch-sizes", "1", "--contexts", "8", "--prompt-lens", "--warmup-steps", "1", "--steps", "2"]
    flags += ["--repeats", "1", "--array-mib", "1", "--gemm-size", "32", "--limit-repeats", "1"]
    path = tmp_path / "roofline.json"
    assert main(["bench", "roofline", "--device", "cpu", *flags, "--compare", "vllm", "--json", str(path)]) == 0
    [row] = json.loads(path.read_text())["rows"]
    assert set(row["fraction"]) == {"ours", "vllm"}
    assert row["fraction"]["vllm"] == pytest.approx(row["floor_ms"] / row["ops"]["median_ms"]["vllm"]["step"])
    assert "(vLLM " in capsys.readouterr().out.strip().splitlines()[-1]
