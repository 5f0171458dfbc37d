"""`enginetui serve` as a user runs it: flags, a model without a chat template, a taken port,
a bad model, and Ctrl-C (SIGINT) / SIGTERM ending the server and its EngineCore."""

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from enginetui.core.entrypoints.openai.chat_template import NO_TEMPLATE
from enginetui.core.record.reader import read_recording
from tests.serve.serving import ServerProcess
from tests.support.checkout import REPO_ROOT


@pytest.mark.slow
def test_model_without_chat_template_a_served_name_and_the_key_from_the_environment(text_opt_dir):
    srv = ServerProcess(
        "--model",
        text_opt_dir,
        "--served-model-name",
        "tiny",
        "--num-gpu-blocks-override",
        "32",
        env={"ENGINETUI_API_KEY": "from-env"},
    )
    try:
        assert httpx.get(f"{srv.url}/v1/models", timeout=60).status_code == 401
        with httpx.Client(base_url=srv.url, headers={"Authorization": "Bearer from-env"}, timeout=60) as http:
            assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["tiny"]
            r = http.post(
                "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
            )
            assert r.status_code == 400 and r.json()["error"]["message"] == NO_TEMPLATE
            r = http.post("/v1/completions", json={"model": "tiny", "prompt": "hello", "max_tokens": 3})
            assert r.status_code == 200 and r.json()["model"] == "tiny"
            assert http.post("/v1/completions", json={"model": "default", "prompt": "x"}).status_code == 404
    finally:
        assert srv.stop(signal.SIGINT) == 0  # Ctrl-C: a clean exit, EngineCore gone (stop() checks)


def test_a_taken_port_fails_at_once():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "enginetui", "serve", "--port", str(port)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "starting the engine" not in r.stderr


def test_a_bad_model_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "enginetui", "serve", "--port", "0", "--model", str(tmp_path / "none")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (
        r.stderr.strip()
        == f"enginetui serve: --model {tmp_path / 'none'}: model path '{tmp_path / 'none'}' does not exist"
    )


@pytest.mark.slow
def test_a_model_that_fails_in_engine_core_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["FalconForCausalLM"], "model_type": "falcon"}')
    r = subprocess.run(
        [sys.executable, "-m", "enginetui", "serve", str(tmp_path), "--port", "0"],  # vLLM's positional
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and "could not start the engine" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_health_is_503_once_the_engine_died_and_requests_get_an_error():
    srv = ServerProcess("--num-gpu-blocks-override", "32")
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            assert http.get("/health").status_code == 200
            engine_core = http.get("/v1/enginetui/info").json()["engine_pid"]
            assert engine_core in srv.children
            os.kill(engine_core, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while http.get("/health").status_code != 503:
                assert time.monotonic() < deadline, "/health still says 200 after EngineCore died"
                time.sleep(0.1)
            r = http.post("/v1/completions", json={"prompt": "The function", "max_tokens": 4})
            assert r.status_code == 500 and "not running" in r.json()["error"]["message"]
    finally:
        assert srv.stop() == 0


@pytest.mark.slow
def test_record_writes_what_the_server_served_and_says_where(text_opt_dir, tmp_path):
    path = tmp_path / "served.etrec"
    srv = ServerProcess("--model", text_opt_dir, "--num-gpu-blocks-override", "32", "--record", str(path))
    try:
        r = httpx.post(
            f"{srv.url}/v1/completions", json={"model": text_opt_dir, "prompt": "hello", "max_tokens": 4}, timeout=60
        )
        assert r.status_code == 200
    finally:
        assert srv.stop() == 0
    rec = read_recording(path)
    assert rec.trailer is not None and rec.header.source.startswith("enginetui serve")
    added = [a for e in rec.events() for a in e.added]
    ends = [end for e in rec.events() for end in e.finished]
    assert len(added) == 1 and len(ends) == 1 and ends[0].req_id == added[0].req_id and ends[0].num_output_tokens == 4
    said = "".join(srv.lines)
    assert f"recording every step event to {path}" in said and f"replay it with: enginetui replay {path}" in said


def test_a_server_reachable_from_other_machines_without_a_key_is_warned_about():
    from enginetui.serve.cli import exposure_warning

    assert exposure_warning("127.0.0.1", 8000, keyed=False, allow_control=False) is None
    assert exposure_warning("::1", 8000, keyed=False, allow_control=True) is None
    assert exposure_warning("0.0.0.0", 8000, keyed=True, allow_control=True) is None
    warning = exposure_warning("0.0.0.0", 8000, keyed=False, allow_control=False)
    assert warning.startswith("listening on 0.0.0.0 without --api-key: anyone who can reach port 8000 of this machine")
    assert "control the engine" not in warning
    assert "and control the engine (--allow-control)" in exposure_warning(
        "192.168.1.5", 9000, keyed=False, allow_control=True
    )
