"""The `enginetui` command line: engine flags with vLLM names, and the bench subcommand hook."""

import argparse
import sys
import types

import pytest

from enginetui import cli


def test_no_flags_means_the_default_model_and_engine_defaults():
    args = cli.build_parser().parse_args([])
    assert args.command is None
    assert cli.engine_args(args) == {"model": None}


def test_engine_flags_use_vllm_names_and_pass_through():
    args = cli.build_parser().parse_args(
        [
            "--model", "/models/opt", "--max-num-batched-tokens", "512", "--max-num-seqs", "16",
            "--block-size", "16", "--num-gpu-blocks-override", "64", "--no-enable-chunked-prefill",
            "--enable-prefix-caching", "--max-model-len", "1024", "--dtype", "float32",
            "--load-format", "dummy", "--seed", "3", "--device", "cpu", "--burst-size", "4",
        ]
    )  # fmt: skip
    assert cli.engine_args(args) == {
        "model": "/models/opt",
        "max_num_batched_tokens": 512,
        "max_num_seqs": 16,
        "block_size": 16,
        "num_gpu_blocks_override": 64,
        "enable_chunked_prefill": False,
        "enable_prefix_caching": True,
        "max_model_len": 1024,
        "dtype": "float32",
        "load_format": "dummy",
        "seed": 3,
        "device": "cpu",
    }
    assert args.burst_size == 4


def test_bad_flag_values_are_argparse_errors(capsys):
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["--load-format", "pickle"])
    assert info.value.code == 2
    assert "invalid choice: 'pickle'" in capsys.readouterr().err


def test_main_opens_the_dashboard_without_a_subcommand(monkeypatch):
    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "run_dashboard", lambda args: seen.append(args) or 0)
    assert cli.main(["--num-gpu-blocks-override", "8"]) == 0
    assert cli.engine_args(seen[0])["num_gpu_blocks_override"] == 8


def test_bench_subcommands_come_from_enginetui_bench(monkeypatch):
    bench = types.ModuleType("enginetui.bench")

    def add_bench_subparsers(subparsers) -> None:
        p = subparsers.add_parser("bench")
        p.add_argument("kind", choices=("throughput", "latency"))
        cli.add_engine_args(p)
        p.set_defaults(func=lambda args: 7 if args.kind == "latency" and args.max_num_seqs == 2 else 1)

    bench.add_bench_subparsers = add_bench_subparsers
    monkeypatch.setitem(sys.modules, "enginetui.bench", bench)
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: object())
    assert cli.main(["bench", "latency", "--max-num-seqs", "2"]) == 7


def test_an_engine_that_cannot_start_is_one_clear_line(monkeypatch, capsys):
    def refuse(kwargs):
        raise RuntimeError(f"EngineCore failed to start: model path {kwargs['model']} does not exist")

    monkeypatch.setattr("enginetui.engine_link.open_engine", refuse)
    assert cli.main(["--model", "/nope"]) == 2
    err = capsys.readouterr().err
    assert "enginetui: could not start the engine: EngineCore failed to start: model path /nope does not exist" in err
    assert "Traceback" not in err


def test_the_engine_is_shut_down_when_the_app_ends(monkeypatch):
    from enginetui.app import EngineTUI
    from tests.dashboard.fake_engine import FakeEngine

    engine = FakeEngine()
    monkeypatch.setattr("enginetui.engine_link.open_engine", lambda kwargs: engine)
    monkeypatch.setattr(EngineTUI, "run", lambda self: None)
    assert cli.main([]) == 0
    assert engine.shutdown_called
