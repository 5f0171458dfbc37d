"""The server driven by the official `openai` client: completions and chat, streaming and not,
logprobs, usage (also in the stream's last chunk), stop strings, seeds, batches."""

import openai
import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from tests.serve.serving import API_KEY, engine_idle


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=60) as c:
        yield c


def test_models_lists_the_served_model(client):
    """The embedded model is served under its directory's path (as vLLM serves a local model), so a
    client can load its tokenizer by the served name; "default" is still accepted."""
    models = client.models.list().data
    assert [m.id for m in models] == [str(DEFAULT_MODEL_DIR)]
    assert models[0].max_model_len == 512
    by_path = client.completions.create(model=models[0].id, prompt="The function", max_tokens=4, temperature=0)
    by_alias = client.completions.create(model="default", prompt="The function", max_tokens=4, temperature=0)
    assert by_path.model == by_alias.model == models[0].id
    assert by_path.choices[0].text == by_alias.choices[0].text


def test_completion_greedy_is_deterministic_and_counts_usage(client):
    a = client.completions.create(model="default", prompt="The function", max_tokens=12, temperature=0)
    b = client.completions.create(model="default", prompt="The function", max_tokens=12, temperature=0)
    assert a.object == "text_completion" and a.id.startswith("cmpl-")
    assert a.choices[0].text == b.choices[0].text and a.choices[0].text.strip()
    assert a.choices[0].finish_reason == "length"
    assert a.usage.prompt_tokens == 3 and a.usage.completion_tokens == 12 and a.usage.total_tokens == 15


def test_streamed_completion_equals_the_whole_one(client):
    whole = client.completions.create(model="default", prompt="A class is", max_tokens=20, temperature=0)
    chunks = list(
        client.completions.create(
            model="default",
            prompt="A class is",
            max_tokens=20,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text_chunks = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].text for c in text_chunks) == whole.choices[0].text
    assert text_chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.choices[0].finish_reason is None for c in text_chunks[:-1])
    assert len({c.id for c in chunks}) == 1
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage == whole.usage


def test_streamed_completion_with_continuous_usage_counts_on_every_chunk(client):
    """`continuous_usage_stats`: each text chunk carries the usage so far (a bug sent none: the stream broke)."""
    whole = client.completions.create(model="default", prompt="A class is", max_tokens=8, temperature=0)
    chunks = list(
        client.completions.create(
            model="default",
            prompt="A class is",
            max_tokens=8,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
        )
    )
    text_chunks = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].text for c in text_chunks) == whole.choices[0].text
    counts = [c.usage.completion_tokens for c in text_chunks]
    assert counts == sorted(counts) and counts[-1] == whole.usage.completion_tokens
    assert all(c.usage.prompt_tokens == whole.usage.prompt_tokens for c in text_chunks)
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_stream_without_include_usage_has_no_usage_chunk(client):
    chunks = list(client.completions.create(model="default", prompt="x", max_tokens=3, stream=True))
    assert all(c.usage is None and c.choices for c in chunks)


def test_completion_logprobs(client):
    out = client.completions.create(model="default", prompt="The function", max_tokens=5, temperature=0, logprobs=3)
    lp = out.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
    assert "".join(lp.tokens) == out.choices[0].text
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert logprob <= 0 and len(top) == 3  # greedy: the sampled token is the best of the 3
        assert top[token] == pytest.approx(logprob) and max(top.values()) == pytest.approx(logprob)
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(5)]


def test_streamed_logprobs_equal_the_whole_ones(client):
    whole = client.completions.create(model="default", prompt="In Python,", max_tokens=6, temperature=0, logprobs=2)
    chunks = list(
        client.completions.create(
            model="default", prompt="In Python,", max_tokens=6, temperature=0, logprobs=2, stream=True
        )
    )
    tokens = [t for c in chunks for t in c.choices[0].logprobs.tokens]
    offsets = [o for c in chunks for o in c.choices[0].logprobs.text_offset]
    assert tokens == whole.choices[0].logprobs.tokens and offsets == whole.choices[0].logprobs.text_offset


def test_chat_completion(client):
    out = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "What is a class?"}], max_tokens=10, temperature=0
    )
    assert out.object == "chat.completion" and out.id.startswith("chatcmpl-")
    msg = out.choices[0].message
    assert msg.role == "assistant" and msg.content.strip()
    # The prompt is the chat template's rendering: BOS, "Question: ...", "Answer:".
    assert out.usage.prompt_tokens > 5 and out.usage.completion_tokens == 10


