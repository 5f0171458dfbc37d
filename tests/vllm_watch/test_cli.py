"""`enginetui attach --vllm URL`: its flags and their checks."""

import argparse

from enginetui.vllm_watch.cli import add_vllm_args, check_url, kv_endpoint, run_vllm_watch


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    add_vllm_args(parser)
    return parser.parse_args(argv)


def test_the_flags_and_their_defaults():
    args = parse("--vllm", "http://10.0.0.5:8000", "--kv-replay", "tcp://10.0.0.5:5558")
    assert args.vllm and args.url == "http://10.0.0.5:8000" and args.kv_events is None and args.tokenizer is None
    assert kv_endpoint(args.url, args.kv_events) == "tcp://10.0.0.5:5557"  # vLLM's default port, on the server's host
    assert kv_endpoint(args.url, "ipc:///tmp/kv.sock") == "ipc:///tmp/kv.sock"
    assert kv_endpoint(args.url, "none") is None


def test_bad_addresses_are_refused_before_the_screen_opens(capsys):
    assert check_url("http://127.0.0.1:8000") is None
    assert "give it as http://HOST:PORT" in check_url("127.0.0.1:8000")
    assert run_vllm_watch("localhost:8000", parse("--vllm", "x"), None) == 2
    assert "is not a server address" in capsys.readouterr().err
    assert run_vllm_watch("http://h:1", parse("--vllm", "x", "--kv-events", "h:5557"), None) == 2
    assert "is not a ZMQ endpoint" in capsys.readouterr().err
