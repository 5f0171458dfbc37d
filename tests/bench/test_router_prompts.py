"""`bench serve --router-url`: prompts go to the router as text, one single-token word per token id, so the
servers behind it compute on the workload's lengths and a router that routes by text sees what prompts share."""

import pytest
from transformers import AutoTokenizer

from enginetui.bench.router_prompts import prompt_text, single_token_words
from enginetui.bench.serve_load import request_body
from enginetui.cli import build_parser
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.simulate.workload import SimRequest


@pytest.fixture(scope="module")
def embedded():
    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    return tokenizer, single_token_words(tokenizer)


def test_each_token_id_is_one_word_the_tokenizer_reads_back_as_one_token(embedded):
    tokenizer, words = embedded
    word_ids = [tokenizer.encode(w, add_special_tokens=False)[0] for w in words]
    shared = list(range(100, 160))
    a, b = shared + [7, 8, 9] * 20, shared + [3000, 11] * 5
    ids_a, ids_b = (tokenizer.encode(prompt_text(p, words), add_special_tokens=False) for p in (a, b))
    assert ids_a == [word_ids[t % len(words)] for t in a] and len(ids_b) == len(b)
    assert ids_a[:60] == ids_b[:60] and ids_a[60] != ids_b[60]  # shared exactly where the token ids are
    common = len(prompt_text(shared, words))
    assert prompt_text(a, words)[:common] == prompt_text(b, words)[:common]


def test_the_request_body_sends_text_without_special_tokens_only_for_a_router(embedded):
    req = SimRequest("r", 0.0, 5, 3, prompt_token_ids=[10, 11, 12, 13, 14])
    assert request_body("m", req)["prompt"] == [10, 11, 12, 13, 14] and "add_special_tokens" not in request_body(
        "m", req
    )
    body = request_body("m", req, embedded[1])
    assert body["prompt"] == prompt_text([10, 11, 12, 13, 14], embedded[1]) and body["add_special_tokens"] is False
    assert body["max_tokens"] == 3 and body["ignore_eos"] is True


class _FewWords:
    """A tokenizer of ten tokens, one of them a word."""

    def __len__(self):
        return 10

    def decode(self, ids):
        return " word" if ids == [3] else "#"

    def encode(self, text, add_special_tokens=True):
        return [3]


def test_a_vocabulary_without_enough_words_is_one_line():
    with pytest.raises(ValueError, match=r"has 1 single-token words \(of 256 needed\)"):
        single_token_words(_FewWords())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--router-url", "http://127.0.0.1:9", "--base-url", "http://127.0.0.1:9"], "give one"),
        (["--router-url", "http://127.0.0.1:9", "--record", "x.etrec"], "leave out --router-url"),
        (["--router-url", "http://127.0.0.1:9", "--compare", "vllm-server"], "leave out --router-url"),
    ],
)
def test_router_url_refuses_what_needs_a_server_of_its_own(flags, message, capsys):
    args = build_parser().parse_args(["bench", "serve", *flags])
    assert args.func(args) == 2  # before anything starts
    err = capsys.readouterr().err.strip()
    assert err.startswith("enginetui bench serve: error:") and message in err and "\n" not in err
