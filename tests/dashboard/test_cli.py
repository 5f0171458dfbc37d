"""The `enginetui` command line: engine flags with vLLM names, and the bench subcommand hook."""

import argparse
import os
import re
import subprocess
import sys
import types

import pytest

from enginetui import cli
from enginetui.flags import engine as engine_flags
from enginetui.flags.dashboard import DEFAULT_MAX_CPU_PCT
from enginetui.flags.engine import dashboard_engine_args, engine_args


def test_no_flags_means_the_default_model_and_engine_defaults():
    args = cli.build_parser().parse_args([])
    assert args.command is None
    assert engine_args(args) == {"model": None}


def test_engine_flags_use_vllm_names_and_pass_through():
    args = cli.build_parser().parse_args(
        [
            "--model", "/models/opt", "--tokenizer", "/models/tok", "--max-num-batched-tokens", "512", "--max-num-seqs", "16",
            "--block-size", "16", "--num-gpu-blocks-override", "64", "--no-enable-chunked-prefill",
            "--enable-prefix-caching", "--max-model-len", "1024", "--dtype", "float32",
            "--load-format", "dummy", "--seed", "3", "--device", "cpu", "--burst-size", "4",
        ]
    )  # fmt: skip
    assert engine_args(args) == {
        "model": "/models/opt",
        "tokenizer": "/models/tok",
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


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--step-interval-ms", "-5"),
        ("--step-interval-ms", "10001"),
        ("--step-interval-ms", "fast"),
        ("--redraw-hz", "0"),
        ("--redraw-hz", "61"),
        ("--redraw-hz", "smooth"),
        ("--max-cpu", "-1"),
        ("--max-cpu", "101"),
        ("--max-cpu", "lots"),
    ],
)
def test_bad_dashboard_flag_values_are_argparse_errors(capsys, flag, value):
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args([flag, value])
    assert info.value.code == 2
    assert f"{flag}: must be" in capsys.readouterr().err


def test_main_opens_the_dashboard_without_a_subcommand(monkeypatch):
    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "run_dashboard", lambda args: seen.append(args) or 0)
    assert cli.main(["--num-gpu-blocks-override", "8"]) == 0
    assert engine_args(seen[0])["num_gpu_blocks_override"] == 8


def test_a_subcommand_is_one_line_in_the_table(monkeypatch):
    extra = types.ModuleType("enginetui_test_extra")

    def add_extra_subparsers(subparsers) -> None:
        p = subparsers.add_parser("extra")
        p.add_argument("kind", choices=("throughput", "latency"))
        engine_flags.add_engine_args(p, subcommand=True)
        p.set_defaults(func=lambda args: 7 if args.kind == "latency" and args.max_num_seqs == 2 else 1)

    extra.add_extra_subparsers = add_extra_subparsers
    monkeypatch.setitem(sys.modules, "enginetui_test_extra", extra)
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, ("enginetui_test_extra", "add_extra_subparsers")))
    assert cli.main(["extra", "latency", "--max-num-seqs", "2"]) == 7
    with pytest.raises(SystemExit) as info:  # its engine flags are checked by the engine's validator too
        cli.main(["extra", "latency", "--max-num-seqs", "0"])
    assert info.value.code == 2


def test_the_dashboard_defaults_to_a_512_block_pool_but_bench_keeps_the_engine_default():
    parser = cli.build_parser()
    assert dashboard_engine_args(parser.parse_args([]))["num_gpu_blocks_override"] == 512
    given = parser.parse_args(["--num-gpu-blocks-override", "48"])
    assert dashboard_engine_args(given)["num_gpu_blocks_override"] == 48
    assert "num_gpu_blocks_override" not in engine_args(parser.parse_args([]))  # what bench uses


def help_text(capsys, argv=("--help",)) -> str:
    """What `enginetui ARGV` prints before it exits, with argparse's line wrapping undone."""
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(list(argv))
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_help_documents_the_pool_default_the_tokenizer_and_the_log_file(capsys):
    out = help_text(capsys)
    assert (
        "--num-gpu-blocks-override N KV pool size in blocks (default: 512 in the dashboard, so pages are visible"
    ) in out
    assert "--tokenizer DIR" in out
    assert "$XDG_CACHE_HOME/enginetui/engine-PID.log" in out and "--log-file PATH" in out
    assert "the last 20 of these logs are kept, older ones are deleted" in out


def test_help_shows_each_engine_flags_default_from_the_engine_config(capsys):
    from enginetui.core.config import EngineConfig

    out = help_text(capsys)
    config = EngineConfig()
    for flag, shown in (
        ("--max-num-batched-tokens N", f"token budget of one step (default: {config.max_num_batched_tokens})"),
        ("--max-num-seqs N", f"most requests running at once (default: {config.max_num_seqs})"),
        ("--block-size N", f"tokens per KV block (default: {config.block_size})"),
        ("--enable-chunked-prefill, --no-enable-chunked-prefill", "split long prompts over steps (default: on)"),
        ("--enable-prefix-caching, --no-enable-prefix-caching", "reuse KV of shared prefixes (default: off)"),
        ("--max-model-len N", "longest prompt + output in tokens (default: the model's max positions)"),
        ("--load-format {auto,dummy}", "dummy: random weights, no download (default: auto)"),
        ("--scheduling-policy {fcfs,priority}", "fcfs or priority (lower priority value runs first) (default: fcfs)"),
        (
            "--long-prefill-token-threshold N",
            "cap on one request's prefill tokens per step while others run "
            f"(0: no cap) (default: {config.long_prefill_token_threshold})",
        ),
        ("--scheduler-reserve-full-isl, --no-scheduler-reserve-full-isl", "admit a waiting request only if"),
        ("--model MODEL", "HF model directory or hub id (default: the embedded default model)"),
        ("--device DEVICE", "cpu, cuda, or auto (cuda when available) (default: auto)"),
    ):
        assert f"{flag} {shown}" in out
    assert all(f"{spec.flag}" in out for spec in engine_flags.ENGINE_FLAGS)
    # bench keeps the engine's own pool default
    bench = help_text(capsys, ["bench", "throughput", "--help"])
    assert "--num-gpu-blocks-override N KV pool size in blocks (default: sized from the KV memory)" in bench


