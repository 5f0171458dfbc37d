"""Linear weights prepacked for oneDNN after loading: same layers, same results, dense weight kept."""

import pytest
import torch
import torch.nn.functional as F
from transformers import OPTConfig

from enginetui.core.models.layers.linear import linear_relu
from enginetui.core.models.opt import OPTForCausalLM
from enginetui.core.worker import cpu_linear
from enginetui.core.worker.cpu_linear import (
    CACHE_HOLDS,
    DENSE_MARGIN,
    EVICT_CACHE_FACTOR,
    LINEAR_BACKEND_ENV,
    MAX_MIN_ROWS,
    MEASURE_ROUNDS,
    SKINNY_MARGIN,
    SKINNY_ROUNDS,
    TIMED_RUNS,
    GemmClock,
    PackedWeight,
    largest_cache_bytes,
    linear_backend,
    measure_min_rows,
    packable,
    prepack_linear_weights,
)
from enginetui.kernels import cpu_kernels


def small_opt(**overrides) -> OPTForCausalLM:
    cfg = dict(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        ffn_dim=64,
        max_position_embeddings=64,
        word_embed_proj_dim=32,
    )
    torch.manual_seed(0)
    model = OPTForCausalLM(OPTConfig(**{**cfg, **overrides}))
    for p in model.parameters():
        p.data.normal_(0, 0.1)
    return model


def test_every_linear_weight_and_the_tied_head_are_packed_under_their_names():
    model = small_opt()
    names = [n for n, _ in model.named_parameters()]
    dense = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert prepack_linear_weights(model) == 2 * 4 + 1  # qkv, out, fc1, fc2 per layer + the tied embedding
    params = dict(model.named_parameters())
    assert list(params) == names
    packed = {n for n, p in params.items() if isinstance(p, PackedWeight)}
    assert all(n.endswith("weight") for n in packed) and any("embed_tokens" in n for n in packed)
    assert all(torch.equal(params[n], dense[n]) for n in names)  # the dense data is untouched
    assert all(isinstance(params[n], torch.nn.Parameter) for n in packed)


@pytest.mark.parametrize("min_rows", [1, MAX_MIN_ROWS])
@pytest.mark.parametrize("rows", [1, 2, 3, 64])
def test_packed_linear_equals_dense_linear(rows, min_rows):
    weight = torch.randn(48, 32)
    bias = torch.randn(48)
    model = torch.nn.Linear(32, 48)
    model.weight.data, model.bias.data = weight.clone(), bias.clone()
    prepack_linear_weights(model, min_rows)
    x = torch.randn(rows, 32)
    out = F.linear(x, model.weight, model.bias)  # [rows, 48]
    assert type(out) is torch.Tensor
    torch.testing.assert_close(out, F.linear(x, weight, bias), rtol=1e-5, atol=1e-5)  # summation order only


@pytest.mark.parametrize("rows", [1, MAX_MIN_ROWS, 64])
def test_linear_relu_runs_relu_as_onednns_post_op_with_the_same_result(rows, monkeypatch):
    weight, bias, x = torch.randn(48, 32), torch.randn(48), torch.randn(rows, 32)
    model = torch.nn.Linear(32, 48)
    model.weight.data, model.bias.data = weight.clone(), bias.clone()
    prepack_linear_weights(model, MAX_MIN_ROWS)
    calls = []
    pointwise = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a[3]) or pointwise(*a))
    out = linear_relu(x, model.weight, model.bias)  # [rows, 48]
    assert calls == (["relu"] if rows >= MAX_MIN_ROWS else [])  # fused where the packed weight runs it
    assert type(out) is torch.Tensor and out.min() >= 0
    torch.testing.assert_close(out, torch.relu(F.linear(x, weight, bias)), rtol=1e-5, atol=1e-5)


