"""The command line answers at once and refuses what it cannot run before any engine starts: --help
and --version import no torch, a bad flag value or a model that is not there is one line naming its
flag, flags are never abbreviated, `serve MODEL` is vLLM's positional model, and the dashboards
need a terminal."""

import argparse
import subprocess
import sys

import pytest

from enginetui import cli
from enginetui.flags.engine import (
    DASHBOARD_NUM_BLOCKS,
    DASHBOARD_POOL_RULE,
    byte_count,
    dashboard_engine_args,
    dashboard_pool_rule,
    engine_args,
    flag_problem,
)
from tests.support.checkout import REPO_ROOT, checkout_env, installed_env

HEAVY = (
    "torch",
    "transformers",
    "textual",
    "fastapi",
    "enginetui.core.engine.engine_host",
    "enginetui.core.engine.async_llm",
)
PROBE = """
import sys
from enginetui import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("EXIT", code, "LOADED", ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def run_cli(*argv: str, tmp_path=None) -> tuple[int, str, list[str]]:
    """`enginetui ARGV` in a fresh interpreter (no Hugging Face cache, offline): its exit code, its
    stderr without the probe's line, and which heavy modules it imported."""
    env = checkout_env(HF_HUB_OFFLINE="1", **({"HF_HOME": str(tmp_path)} if tmp_path else {}))
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    *lines, probe = done.stderr.strip().splitlines()
    _, code, _, loaded = (probe.split(" ") + [""])[:4]
    return int(code), "\n".join(lines), [m for m in loaded.split(",") if m]


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["serve", "--help"], ["bench", "throughput", "--help"]])
def test_help_and_version_import_no_torch_nor_textual(argv):
    code, _, loaded = run_cli(*argv)
    assert code == 0 and loaded == []


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["serve", "--max-num-seqs", "0"], "--max-num-seqs"),
        (["serve", "--block-size", "3"], "--block-size"),
        (["serve", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
        (["--long-prefill-token-threshold", "600", "--max-model-len", "512"], "--long-prefill-token-threshold"),
        (["bench", "throughput", "--kv-cache-memory-bytes", "0"], "--kv-cache-memory-bytes"),
    ],
)
def test_a_bad_flag_value_fails_with_its_flag_before_any_engine_starts(argv, flag):
    code, err, loaded = run_cli(*argv)
    assert code == 2 and f"enginetui: error: argument {flag}: " in err
    assert loaded == []  # no engine host, no torch: nothing was started


def test_a_bad_vllm_cpu_kvcache_space_is_named(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "lots")
    assert flag_problem(cli.build_parser().parse_args(["serve"])) == (
        "VLLM_CPU_KVCACHE_SPACE must be a whole number of GiB, got 'lots'"
    )


def test_a_missing_model_path_fails_before_any_engine_starts(tmp_path):
    code, err, loaded = run_cli("serve", "--model", "/does/not/exist")
    assert code == 2 and err == "enginetui serve: --model /does/not/exist: model path '/does/not/exist' does not exist"
    assert loaded == []


def test_a_hub_id_that_is_not_cached_suggests_dummy_weights(tmp_path):
    code, err, loaded = run_cli("serve", "facebook/opt-125m", tmp_path=tmp_path)
    assert code == 2 and loaded == [] and len(err.splitlines()) == 1
    assert err.startswith(
        "enginetui serve: --model facebook/opt-125m: model 'facebook/opt-125m' is not a local "
        "directory, not in the Hugging Face cache"
    )
    assert "add --load-format dummy" in err
    code, err, _ = run_cli("serve", "--model", "does/not-exist", tmp_path=tmp_path)
    assert code == 2 and "--load-format dummy runs random weights" in err and "facebook/opt-125m" in err


