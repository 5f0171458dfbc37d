"""The watcher's HTTP calls to a vLLM server (VllmClient): a kept-alive connection that the server closed just as
it was reused (uvicorn closes idle ones after a few seconds) is tried again, not reported as a lost server."""

import httpx
import pytest

from enginetui.vllm_watch.server import ServerError, VllmClient

METRICS = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 1.0\n'


def client_on(handler) -> VllmClient:
    client = VllmClient("http://127.0.0.1:1", None)
    client.http = httpx.AsyncClient(base_url=client.url, transport=httpx.MockTransport(handler))
    return client


async def test_a_connection_closed_as_it_was_reused_is_tried_again():
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        if len(calls) % 2:  # every first try of a call: the server closed the connection
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        if request.url.path == "/server_info":
            config = {"scheduler_config": {"max_num_seqs": 8, "max_num_batched_tokens": 512}}
            return httpx.Response(200, json={"vllm_config": config})
        return httpx.Response(200, text=METRICS)

    client = client_on(handler)
    sample = await client.metrics()
    assert sample.total("vllm:num_requests_running") == 1.0
    assert await client.scheduler_limits() == (8, 512)
    assert calls[-1] == "http://127.0.0.1:1/server_info?config_format=json" and len(calls) == 4


async def test_a_server_that_keeps_closing_is_one_clear_error():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    with pytest.raises(ServerError, match="cannot reach http://127.0.0.1:1: Server disconnected"):
        await client_on(handler).metrics()


async def test_a_server_out_of_dev_mode_has_no_limits_to_give():
    client = client_on(lambda request: httpx.Response(404, json={"detail": "Not Found"}))
    assert await client.scheduler_limits() is None
