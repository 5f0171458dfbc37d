"""Bad requests over raw HTTP: each gets an OpenAI-shaped error with the right status, and the
engine goes on serving (every test ends with the engine idle and answering)."""

import httpx
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from tests.serve.serving import API_KEY, engine_idle

GOOD = {"model": "default", "prompt": "The function", "max_tokens": 4}


def error_of(response: httpx.Response, status: int) -> dict:
    """The error body of a response that must have `status`."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == status and body["error"]["message"]
    return body["error"]


@pytest.fixture(autouse=True)
def still_serving(http):
    yield
    assert http.post("/v1/completions", json=GOOD).status_code == 200
    engine_idle(http)


@pytest.mark.parametrize("body", [b'{"prompt": "x", ', b"not json at all", b'{"prompt": "x"} trailing'])
def test_malformed_json_is_422(http, body):
    for route in ("/v1/completions", "/v1/chat/completions", "/tokenize"):
        err = error_of(http.post(route, content=body, headers={"Content-Type": "application/json"}), 422)
        assert err["type"] == "UnprocessableEntityError" and "not valid JSON" in err["message"]


@pytest.mark.parametrize(
    "patch, param",
    [
        ({"temperature": "hot"}, "temperature"),
        ({"max_tokens": [1]}, "max_tokens"),
        ({"prompt": None, "messages": "x"}, None),
        ({"stream": {"yes": 1}}, "stream"),
    ],
)
def test_wrong_types_are_400_naming_the_field(http, patch, param):
    body = {k: v for k, v in {**GOOD, **patch}.items() if v is not None}
    route = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    err = error_of(http.post(route, json=body), 400)
    assert param is None or err["param"] == param


@pytest.mark.parametrize(
    "patch, words",
    [
        ({"temperature": -1}, "temperature must be in [0, 100]"),
        ({"top_p": 0}, "top_p must be in (0, 1]"),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": [999999]}, "outside the vocabulary"),
        ({"stop": [""]}, "stop strings must not be empty"),
        ({"logprobs": 50}, "logprobs must be in [0, 20]"),
        ({"stream_options": {"include_usage": True}}, "Stream options can only be defined when `stream=True`."),
        ({"logit_bias": {"1": 5}}, "logit_bias: not supported"),
    ],
)
def test_invalid_parameters_are_400(http, patch, words):
    err = error_of(http.post("/v1/completions", json={**GOOD, **patch}), 400)
    assert words in err["message"]


def test_streamed_invalid_request_is_400_not_a_stream(http):
    r = http.post("/v1/completions", json={**GOOD, "temperature": -1, "stream": True})
    error_of(r, 400)


def test_prompt_longer_than_max_model_len_is_400_in_vllms_words(http):
    err = error_of(http.post("/v1/completions", json={**GOOD, "prompt": [5] * 600}), 400)
    assert err["message"].startswith(
        "This model's maximum context length is 512 tokens. However, your prompt contains 600 input tokens"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_that_can_never_fit_the_pool_is_400(http, stream):
    # max_model_len (512) allows it, but the whole pool is 24 blocks of 16 = 384 tokens.
    body = {**GOOD, "max_tokens": 450, "ignore_eos": True, "stream": stream}
    err = error_of(http.post("/v1/completions", json=body), 400)
    assert "rejected" in err["message"] and "pool" in err["message"]


def test_unknown_model_is_404(http):
    err = error_of(http.post("/v1/completions", json={**GOOD, "model": "gpt-4"}), 404)
    assert err == {
        "message": f"The model `gpt-4` does not exist. Valid aliases: {DEFAULT_MODEL_DIR}, default.",
        "type": "NotFoundError",
        "param": "model",
        "code": 404,
    }
    error_of(
        http.post("/v1/chat/completions", json={"model": "x", "messages": [{"role": "user", "content": "hi"}]}), 404
    )


def test_unknown_route_is_an_openai_shaped_404(http):
    error_of(http.get("/v1/nothing-here"), 404)


@pytest.mark.parametrize(
    "route, method",
    [
        ("/v1/completions", "POST"),
        ("/v1/chat/completions", "POST"),
        ("/v1/models", "GET"),
        ("/metrics", "GET"),
        ("/tokenize", "POST"),
        ("/detokenize", "POST"),
        ("/v1/enginetui/snapshot", "GET"),
        ("/v1/enginetui/control", "POST"),
    ],
)
@pytest.mark.parametrize("auth", [None, "Bearer wrong-key", f"Basic {API_KEY}", API_KEY])
def test_every_route_needs_the_key(server, route, method, auth):
    headers = {"Authorization": auth} if auth else {}
    r = httpx.request(method, f"{server.url}{route}", json=GOOD, headers=headers, timeout=30)
    err = error_of(r, 401)
    assert err["type"] == "AuthenticationError"


def test_health_needs_no_key(server):
    assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200


def test_event_stream_needs_the_key(server):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    ws_url = server.url.replace("http://", "ws://") + "/v1/enginetui/events"
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url, open_timeout=30)
    assert refused.value.response.status_code == 403
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {API_KEY}"}, open_timeout=30) as ws:
        assert ws.recv(timeout=30)  # the greeting snapshot


def test_chat_errors(http):
    msgs = [{"role": "user", "content": "hi"}]
    assert (
        "messages"
        in error_of(http.post("/v1/chat/completions", json={"model": "default", "messages": []}), 400)["message"]
    )
    err = error_of(http.post("/v1/chat/completions", json={"messages": [{"content": "no role"}]}), 400)
    assert err["param"] == "messages.0.role"
    err = error_of(
        http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        ),
        400,
    )
    assert "only text parts" in err["message"]
    err = error_of(
        http.post("/v1/chat/completions", json={"messages": msgs, "top_logprobs": -3, "logprobs": True}), 400
    )
    assert "top_logprobs" in err["message"]
    err = error_of(http.post("/v1/chat/completions", json={"messages": msgs, "tools": [{"type": "function"}]}), 400)
    assert err["param"] == "tools"
