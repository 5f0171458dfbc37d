"""Real traces as workloads: the three formats, windows, time scale, the context rule, Mooncake's shared
prefixes, the named datasets, and bad input on the command line."""

import json

import pytest

from enginetui.cli import main
from enginetui.simulate import simulate
from enginetui.simulate.traces import (
    TRACES_ENV,
    dataset_path,
    detect_format,
    parse_window,
    read_trace,
    trace_workload,
    traces_dir,
)
from enginetui.simulate.workload import HASH_BLOCK_TOKENS, hash_block_tokens

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:16:47.0,3000,20\n"
)
BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n"
    "47.5,GPT-4,417,276,693,Conversation log\n"
)
MOONCAKE = [
    {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]},
    {"timestamp": 250, "input_length": 1500, "output_length": 7, "hash_ids": [0, 1, 3]},
    {"timestamp": 1250, "input_length": 600, "output_length": 3, "hash_ids": [4, 5]},
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "azure.csv").write_text(AZURE)
    (tmp_path / "burst.csv").write_text(BURSTGPT)
    (tmp_path / "moon.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MOONCAKE))
    (tmp_path / "other.csv").write_text("time,prompt,output\n1,2,3\n")
    return tmp_path


def test_each_format_is_told_by_its_header_and_read_with_arrivals_from_zero(files):
    assert [detect_format(files / f) for f in ("azure.csv", "burst.csv", "moon.jsonl")] == [
        "azure",
        "burstgpt",
        "mooncake",
    ]
    azure = read_trace(files / "azure.csv")
    assert [r.arrival for r in azure.rows] == pytest.approx([0.0, 4.314579, 60.31941])
    assert [(r.prompt_len, r.output_len) for r in azure.rows] == [(374, 44), (396, 109), (3000, 20)]
    burst = read_trace(files / "burst.csv")  # the failed request (no response tokens) is left out, and counted
    assert [(r.arrival, r.prompt_len, r.output_len) for r in burst.rows] == [(0.0, 472, 18), (42.5, 417, 276)]
    assert burst.num_dropped == 1
    moon = read_trace(files / "moon.jsonl")
    assert [r.arrival for r in moon.rows] == [0.0, 0.25, 1.25] and moon.rows[1].hash_ids == (0, 1, 3)
    with pytest.raises(ValueError, match="not a trace this reads"):
        detect_format(files / "other.csv")


def test_window_time_scale_and_the_context_rule(files):
    trace = read_trace(files / "azure.csv")
    reqs, notes = trace_workload(trace, parse_window("4:61"), 2.0, 4096, "clip")
    assert [r.arrival for r in reqs] == pytest.approx([0.1572895, 28.159705])  # from the window's start, 2x as fast
    assert not notes
    reqs, notes = trace_workload(trace, None, 1.0, 2048, "clip")
    assert [(r.prompt_len, r.output_len) for r in reqs][-1] == (2028, 20) and "1 of 3" in notes[0]
    reqs, notes = trace_workload(trace, None, 1.0, 2048, "skip")
    assert len(reqs) == 2 and "skipped" in notes[0]
    assert all(r.prompt_len + r.output_len <= 2048 for r in reqs)
    with pytest.raises(ValueError, match="no request of .* arrives in it"):
        trace_workload(trace, parse_window("100:200"), 1.0, 4096, "clip")
    for bad in ("5", "9:3", "a:b"):
        with pytest.raises(ValueError, match="--trace-window"):
            parse_window(bad)


def test_mooncake_blocks_are_shared_tokens_and_prefix_caching_finds_them(files):
    a, b = hash_block_tokens((0, 1, 2), 1100), hash_block_tokens((0, 1, 3), 1500)
    assert len(a) == 1100 and len(b) == 1500
    assert a[: 2 * HASH_BLOCK_TOKENS] == b[: 2 * HASH_BLOCK_TOKENS]  # equal leading ids: equal tokens
    assert a[2 * HASH_BLOCK_TOKENS] != b[2 * HASH_BLOCK_TOKENS]
    assert hash_block_tokens((4,), 512) != hash_block_tokens((5,), 512)
    result = simulate(
        trace=str(files / "moon.jsonl"), enable_prefix_caching=True, num_gpu_blocks_override=2000, max_model_len=4096
    )
    m = result.summary
    assert m.num_completed == 3
    # the second request finds the first's two shared blocks (1024 tokens); the third shares nothing
    assert (m.prefix_hits, m.prefix_queries) == (1024, 1100 + 1500 + 600)


def test_the_named_traces_resolve_beside_the_checkout_or_through_the_env(monkeypatch, tmp_path):
    monkeypatch.delenv(TRACES_ENV, raising=False)
    assert traces_dir().parts[-2:] == ("shared", "traces")
    monkeypatch.setenv(TRACES_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=f"not found .*set {TRACES_ENV}"):
        dataset_path("mooncake")


@pytest.mark.parametrize("name, fmt, count", [("azure-conv", "azure", 19366), ("mooncake", "mooncake", 12031)])
def test_the_real_traces_read_whole(name, fmt, count):
    try:
        path = dataset_path(name)
    except ValueError as exc:
        pytest.skip(str(exc))
    trace = read_trace(path)
    assert trace.format == fmt and len(trace.rows) == count
    assert trace.rows[0].arrival == 0 and 3400 < trace.rows[-1].arrival < 3600  # one hour
    if fmt == "mooncake":
        assert all(len(r.hash_ids) == -(-r.prompt_len // HASH_BLOCK_TOKENS) for r in trace.rows[:1000])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trace", "{other}"], "not a trace this reads"),
        (["--trace", "{azure}", "--trace-window", "500:600"], "no request of"),
        (["--trace", "{azure}", "--trace-window", "9:3"], "the end must come after the start"),
        (["--trace", "{azure}", "--num-prompts", "5"], "a trace serves every request of its window"),
        (["--trace-window", "0:5"], "apply to traces"),
        (["--trace", "{azure}", "--time-scale", "0"], "--time-scale must be positive"),
    ],
)
def test_bad_trace_input_is_one_line(files, argv, message, capsys):
    argv = [a.format(other=files / "other.csv", azure=files / "azure.csv") for a in argv]
    assert main(["simulate", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_trace_run_says_what_it_served(files, capsys):
    assert main(["simulate", "--trace", str(files / "burst.csv"), "--no-progress", "--enable-prefix-caching"]) == 0
    out = capsys.readouterr().out
    assert "model         llama-3.1-8b, bf16 weights, on h200\n" in out
    assert f"workload      trace {files / 'burst.csv'}: 2 requests arriving as traced\n" in out
    assert "requests      2 completed of 2" in out and "prefix cache  0.0% hit rate" in out
    assert "note          1 rows of" in out