def test_streamed_chat_with_usage_and_logprobs(client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a list?"}]
    whole = client.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model="default",
            messages=messages,
            max_tokens=8,
            temperature=0,
            stream=True,
            logprobs=True,
            top_logprobs=2,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    body = [c for c in chunks[1:] if c.choices]
    assert "".join(c.choices[0].delta.content for c in body) == whole.choices[0].message.content
    assert body[-1].choices[0].finish_reason == "length"
    entries = [e for c in body for e in c.choices[0].logprobs.content]
    assert len(entries) == 8 and all(len(e.top_logprobs) == 2 for e in entries)
    assert chunks[-1].usage.completion_tokens == 8 and chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_stop_string_cuts_the_text_streamed_or_not(client):
    base = client.completions.create(model="default", prompt="The function", max_tokens=24, temperature=0)
    text = base.choices[0].text
    stop = text[8:11]  # three characters from the middle of the greedy text
    cut = text[: text.index(stop)]
    whole = client.completions.create(model="default", prompt="The function", max_tokens=24, temperature=0, stop=stop)
    assert whole.choices[0].text == cut and whole.choices[0].finish_reason == "stop"
    assert whole.choices[0].stop_reason == stop
    chunks = list(
        client.completions.create(
            model="default", prompt="The function", max_tokens=24, temperature=0, stop=[stop], stream=True
        )
    )
    assert "".join(c.choices[0].text for c in chunks) == cut  # nothing of the stop string was ever sent


def test_seeded_sampling_repeats(client):
    args = dict(
        model="default",
        prompt="Once upon a time",
        max_tokens=12,
        temperature=1.0,
        top_p=0.9,
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=0.3,
        extra_body={"top_k": 50, "min_p": 0.01},
    )
    assert client.completions.create(**args).choices[0].text == client.completions.create(**args).choices[0].text


def test_ignore_eos_generates_exactly_max_tokens(client):
    out = client.completions.create(
        model="default", prompt="Hi", max_tokens=40, temperature=0, extra_body={"ignore_eos": True}
    )
    assert out.usage.completion_tokens == 40 and out.choices[0].finish_reason == "length"


def test_a_batch_of_prompts_gets_one_choice_each(client):
    out = client.completions.create(
        model="default", prompt=["The function", "A class is", "In Python,"], max_tokens=4, temperature=0
    )
    assert [c.index for c in out.choices] == [0, 1, 2]
    single = client.completions.create(model="default", prompt="A class is", max_tokens=4, temperature=0)
    assert out.choices[1].text == single.choices[0].text
    ids = client.completions.create(model="default", prompt=[[2, 100, 200], [2, 300]], max_tokens=4, temperature=0)
    assert len(ids.choices) == 2 and ids.usage.prompt_tokens == 5


def test_echo_puts_the_prompt_first(client):
    out = client.completions.create(model="default", prompt="The function", max_tokens=4, temperature=0, echo=True)
    assert out.choices[0].text.startswith("The function")


def test_requests_leave_nothing_behind(client, http):
    client.completions.create(model="default", prompt="x", max_tokens=5)
    engine_idle(http)


def test_n_completions_per_prompt(client):
    out = client.completions.create(
        model="default",
        prompt="The function",
        max_tokens=10,
        temperature=1.0,
        n=3,
        seed=3,
        extra_body={"ignore_eos": True},
    )
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert len({c.text for c in out.choices}) > 1  # independent samples
    assert out.usage.completion_tokens == 30 and out.usage.prompt_tokens == 3
    batch = client.completions.create(
        model="default", prompt=["The function", "A class is"], max_tokens=4, n=2, extra_body={"ignore_eos": True}
    )
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]  # prompt i, completion j: choice i * n + j


def test_streamed_n_equals_the_whole_one(client):
    args = dict(
        model="default",
        prompt="A class is",
        max_tokens=8,
        temperature=1.0,
        n=2,
        seed=5,
        extra_body={"ignore_eos": True},
    )
    whole = client.completions.create(**args)
    texts, finishes = {0: "", 1: ""}, {}
    for chunk in client.completions.create(**args, stream=True):
        for c in chunk.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert texts == {c.index: c.text for c in whole.choices} and finishes == {0: "length", 1: "length"}


def test_chat_n_and_streamed_chat_n(client):
    args = dict(
        model="default",
        messages=[{"role": "user", "content": "What is a class?"}],
        max_tokens=6,
        n=2,
        temperature=1.0,
        seed=1,
        extra_body={"ignore_eos": True},
    )
    whole = client.chat.completions.create(**args)
    assert [c.index for c in whole.choices] == [0, 1] and whole.usage.completion_tokens == 12
    chunks = list(client.chat.completions.create(**args, stream=True))
    assert {c.choices[0].index for c in chunks if c.choices[0].delta.role == "assistant"} == {0, 1}
    texts = {0: "", 1: ""}
    for chunk in chunks:
        texts[chunk.choices[0].index] += chunk.choices[0].delta.content or ""
    assert texts == {c.index: c.message.content for c in whole.choices}


def test_stream_interval_sends_the_tokens_in_chunks_of_that_many(client):
    whole = client.completions.create(model="default", prompt="A class is", max_tokens=11, temperature=0)
    chunks = list(
        client.completions.create(
            model="default",
            prompt="A class is",
            max_tokens=11,
            temperature=0,
            stream=True,
            extra_body={"stream_interval": 4, "return_token_ids": True},
        )
    )
    assert [len(c.choices[0].token_ids) for c in chunks] == [1, 4, 4, 2]  # the first at once, then 4, the rest last
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks] == [None, None, None, "length"]