def test_the_smallest_packed_batch_is_measured_on_this_cpu_for_each_shape_of_weight(monkeypatch):
    """The dense GEMM or oneDNN's for a row or two, whichever this CPU runs faster: measured once per
    shape of weight (a layer's and the lm_head's differ: on a Zen 5 EPYC the two GEMMs are even at
    one row for a layer, where MKL's lm_head is 4x slower than oneDNN's)."""
    model = small_opt()
    prepack_linear_weights(model)
    chosen = {p._min_rows for p in model.parameters() if isinstance(p, PackedWeight)}
    assert chosen <= {1, 2, MAX_MIN_ROWS}
    weight = next(p for p in model.parameters() if isinstance(p, PackedWeight))
    for packed_wins_from, expected in ((1, 1), (2, 2), (99, MAX_MIN_ROWS)):  # clocks that make each CPU's case
        clock = lambda w, rows, path, k=packed_wins_from: 1.0 if (path == "packed") == (rows >= k) else 3.0  # noqa: E731
        assert measure_min_rows(weight, clock) == expected

    timed = []

    monkeypatch.setattr(cpu_linear, "measure_skinny_batches", lambda weight, clock: frozenset())  # tested below

    def clock(w, rows, path):  # the vocab-sized head packs from one row, the layers from two
        timed.append(tuple(w.shape))
        wins_from = 1 if w.shape[0] == 128 else 2
        return 1.0 if (path == "packed") == (rows >= wins_from) else 3.0

    model = small_opt()
    prepack_linear_weights(model, time_gemm=clock)
    rows = {name: p._min_rows for name, p in model.named_parameters() if isinstance(p, PackedWeight)}
    assert {n: r for n, r in rows.items() if "embed_tokens" in n} == {"model.decoder.embed_tokens.weight": 1}
    assert {r for n, r in rows.items() if "embed_tokens" not in n} == {2}
    assert set(timed) == {(96, 32), (32, 32), (64, 32), (32, 64), (128, 32)}  # qkv, out, fc1, fc2, the head
    # each shape once: the head at one row, the layers at one and two; each GEMM read in MEASURE_ROUNDS turns
    assert len(timed) == 2 * MEASURE_ROUNDS * (1 + 4 * 2)


def test_a_slow_spell_over_one_reading_does_not_decide():
    """Packed and dense are read in turns, the fastest of each kept: one slow reading of the packed GEMM
    (another process, the machine's memory busy) leaves the choice to the other readings."""
    model = small_opt()
    prepack_linear_weights(model, MAX_MIN_ROWS)
    weight = next(p for p in model.parameters() if isinstance(p, PackedWeight))
    readings = []

    def clock(w, rows, path):  # packed wins from one row, but its first reading ran in a slow spell
        readings.append(path)
        return 9.0 if path == "packed" and len(readings) == 1 else (1.0 if path == "packed" else 3.0)

    assert measure_min_rows(weight, clock) == 1
    assert readings == ["packed", "dense"] * MEASURE_ROUNDS  # in turns


def test_the_dense_gemm_must_win_by_a_margin():
    """A near tie on the clock goes to oneDNN's packed GEMM; a clear win keeps the dense one."""
    model = small_opt()
    prepack_linear_weights(model, MAX_MIN_ROWS)
    weight = next(p for p in model.parameters() if isinstance(p, PackedWeight))
    for dense_speedup, expected in ((DENSE_MARGIN * 0.9, 1), (DENSE_MARGIN * 1.1, MAX_MIN_ROWS)):
        clock = lambda w, rows, path, s=dense_speedup: s if path == "packed" else 1.0  # noqa: E731
        assert measure_min_rows(weight, clock) == expected, dense_speedup


def test_the_clock_times_each_gemm_with_the_caches_emptied_first(monkeypatch):
    """A decode step reads each weight from memory: a weight that fits the caches must not be timed
    from them (on a Zen 5 EPYC that made the choice random, and MKL's dense GEMM from memory 2-4x slower)."""
    model = torch.nn.Linear(32, 48)
    prepack_linear_weights(model, MAX_MIN_ROWS)
    clock, reads = GemmClock(largest_cache_bytes()), []
    empty = clock._empty_caches
    monkeypatch.setattr(clock, "_empty_caches", lambda: reads.append(1) or empty())
    assert clock(model.weight, 1, "packed") > 0 and clock(model.weight, 2, "dense") > 0
    assert len(reads) == 2 * TIMED_RUNS  # before every timed run, not before the untimed one
    assert clock._evict.numel() * 4 == EVICT_CACHE_FACTOR * largest_cache_bytes()
    cached = GemmClock(None)  # a model whose weights fit the largest cache is timed from it
    monkeypatch.setattr(cached, "_empty_caches", lambda: reads.append(1))
    assert cached(model.weight, 1, "packed") > 0 and len(reads) == 2 * TIMED_RUNS