def test_flags_are_never_abbreviated(capsys):
    def parsers(parser: argparse.ArgumentParser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from parsers(sub)

    every = list(parsers(cli.build_parser()))
    assert len(every) > 8 and all(not p.allow_abbrev for p in every)
    for argv in (
        ["--num-gpu-blocks", "48"],
        ["serve", "--num-gpu-blocks=48"],
        ["bench", "throughput", "--num-prompt", "4"],
    ):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert (
        "unrecognized argument --num-gpu-blocks (flags are never abbreviated; did you mean "
        "--num-gpu-blocks-override?)" in err
    )


def test_serve_takes_the_model_as_vllm_does():
    parser = cli.build_parser()
    assert engine_args(parser.parse_args(["serve", "facebook/opt-125m"]))["model"] == "facebook/opt-125m"
    assert engine_args(parser.parse_args(["serve", "--model", "facebook/opt-125m"]))["model"] == "facebook/opt-125m"
    assert engine_args(parser.parse_args(["serve"]))["model"] is None
    assert flag_problem(parser.parse_args(["serve", "a/b", "--model", "a/b"])) is None
    assert "differ" in flag_problem(parser.parse_args(["serve", "a/b", "--model", "c/d"]))


def test_the_dashboards_small_pool_gives_way_to_a_memory_setting(monkeypatch):
    parser = cli.build_parser()
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    assert dashboard_engine_args(parser.parse_args([]))["num_gpu_blocks_override"] == DASHBOARD_NUM_BLOCKS
    given = dashboard_engine_args(parser.parse_args(["--kv-cache-memory-bytes", "64M"]))
    assert given["kv_cache_memory_bytes"] == 64_000_000 and "num_gpu_blocks_override" not in given
    given = dashboard_engine_args(parser.parse_args(["--gpu-memory-utilization", "0.5"]))
    assert given["gpu_memory_utilization"] == 0.5 and "num_gpu_blocks_override" not in given
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    assert "num_gpu_blocks_override" not in dashboard_engine_args(parser.parse_args([]))


def test_the_model_panel_says_the_dashboard_sized_the_pool_only_when_it_did(monkeypatch):
    parser = cli.build_parser()
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    assert dashboard_pool_rule(parser.parse_args([])) == DASHBOARD_POOL_RULE
    for given in (["--num-gpu-blocks-override", "512"], ["--kv-cache-memory-bytes", "64M"]):
        assert dashboard_pool_rule(parser.parse_args(given)) is None  # the engine's own rule is true


def test_byte_counts_read_like_vllms():
    assert byte_count("2147483648") == 2**31
    assert byte_count("512M") == 512_000_000 and byte_count("2G") == 2_000_000_000
    assert byte_count("2GiB") == byte_count("2Gi") == 2 * 1024**3 and byte_count("1.5k") == 1500
    with pytest.raises(argparse.ArgumentTypeError, match="must be a number of bytes"):
        byte_count("lots")


@pytest.mark.parametrize("argv", [["--model", "/nowhere"], ["attach", "http://127.0.0.1:9"]])
def test_the_dashboards_refuse_to_draw_into_a_pipe(argv, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "enginetui", *argv],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=checkout_env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and done.stdout == ""  # no escape codes
    (line,) = done.stderr.strip().splitlines()
    assert "needs a terminal" in line and "`enginetui serve`" in line and "Python API" in line
    statement = line.split("Python API (`")[1].split("`)")[0]  # works as the installed package, outside the checkout
    imported = subprocess.run([sys.executable, "-c", statement], cwd=tmp_path, env=installed_env(), timeout=120)
    assert imported.returncode == 0


def test_the_help_names_the_memory_flags_and_vllms_variable(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--gpu-memory-utilization FRACTION" in out and "--kv-cache-memory-bytes BYTES" in out
    assert "$VLLM_CPU_KVCACHE_SPACE=GIB" in out and "positional arguments: MODEL" in out


def test_a_max_model_len_beyond_the_models_positions_fails_before_any_engine_starts():
    code, err, loaded = run_cli("serve", "--max-model-len", "1024")  # the embedded model has 512 positions
    assert code == 2 and loaded == []
    assert err == "enginetui serve: --max-model-len 1024: max_model_len 1024 exceeds the model's 512 positions"


@pytest.mark.parametrize("argv", [["--burst-size", "0"], ["attach", "http://127.0.0.1:9", "--burst-size", "-2"]])
def test_the_burst_size_must_be_positive(capsys, argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2 and "argument --burst-size: must be at least 1" in capsys.readouterr().err


def test_a_replay_or_simulation_without_a_terminal_names_what_needs_none(tmp_path, capsys):
    rec = tmp_path / "sim.etrec"  # pytest's stdin is not a terminal
    assert (
        cli.main(["simulate", "--num-prompts", "3", "--random-input-len", "32", "--record", str(rec), "--no-progress"])
        == 0
    )
    capsys.readouterr()
    assert cli.main(["replay", str(rec)]) == 2
    assert capsys.readouterr().err.endswith(
        "without a screen, `enginetui export FILE` writes the recording as a Perfetto trace (ui.perfetto.dev)\n"
    )
    assert cli.main(["simulate", "--num-prompts", "3", "--watch"]) == 2
    assert capsys.readouterr().err.endswith(
        "without a screen, leave out --watch: the run's figures are printed when it ends\n"
    )
