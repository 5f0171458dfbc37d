"""`enginetui attach --vllm URL`: its flags on the attach subcommand, their checks, what they start."""

import pytest

from enginetui.cli import build_parser, main
from enginetui.vllm_probe.with_vllm import VllmTUI
from enginetui.vllm_watch.cli import check_url, kv_endpoint, vllm_urls
from enginetui.vllm_watch.rebuild_engine import RebuildEngine


def parse(*argv: str):
    return build_parser().parse_args(["attach", *argv])


def test_the_flags_and_their_defaults():
    args = parse("--vllm", "http://10.0.0.5:8000", "--kv-replay", "tcp://10.0.0.5:5558")
    url = "http://10.0.0.5:8000"
    assert vllm_urls(args.url, args.vllm) == [url] and args.kv_events is None and args.tokenizer is None
    assert vllm_urls("http://a:1", parse("http://a:1", "--vllm").vllm) == ["http://a:1"]  # attach URL --vllm
    assert vllm_urls(None, parse("--vllm", "http://a:1", "--vllm", "http://b:2").vllm) == ["http://a:1", "http://b:2"]
    assert kv_endpoint(url, None) == "tcp://10.0.0.5:5557"  # vLLM's default port, on the server's host
    assert kv_endpoint(url, "ipc:///tmp/kv.sock") == "ipc:///tmp/kv.sock"
    assert kv_endpoint(url, "none") is None
    assert not parse("http://10.0.0.5:8000").vllm  # plain attach: an `enginetui serve`


def test_attach_vllm_opens_the_one_dashboard_on_the_rebuild_with_the_flags(monkeypatch):
    opened = []
    monkeypatch.setattr(VllmTUI, "run", lambda self: opened.append(self))
    monkeypatch.setattr("enginetui.terminal_check.has_terminal", lambda: True)  # pytest's stdout is not one
    monkeypatch.delenv("ENGINETUI_API_KEY", raising=False)
    assert (
        main(
            [
                "attach",
                "--vllm",
                "http://127.0.0.1:8000",
                "--kv-events",
                "tcp://127.0.0.1:6000",
                "--kv-replay",
                "tcp://127.0.0.1:6001",
                "--api-key",
                "k",
                "--max-num-seqs",
                "4",
                "--tokenizer",
                "/models/x",
            ]
        )
        == 0
    )
    app = opened[0]
    assert isinstance(app.engine, RebuildEngine) and app.truth is None  # no probe: the rebuild's events, inferred
    assert app.vllm.rebuild_sinks == [app.engine] and app.vllm.limits.max_num_seqs == 4
    assert (app.url, app.vllm.kv_endpoint, app.feed.kv_replay, app.feed.tokenizer) == (
        "http://127.0.0.1:8000",
        "tcp://127.0.0.1:6000",
        "tcp://127.0.0.1:6001",
        "/models/x",
    )
    assert app.client.http.headers["Authorization"] == "Bearer k"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--vllm", "localhost:8000"], "is not a server address: give it as http://HOST:PORT"),
        (["--vllm", "http://h:1", "--kv-events", "h:5557"], "'h:5557' is not a ZMQ endpoint"),
        (["--vllm", "http://h:1", "--kv-replay", "5558"], "'5558' is not a ZMQ endpoint"),
        (["http://h:1", "--kv-events", "tcp://h:5557"], "--kv-events only apply with --vllm"),
        (
            ["--vllm", "http://a:1", "--vllm", "http://b:2", "--kv-events", "ipc:///a"],
            "--kv-events given 1 times for 2",
        ),
        (["--vllm", "http://a:1", "--vllm", "http://b:2", "--proxy-port", "0"], "watch one server: not with a fleet"),
        ([], "give the server's URL"),
    ],
)
def test_bad_flags_are_refused_before_the_screen_opens(capsys, argv, message):
    assert main(["attach", *argv]) == 2
    assert message in capsys.readouterr().err
    assert check_url("http://127.0.0.1:8000") is None


def test_attach_help_names_the_vllm_flags(capsys):
    with pytest.raises(SystemExit):
        main(["attach", "--help"])
    out = capsys.readouterr().out
    assert "--vllm" in out and "--kv-events ENDPOINT" in out and "--kv-replay ENDPOINT" in out
