"""POST /tokenize and /detokenize."""

import pytest


def test_tokenize_and_detokenize_round_trip(http):
    r = http.post("/tokenize", json={"prompt": "The function returns", "return_token_strs": True}).json()
    assert r["count"] == len(r["tokens"]) == len(r["token_strs"]) and r["max_model_len"] == 512
    assert r["tokens"][0] == 2  # BOS, as generation adds it
    plain = http.post("/tokenize", json={"prompt": "The function returns", "add_special_tokens": False}).json()
    assert plain["tokens"] == r["tokens"][1:]
    assert http.post("/detokenize", json={"tokens": plain["tokens"]}).json() == {"prompt": "The function returns"}


def test_tokenize_chat_uses_the_chat_template(http):
    messages = [{"role": "user", "content": "What is a class?"}]
    r = http.post("/tokenize", json={"messages": messages}).json()
    text = http.post("/detokenize", json={"tokens": r["tokens"]}).json()["prompt"]
    assert text == "</s>Question: What is a class?\nAnswer:"
    chat = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 2}).json()
    assert chat["usage"]["prompt_tokens"] == r["count"]


@pytest.mark.parametrize(
    "route, body",
    [("/tokenize", {"prompt": 5}), ("/detokenize", {"tokens": "x"}), ("/tokenize", {"prompt": "x", "model": "other"})],
)
def test_tokenize_errors(http, route, body):
    r = http.post(route, json=body)
    assert r.status_code in (400, 404) and r.json()["error"]["code"] == r.status_code
