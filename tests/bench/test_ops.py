"""`enginetui bench ops`: steps timed and profiled (decode only, or each also computing a new prompt),
each operator's self time summed by kind of work; ours alone, against the stand-in vLLM (the runner's
`ops` command and its pipe), and against the real vLLM when ENGINETUI_VLLM_PYTHON names its
interpreter (skipped otherwise).

No timing assertions: the benchmark measures speed, the tests check what is counted where."""

import pytest

from enginetui.bench import ops
from enginetui.bench.op_kinds import ORDER, OTHER, OUTSIDE, kind_of, ms_per_kind
from enginetui.cli import main
from tests.bench.small_runs import bench_args
from tests.support.models import make_opt_dir
from tests.support.vllm_marks import needs_real_vllm

SMALL = ["--batch-sizes", "1", "3", "--input-len", "12", "--warmup-steps", "1", "--steps", "2", "--repeats", "2"]


@pytest.mark.parametrize(
    "name, kind",
    [
        ("enginetui_cpu::paged_attention", "attention"),
        ("_C::cpu_attention_with_kv_cache", "attention"),
        ("vllm::unified_attention_with_output", "attention"),
        ("enginetui_cpu::reshape_and_cache", "kv write"),  # a write, though the name holds no "attention"
        ("_C::cpu_attn_reshape_and_cache", "kv write"),  # a write, though the name holds "attn"
        ("vllm::unified_kv_cache_update", "kv write"),
        ("mkldnn::_linear_pointwise", "gemm"),
        ("aten::addmm", "gemm"),
        ("aten::mm", "gemm"),
        ("_C::onednn_mm", "gemm"),
        ("_C::fused_gumbel_argmax", "sampling"),
        ("aten::searchsorted", "sampling"),
        ("## Call CompiledFxGraph None ##", "compiled"),
        ("Pregraph bytecode", "compiled"),
        ("aten::native_layer_norm", OTHER),
        ("aten::mul", OTHER),  # not aten::mm
    ],
)
def test_operators_of_both_engines_go_to_their_kind_of_work(name, kind):
    assert kind_of(name) == kind


def test_the_kinds_add_up_to_the_step_and_what_no_operator_covers_is_outside():
    # two steps: 3 ms of attention, 1 ms of GEMM, 0.5 ms of a view per step, in 5 ms steps
    kinds = ms_per_kind(
        {"enginetui_cpu::paged_attention": (6000.0, 24), "aten::addmm": (2000.0, 8), "aten::view": (1000.0, 50)},
        steps=2,
        step_ms=5.0,
    )
    assert list(kinds) == list(ORDER)
    assert (kinds["attention"], kinds["gemm"], kinds[OTHER]) == (3.0, 1.0, 0.5)
    assert kinds[OUTSIDE] == pytest.approx(0.5) and sum(kinds.values()) == pytest.approx(5.0)
    assert ms_per_kind({"aten::addmm": (9000.0, 1)}, steps=1, step_ms=8.0)[OUTSIDE] == 0.0  # never below 0


def test_our_engine_alone_every_batch_size_in_passes(tiny_opt_dir, capsys, allocator_tunings):
    args = bench_args("ops", tiny_opt_dir, *SMALL)
    result = ops.run(args)
    assert [row.batch_size for row in result.rows] == [1, 3]
    for row in result.rows:
        assert [(p.engine, p.repeat) for p in row.passes] == [("ours", 0), ("ours", 1)]
        for p in row.passes:
            assert len(p.step_ms) == 2 and all(ms > 0 for ms in p.step_ms)
            assert p.kind_ms["attention"] > 0 and p.kind_ms["gemm"] > 0 and p.kind_ms["kv write"] > 0
            assert sum(p.kind_ms.values()) == pytest.approx(p.profiled_step_ms)  # one thread: ops within the wall
            costs = [ms for _, ms, _ in p.top_ops]  # the costliest operators, costliest first
            assert len(costs) == ops.TOP_OPS and costs == sorted(costs, reverse=True) and costs[-1] > 0
        assert set(row.median_ms) == {"ours"} and row.median_ms["ours"]["step"] > 0
    assert main(["bench", "ops", "--model", tiny_opt_dir, "--device", "cpu", *SMALL]) == 0
    assert allocator_tunings == [True]  # on CPU the command allocates as the EngineCore child does
    out = capsys.readouterr().out
    assert "3 decoding requests (2 passes each)" in out and "step, unprofiled" in out
    assert "ours costliest operators" in out and out.strip().splitlines()[-1].startswith("ops: step")