def test_weights_are_timed_from_memory_unless_they_fit_a_share_of_the_largest_cache(monkeypatch):
    """A last-level cache shared with other cores holds less than its size: the weights are timed from it only
    when they take at most CACHE_HOLDS of it."""
    clocks = []
    monkeypatch.setattr(cpu_linear, "measure_min_rows", lambda weight, clock: clocks.append(clock) or 1)
    model = small_opt()  # a few KB of weights
    prepack_linear_weights(model)
    assert clocks and clocks[0].cache_bytes is None
    weight_bytes = sum(p.nbytes for p in model.parameters() if isinstance(p, PackedWeight))
    fits = int(weight_bytes / CACHE_HOLDS)
    for cache_bytes, from_memory in ((fits + 64, False), (fits - 64, True), (1024, True)):
        monkeypatch.setattr(cpu_linear, "largest_cache_bytes", lambda c=cache_bytes: c)
        prepack_linear_weights(small_opt())
        assert clocks[-1].cache_bytes == (cache_bytes if from_memory else None), cache_bytes


def test_the_largest_cache_is_read_from_sysfs(tmp_path, monkeypatch):
    for index, size in enumerate(["48K", "1024K", "32768K", "garbage"]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    monkeypatch.setattr(cpu_linear, "CACHE_SIZE_FILES", str(tmp_path / "index*" / "size"))
    assert largest_cache_bytes() == 32 << 20
    monkeypatch.setattr(cpu_linear, "CACHE_SIZE_FILES", str(tmp_path / "nothing" / "size"))
    assert largest_cache_bytes() == cpu_linear.DEFAULT_CACHE_BYTES


def test_the_model_computes_the_same_logits_and_embeddings():
    """The lm_head and the embedding lookup on the tied weight (the full forward: the greedy parity tests)."""
    model = small_opt()
    ids = torch.tensor([3, 7, 11, 5])
    emb_before = F.embedding(ids, model.get_input_embeddings().weight.detach().clone())
    hidden = torch.randn(4, 32)
    logits_before = model.compute_logits(hidden)
    prepack_linear_weights(model)
    assert torch.equal(model.get_input_embeddings()(ids), emb_before)  # the lookup reads the dense weight
    torch.testing.assert_close(model.compute_logits(hidden), logits_before, rtol=1e-5, atol=1e-5)


def test_backend_choice(monkeypatch):
    monkeypatch.delenv(LINEAR_BACKEND_ENV, raising=False)
    expected = "onednn" if torch.backends.mkldnn.is_available() else "torch"
    assert linear_backend(torch.device("cpu")) == expected
    assert linear_backend(torch.device("cuda")) == "torch"
    monkeypatch.setenv(LINEAR_BACKEND_ENV, "torch")
    assert linear_backend(torch.device("cpu")) == "torch"
    monkeypatch.setenv(LINEAR_BACKEND_ENV, "mkl")
    with pytest.raises(ValueError, match=LINEAR_BACKEND_ENV):
        linear_backend(torch.device("cpu"))


def test_only_natively_computed_dtypes_are_packed():
    assert packable(torch.float32) and not packable(torch.float64)
    assert packable(torch.bfloat16) == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


TOL = dict(rtol=1e-4, atol=1e-4)  # float32 sums of 768 products in another order
needs_kernels = pytest.mark.skipif(not cpu_kernels.available(), reason="the C++ CPU kernels cannot be built here")


@needs_kernels
@pytest.mark.parametrize("rows", range(1, 9))
# lanes, tails of N and K, both tails of bf16's unrolled runs, a layer's K
@pytest.mark.parametrize("shape", [(48, 32), (37, 19), (51, 300), (1000, 768)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_skinny_kernel_equals_dense_linear(rows, shape, dtype):
    """float32 as F.linear up to the order of its sums; bfloat16 as F.linear summed in float32, rounded once."""
    n, k = shape
    weight, bias, x = (t.to(dtype) for t in (torch.randn(n, k), torch.randn(n), torch.randn(rows, k)))

    def expected(x, b, relu=False):
        out = F.linear(x.float(), weight.float(), None if b is None else b.float())
        return (torch.relu(out) if relu else out).to(dtype)

    tol = TOL if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)  # one bf16 rounding
    for b in (bias, None):
        torch.testing.assert_close(cpu_kernels.skinny_linear_cpu(x, weight, b), expected(x, b), **tol)
    torch.testing.assert_close(cpu_kernels.skinny_linear_cpu(x, weight, bias, True), expected(x, bias, True), **tol)
    wide = torch.randn(rows, k + 5).to(dtype)[:, 2 : k + 2]  # rows of a larger tensor: a row stride other than k
    torch.testing.assert_close(cpu_kernels.skinny_linear_cpu(wide, weight, bias), expected(wide, bias), **tol)


@needs_kernels
def test_the_skinny_kernel_refuses_what_it_does_not_compute():
    weight = torch.randn(16, 8)
    for x, message in (
        (torch.randn(9, 8), "1 to 8 rows"),
        (torch.randn(2, 7), "features"),
        (torch.randn(2, 8, dtype=torch.float64), "float32 or bfloat16"),
    ):
        with pytest.raises(RuntimeError, match=message):
            cpu_kernels.skinny_linear_cpu(x, weight, None)


@needs_kernels
def test_the_skinny_kernel_runs_at_the_batch_sizes_measured_faster_and_equals_dense_linear(monkeypatch):
    """Measured per shape at 1, 2, 4 and 8 rows, each reading deciding for the sizes above the one before; a model
    whose GEMMs the kernel never wins does not use it; other batch sizes take the other GEMMs."""
    model = small_opt()
    prepack_linear_weights(model, MAX_MIN_ROWS)
    weight = next(p for p in model.parameters() if isinstance(p, PackedWeight))
    for wins_at, expected in (((1, 2, 4, 8), range(1, 9)), ((1, 8), (1, 5, 6, 7, 8)), ((4,), (3, 4)), ((), ())):
        timed = []

        def clock(w, rows, path, wins_at=wins_at, timed=timed):
            timed.append(rows)
            return (1.0 if rows in wins_at else 3.0) if path == "skinny" else 2.0

        assert cpu_linear.measure_skinny_batches(weight, clock) == frozenset(expected)
        assert set(timed) == {1, 2, 4, 8}
    assert (
        cpu_linear.measure_skinny_batches(weight.to(torch.float64).as_subclass(PackedWeight), lambda *a: 0.0) == set()
    )

    monkeypatch.setattr(cpu_linear, "measure_skinny_batches", lambda weight, clock: frozenset({1, 3, 4}))
    model = small_opt()
    reference = {n: p.detach().clone() for n, p in model.named_parameters()}
    prepack_linear_weights(model)
    calls = []
    skinny = cpu_kernels.skinny_linear_cpu
    monkeypatch.setattr(cpu_kernels, "skinny_linear_cpu", lambda *a: calls.append(a[0].shape[0]) or skinny(*a))
    fc1 = model.model.decoder.layers[0].fc1
    for rows in (1, 2, 4, 5):
        x = torch.randn(rows, 32)
        torch.testing.assert_close(
            linear_relu(x, fc1.weight, fc1.bias),
            torch.relu(F.linear(x, reference["model.decoder.layers.0.fc1.weight"], fc1.bias)),
        )
    assert calls == [1, 4]


@needs_kernels
def test_the_skinny_kernel_must_win_by_a_margin_in_most_rounds():
    """A tie with oneDNN's GEMM goes to it at every start, one with MKL's dense GEMM to the kernel; the majority of
    rounds decides, so one slow reading of either does not; two rounds that agree end the reading."""
    model = small_opt()
    prepack_linear_weights(model, 1)  # the other GEMM is the packed one at every batch size
    weight = next(p for p in model.parameters() if isinstance(p, PackedWeight))
    for speedup, expected in ((SKINNY_MARGIN * 0.99, ()), (SKINNY_MARGIN * 1.01, range(1, 9))):
        clock = lambda w, rows, path, s=speedup: 1.0 if path == "skinny" else s  # noqa: E731
        assert cpu_linear.measure_skinny_batches(weight, clock) == frozenset(expected), speedup

    with_dense = small_opt()
    prepack_linear_weights(with_dense, MAX_MIN_ROWS)  # the other GEMM is MKL's dense one at 1 and 2 rows
    dense_first = next(p for p in with_dense.parameters() if isinstance(p, PackedWeight))
    for dense_speedup, expected in ((DENSE_MARGIN * 1.01, range(3, 9)), (DENSE_MARGIN * 0.99, range(1, 9))):
        clock = lambda w, rows, path, s=dense_speedup: {"skinny": 1.0, "dense": 1 / s, "packed": 2.0}[path]  # noqa: E731
        assert cpu_linear.measure_skinny_batches(dense_first, clock) == frozenset(expected), dense_speedup

    readings: list[tuple[int, str]] = []

    def clock(w, rows, path):  # the kernel 2x faster, but at 8 rows its first reading ran in a slow spell
        readings.append((rows, path))
        slow = rows == 8 and readings.count((8, "skinny")) == 1 and path == "skinny"
        return 9.0 if slow else (1.0 if path == "skinny" else 2.0)

    assert cpu_linear.measure_skinny_batches(weight, clock) == frozenset(range(1, 9))
    rounds = {rows: readings.count((rows, "skinny")) for rows in (1, 2, 4, 8)}
    assert rounds == {1: 2, 2: 2, 4: 2, 8: SKINNY_ROUNDS}
    assert readings[:4] == [(1, "skinny"), (1, "packed")] * 2  # in turns


def test_the_engine_keeps_its_measured_choices_for_the_next_start(tmp_path, monkeypatch, caplog):
    """prepare_cpu_model's prepack (keep=True) saves what it measured; the next start on the same machine, code,
    torch and thread count reads it and measures nothing; an unreadable file is measured again and rewritten."""
    monkeypatch.setattr(cpu_kernels, "cache_dir", lambda: tmp_path)
    timed = []
    monkeypatch.setattr(cpu_linear, "measure_min_rows", lambda weight, clock: timed.append(weight.shape) or 2)
    monkeypatch.setattr(cpu_linear, "measure_skinny_batches", lambda weight, clock: frozenset({1}))

    def start() -> set:
        model = small_opt()
        prepack_linear_weights(model, keep=True)
        return {(p._min_rows, p._skinny_batches) for p in model.parameters() if isinstance(p, PackedWeight)}

    assert start() == {(2, frozenset({1}))} and len(timed) == 5  # qkv, out_proj, fc1, fc2, the head
    [saved] = tmp_path.glob("linear-choices-*.json")
    assert start() == {(2, frozenset({1}))} and len(timed) == 5  # read, not measured

    prepack_linear_weights(small_opt())  # without keep: measured, nothing read or written
    assert len(timed) == 10 and list(tmp_path.glob("linear-choices-*.json")) == [saved]

    saved.write_text("{not json")
    assert start() == {(2, frozenset({1}))} and len(timed) == 15
    assert "measuring them again" in caplog.text
    assert cpu_linear.read_choices(saved) == {key: (2, frozenset({1})) for key in cpu_linear.read_choices(saved)}

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)  # another thread count times differently: its own file
        start()
        assert len(timed) == 20 and len(list(tmp_path.glob("linear-choices-*.json"))) == 2
    finally:
        torch.set_num_threads(threads)


def test_a_folder_that_cannot_be_written_costs_only_the_saving(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(cpu_kernels, "cache_dir", lambda: blocker / "kernels")  # under a file: mkdir fails
    monkeypatch.setattr(cpu_linear, "measure_min_rows", lambda weight, clock: 1)
    monkeypatch.setattr(cpu_linear, "measure_skinny_batches", lambda weight, clock: frozenset())
    assert prepack_linear_weights(small_opt(), keep=True) == 2 * 4 + 1
    assert "could not save the GEMM choices" in caplog.text
