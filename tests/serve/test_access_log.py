"""Which requests the server's access log shows: its clients' at info level, what attached dashboards
poll at debug level, none of the paths `--disable-access-log-for-endpoints` names (vLLM's flag), and
nothing with `--disable-uvicorn-access-log`."""

import logging
import signal
import subprocess
import sys

import httpx
import pytest
from fastapi import FastAPI

from enginetui.core.entrypoints.openai.access_log import AccessLogMiddleware
from tests.serve.serving import ServerProcess, wait_for_line
from tests.support.checkout import REPO_ROOT


def logged_app(excluded: frozenset[str] = frozenset()) -> FastAPI:
    app = FastAPI()
    for path in ("/v1/models", "/health", "/v1/enginetui/process"):
        app.add_api_route(path, lambda: {"ok": True}, methods=["GET"])
    app.add_middleware(AccessLogMiddleware, excluded_paths=excluded)
    return app


async def get_all(app: FastAPI, *paths: str) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        for path in paths:
            assert (await client.get(path)).status_code == 200


async def test_clients_at_info_the_dashboards_polling_at_debug_and_excluded_paths_not_at_all(caplog):
    caplog.set_level(logging.DEBUG, logger="uvicorn.error")
    await get_all(
        logged_app(frozenset({"/health"})), "/v1/models", "/v1/enginetui/process", "/health", "/health?probe=1"
    )
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "uvicorn.error"]
    assert [(level, message.split(" - ")[1].rsplit(" ", 1)[0]) for level, message in lines] == [
        (logging.INFO, '"GET /v1/models HTTP/1.1" 200'),
        (logging.DEBUG, '"GET /v1/enginetui/process HTTP/1.1" 200'),
    ]


@pytest.mark.parametrize("value", ["health", "/health,metrics"])
def test_an_endpoint_that_is_not_a_path_is_refused_before_anything_starts(value):
    r = subprocess.run(
        [sys.executable, "-m", "enginetui", "serve", "--port", "0", "--disable-access-log-for-endpoints", value],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "paths start with '/'" in r.stderr and "starting the engine" not in r.stderr


@pytest.mark.slow
def test_the_server_logs_its_clients_requests_only():
    srv = ServerProcess(
        "--num-gpu-blocks-override",
        "32",
        "--uvicorn-log-level",
        "info",
        "--disable-access-log-for-endpoints",
        "/health,/metrics",
    )
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            for path in ("/health", "/metrics", "/v1/enginetui/process", "/v1/models"):
                assert http.get(path).status_code == 200
        wait_for_line(srv, r'"GET /v1/models HTTP/1\.1" 200 ')  # each request's line is written as it ends
        access = [line for line in srv.lines if '"GET ' in line]
        assert len(access) == 1, "".join(srv.lines)
    finally:
        assert srv.stop(signal.SIGINT) == 0


@pytest.mark.slow
def test_no_access_log_at_all():
    srv = ServerProcess(
        "--num-gpu-blocks-override", "32", "--uvicorn-log-level", "info", "--disable-uvicorn-access-log"
    )
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            assert http.get("/v1/models").status_code == 200
    finally:
        assert srv.stop(signal.SIGINT) == 0
    wait_for_line(srv, r"^enginetui serve: stopped")  # its last line: everything it printed is in
    assert not [line for line in srv.lines if '"GET ' in line], "".join(srv.lines)