def test_steps_that_compute_a_new_prompt_beside_the_batch_or_alone(tiny_opt_dir, capsys, allocator_tunings):
    args = bench_args("ops", tiny_opt_dir, *SMALL, "--batch-sizes", "0", "3", "--prompt-lens", "16", "40")
    result = ops.run(args)
    assert [(row.batch_size, row.prompt_len) for row in result.rows] == [(0, 16), (0, 40), (3, 16), (3, 40)]
    assert [row.shape() for row in result.rows[1:3]] == [
        "a 40-token prompt alone",
        "3 decoding requests and a 16-token prompt",
    ]
    for row in result.rows:  # every measured step computed its prompt (else the pass would have raised)
        for p in row.passes:
            assert p.kind_ms["attention"] > 0 and p.kind_ms["gemm"] > 0 and p.kind_ms["kv write"] > 0
    assert (
        main(
            [
                "bench",
                "ops",
                "--model",
                tiny_opt_dir,
                "--device",
                "cpu",
                *SMALL,
                "--batch-sizes",
                "2",
                "--prompt-lens",
                "20",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2 decoding requests and a 20-token prompt (2 passes each)" in out


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--batch-sizes", "0"], "needs --prompt-lens"),
        (["--batch-sizes", "8", "--prompt-lens", "60", "--max-num-batched-tokens", "64"], "the budget is 64"),
        (["--batch-sizes", "1", "--prompt-lens", "300", "--num-gpu-blocks-override", "8"], "300-token prompt need"),
    ],
)
def test_a_step_shape_the_engine_cannot_run_whole_is_refused(tiny_opt_dir, capsys, flags, message):
    assert main(["bench", "ops", "--model", tiny_opt_dir, "--device", "cpu", "--input-len", "12", *flags]) == 2
    assert message in capsys.readouterr().err


def test_against_vllm_the_engines_take_turns_on_the_same_batch(tiny_opt_dir, fake_vllm):
    result = ops.run(bench_args("ops", tiny_opt_dir, *SMALL, "--compare", "vllm"))
    assert result.vllm_version == "0.0-fake"
    for row in result.rows:
        assert [p.engine for p in row.passes] == ["ours", "vllm", "ours", "vllm"]
        theirs = [p for p in row.passes if p.engine == "vllm"]
        assert all(p.kind_ms["gemm"] > 0 for p in theirs)  # the stand-in's one torch.mm a step
        assert set(row.median_ms) == {"ours", "vllm"}
    assert "(vLLM " in result.summary and "gemm" in result.summary
    with_prompt = ops.run(bench_args("ops", tiny_opt_dir, *SMALL, "--prompt-lens", "8", "--compare", "vllm"))
    assert [p.engine for p in with_prompt.rows[1].passes] == ["ours", "vllm", "ours", "vllm"]  # 4 outputs a step


def test_a_batch_the_pool_cannot_hold_is_refused(tiny_opt_dir, capsys):
    assert (
        main(
            [
                "bench",
                "ops",
                "--model",
                tiny_opt_dir,
                "--device",
                "cpu",
                "--num-gpu-blocks-override",
                "8",
                "--batch-sizes",
                "4",
                "--input-len",
                "100",
            ]
        )
        == 2
    )
    assert "need" in capsys.readouterr().err


@pytest.mark.slow
@needs_real_vllm
def test_real_vllm_operators_are_counted_by_kind(tmp_path):
    model = make_opt_dir(tmp_path / "opt", hidden_size=128, word_embed_proj_dim=128, ffn_dim=256)  # head size 32
    result = ops.run(
        bench_args(
            "ops",
            model,
            "--batch-sizes",
            "2",
            "0",
            "--input-len",
            "20",
            "--prompt-lens",
            "24",
            "--steps",
            "3",
            "--repeats",
            "1",
            "--compare",
            "vllm",
        )
    )
    assert result.vllm_version
    for row in result.rows:  # decode beside a prompt, and the prompt alone
        theirs = next(p for p in row.passes if p.engine == "vllm")
        assert theirs.kind_ms["attention"] > 0 and theirs.kind_ms["gemm"] > 0
        assert theirs.kind_ms["kv write"] > 0 and theirs.kind_ms["sampling"] > 0