def test_version(capsys):
    out = help_text(capsys, ["--version"])
    assert re.fullmatch(r"enginetui \d+\.\d+\.\d+\S* \(python 3\.\d+\.\d+, torch \S+, textual \S+\)", out)


def test_python_dash_m_enginetui_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "enginetui", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("enginetui ")


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """XDG_CACHE_HOME in a temporary folder (where the engine log goes), and a terminal to draw on
    (pytest's stdin and stdout are not one)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr("enginetui.terminal_check.has_terminal", lambda: True)
    return tmp_path


def test_an_engine_that_cannot_start_is_one_clear_line(monkeypatch, capsys, cache_home):
    def refuse(kwargs, log_file=None):
        raise RuntimeError("EngineCore failed to start: out of memory")

    monkeypatch.setattr("enginetui.dashboard.engine_link.open_engine", refuse)
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "enginetui: could not start the engine: EngineCore failed to start: out of memory" in err
    assert "Traceback" not in err


def test_a_model_path_that_is_not_there_fails_before_the_engine_starts(monkeypatch, capsys, cache_home):
    monkeypatch.setattr(
        "enginetui.dashboard.engine_link.open_engine", lambda *a, **k: pytest.fail("the engine was started")
    )
    assert cli.main(["--model", "/nope"]) == 2
    assert capsys.readouterr().err.strip() == "enginetui: --model /nope: model path '/nope' does not exist"


def test_a_model_without_a_tokenizer_points_at_the_tokenizer_flag(monkeypatch, capsys, cache_home):
    from enginetui.core.models.loader import ModelLoadError

    def no_tokenizer(kwargs, log_file=None):
        raise ModelLoadError(f"no tokenizer for {kwargs['model']!r}: it is not available locally; pass ...")

    monkeypatch.setattr("enginetui.dashboard.engine_link.open_engine", no_tokenizer)
    assert cli.main(["--model", "facebook/opt-125m", "--load-format", "dummy"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "enginetui: could not start the engine: no tokenizer found for 'facebook/opt-125m' (not available "
        "locally, or the model has none): pass --tokenizer DIR with a tokenizer directory"
    )


def test_a_bad_tokenizer_path_is_named_as_the_tokenizer_flag(monkeypatch, capsys, cache_home):
    monkeypatch.setattr(
        "enginetui.dashboard.engine_link.open_engine", lambda *a, **k: pytest.fail("the engine was started")
    )
    assert cli.main(["--tokenizer", "/nope-tok"]) == 2
    assert capsys.readouterr().err.strip() == "enginetui: --tokenizer /nope-tok: model path '/nope-tok' does not exist"


def test_the_engine_is_shut_down_when_the_app_ends(monkeypatch, cache_home):
    from enginetui.dashboard.app import EngineTUI
    from tests.fakes.scripted_engine import ScriptedEngine

    engines, opened, seen = [], [], {}

    def open_engine(kwargs, log_file=None):
        opened.append(kwargs)
        seen.update(log_file=log_file)
        engines.append(ScriptedEngine(autostep=False))
        return engines[-1]

    def run(app):
        seen["app_log_file"] = app.log_file
        seen["interval"] = app._initial_interval_ms
        seen["random_weights"] = app.random_weights
        seen["redraw_hz"] = app._redraw_hz
        seen["max_cpu_share"] = app.pacer.max_cpu_share
        app.engine = app._reopen()  # as `r` does after the engine died

    monkeypatch.setattr("enginetui.dashboard.engine_link.open_engine", open_engine)
    monkeypatch.setattr(EngineTUI, "run", run)
    assert cli.main(["--step-interval-ms", "300", "--redraw-hz", "4", "--max-cpu", "25"]) == 0
    assert seen["interval"] == 300 and not seen["random_weights"] and seen["redraw_hz"] == 4
    assert seen["max_cpu_share"] == 0.25
    assert opened == [{"model": None, "num_gpu_blocks_override": 512}] * 2  # the restart's settings are the same
    assert len(engines) == 2 and all(e.shutdown_called for e in engines)  # the restarted one too
    assert cli.main(["--load-format", "dummy", "--model", "facebook/opt-125m"]) == 0
    assert seen["random_weights"] and seen["max_cpu_share"] == DEFAULT_MAX_CPU_PCT / 100
    assert seen["log_file"] == seen["app_log_file"] == str(cache_home / "enginetui" / f"engine-{os.getpid()}.log")
