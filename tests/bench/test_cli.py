"""`enginetui bench ...` parses through the dashboard's command line and reaches each benchmark."""

import pytest

from enginetui.bench import decode_profile, latency, throughput
from enginetui.cli import build_parser
from enginetui.flags.engine import engine_args


def test_bench_throughput_parses_with_engine_flags_and_its_own():
    args = build_parser().parse_args([
        "bench", "throughput", "--model", "facebook/opt-125m", "--load-format", "dummy", "--preset", "mixed",
        "--compare", "hf", "--events", "off", "subscriber", "--repeats", "3", "--enable-prefix-caching",
        "--max-num-seqs", "32", "--json", "out.json",
    ])  # fmt: skip
    assert (args.command, args.bench_command) == ("bench", "throughput")
    assert (args.preset, args.compare, args.events, args.repeats, args.json) == (
        "mixed",
        ["hf"],
        ["off", "subscriber"],
        3,
        "out.json",
    )
    assert (args.competing, args.vllm_cores, args.temperature, args.vllm_python) == (["none"], ["default"], 1.0, None)
    assert args.hf_batch_sizes == [8, 16, 32]
    assert engine_args(args) == {
        "model": "facebook/opt-125m",
        "load_format": "dummy",
        "enable_prefix_caching": True,
        "max_num_seqs": 32,
    }


def test_latency_and_profile_parse_with_their_defaults():
    lat = build_parser().parse_args(["bench", "latency", "--request-rate", "2.5", "--preset", "quick"])
    assert lat.request_rate == 2.5 and lat.preset == "quick" and lat.json is None
    prof = build_parser().parse_args(["bench", "profile", "--model", "x"])
    assert (prof.batch_sizes, prof.steps, prof.warmup_steps, prof.input_len) == ([1, 16, 64], 20, 5, 64)


def test_each_subcommand_dispatches_to_its_module(monkeypatch):
    for name, module in (("throughput", throughput), ("latency", latency), ("profile", decode_profile)):
        monkeypatch.setattr(module, "main", lambda args, name=name: f"ran {name}")
        args = build_parser().parse_args(["bench", name])
        assert args.func(args) == f"ran {name}"


@pytest.mark.parametrize(
    "argv", [["bench"], ["bench", "throughput", "--events", "loud"], ["bench", "profile", "--batch-sizes", "0"]]
)
def test_bad_bench_command_lines_are_argparse_errors(argv):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2


def test_a_user_error_is_one_line_on_stderr_and_exit_code_2(tiny_opt_dir, capsys):
    args = build_parser().parse_args(["bench", "throughput", "--model", tiny_opt_dir, "--min-input-len", "500"])
    assert args.func(args) == 2
    assert capsys.readouterr().err.strip() == (
        "enginetui bench throughput: error: input lengths need 1 <= min <= max, got 500..128"
    )


def test_engine_flags_before_the_subcommand_are_kept():
    args = build_parser().parse_args(["--model", "X", "--seed", "4", "bench", "throughput"])
    assert engine_args(args) == {"model": "X", "seed": 4}
    args = build_parser().parse_args(["bench", "throughput", "--model", "Y"])
    assert engine_args(args) == {"model": "Y"}
