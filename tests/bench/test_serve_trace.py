"""`enginetui bench serve --trace / --dataset`: the requests it sends a live server are the ones `enginetui
simulate` serves for the same flags (prompt token ids, max_tokens, arrivals), on the embedded model."""

import json

import pytest

from enginetui.bench.engines import bench_engine_kwargs, model_vocab_size
from enginetui.bench.serve import run, trace_to_send
from enginetui.bench.serve_load import request_body
from enginetui.cli import build_parser
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.simulate import from_settings
from enginetui.simulate.cli import _settings_and_flags
from enginetui.simulate.model_shape import load_model_shape
from enginetui.simulate.simulator import _engine_request
from tests.bench.small_runs import SMALL_ENGINE

AZURE = (  # the third is longer than the embedded model's 512 positions; the fourth arrives after 5 s
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.0,40,6\n2023-11-16 18:15:47.5,70,9\n2023-11-16 18:15:49.0,600,12\n"
    "2023-11-16 18:15:52.0,30,4\n"
)
MOONCAKE = [  # two prompts sharing their first 512-token block
    {"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [0, 1]},
    {"timestamp": 400, "input_length": 300, "output_length": 7, "hash_ids": [0]},
    {"timestamp": 900, "input_length": 90, "output_length": 3, "hash_ids": [8]},
]


@pytest.fixture
def traces(tmp_path):
    (tmp_path / "azure.csv").write_text(AZURE)
    (tmp_path / "moon.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MOONCAKE))
    return tmp_path


def _sent(flags: list[str]) -> list[tuple[list[int], int, float]]:
    """(prompt, max_tokens, arrival) of each request `bench serve` would send, from its parsed flags."""
    args = build_parser().parse_args(["bench", "serve", *flags])
    kwargs = bench_engine_kwargs(args)
    workload = trace_to_send(args, kwargs, model_vocab_size(kwargs), [])
    return [(request_body("m", r)["prompt"], request_body("m", r)["max_tokens"], r.arrival) for r in workload]


def _simulated(flags: list[str]) -> list[tuple[list[int], int, float]]:
    """The same for the scheduler requests `enginetui simulate` serves (prefix caching on: real token values)."""
    s, _ = _settings_and_flags(build_parser().parse_args(["simulate", "--model", str(DEFAULT_MODEL_DIR), *flags]))
    shape = load_model_shape(str(DEFAULT_MODEL_DIR))
    requests = from_settings.make_workload(s, shape.vocab_size, shape.max_position_embeddings)
    engine = [_engine_request(r, True) for r in requests]
    return [(list(e.prompt_token_ids), e.max_tokens, r.arrival) for r, e in zip(requests, engine)]


@pytest.mark.parametrize(
    "flags",
    [
        ["--trace", "azure.csv", "--trace-window", "0:5"],
        ["--trace", "azure.csv", "--time-scale", "2", "--over-context", "skip"],
        ["--trace", "moon.jsonl"],
    ],
)
def test_bench_serve_sends_the_simulators_requests(traces, flags):
    flags = [str(traces / f) if f.endswith((".csv", ".jsonl")) else f for f in flags]
    sent = _sent(flags)
    assert sent == _simulated(flags)
    assert all(len(prompt) + max_tokens <= 512 and max(prompt) < 4096 for prompt, max_tokens, _ in sent)
    if "--trace-window" in flags:  # 0:5 leaves out the last; the long one is clipped to 512 positions
        assert [(len(p), m, t) for p, m, t in sent] == [(40, 6, 0.0), (70, 9, 1.5), (500, 12, 3.0)]
    if "--time-scale" in flags:  # skip drops the long one; arrivals twice as fast
        assert [(len(p), m, t) for p, m, t in sent] == [(40, 6, 0.0), (70, 9, 0.75), (30, 4, 3.0)]
    if "moon.jsonl" in flags[1]:  # equal leading hash ids: an equal first block
        assert sent[0][0][:300] == sent[1][0] and sent[2][0][:90] != sent[0][0][:90]


def test_a_trace_refuses_the_drawn_workloads_flags(traces):
    with pytest.raises(ValueError, match="leave out --num-prompts --request-rate"):
        _sent(["--trace", str(traces / "azure.csv"), "--num-prompts", "3", "--request-rate", "2"])
    args = build_parser().parse_args(["bench", "serve", "--time-scale", "2"])
    with pytest.raises(ValueError, match="apply to traces"):
        run(args)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--trace", "{other}"], "not a trace this reads"),
        (["--trace", "{azure}", "--trace-window", "500:600"], "no request of"),
        (["--trace", "{azure}", "--router-url", "http://127.0.0.1:9", "--trace-window", "9:3"], "after the start"),
    ],
)
def test_bad_trace_input_is_one_line_before_any_server_starts(traces, flags, message, capsys):
    (traces / "other.csv").write_text("a,b,c\n1,2,3\n")
    flags = [f.format(other=traces / "other.csv", azure=traces / "azure.csv") for f in flags]
    args = build_parser().parse_args(["bench", "serve", *flags])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.slow
def test_bench_serve_sends_a_trace_window_to_the_embedded_models_server(traces, tmp_path, capsys):
    path = tmp_path / "serve.json"
    args = build_parser().parse_args(
        ["bench", "serve", *SMALL_ENGINE, "--trace", str(traces / "azure.csv"), "--trace-window", "0:5"]
        + ["--json", str(path)]
    )
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    assert data["run"]["e2e_ms"]["count"] == data["workload"]["num_prompts"] == 3  # every request of 0:5 completed
    assert data["output_tokens"] == 6 + 9 + 12 and data["prompt_tokens"] == 40 + 70 + 500
    assert data["trace"] == "azure.csv 0:5" and data["run"]["duration_s"] >= 3.0  # the last arrives 3 s in
    out = capsys.readouterr().out
    assert "1 of 3 trace requests are longer than max_model_len 512: clipped" in out
    assert "; flags --" in out and "{" not in out  # the server's engine flags as flags, not a dict
