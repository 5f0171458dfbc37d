"""A streamed completion's chunks built without pydantic are the bytes the models give."""

import random
from types import SimpleNamespace

from enginetui.core.entrypoints.openai.completion_protocol import CompletionRequest, CompletionResponseStreamChoice
from enginetui.core.entrypoints.openai.serving_completion import _Answer
from enginetui.core.entrypoints.openai.streaming import sse

# text a tokenizer can give, and what JSON must escape: quotes, backslashes, control characters, non-ASCII
ALPHABET = [chr(i) for i in range(0, 300)] + ["\u2028", "\u2029", "😀", "\ufffd", "中", '"', "\\", "/", "\x7f"]


def test_plain_chunks_are_the_models_json():
    rng = random.Random(0)
    for case in range(1000):
        name = rng.choice(["facebook/opt-125m", 'mödel "x"\\'])
        req = CompletionRequest(model=name, prompt=[1, 2, 3], stream=True)
        answer = _Answer(SimpleNamespace(name=name), req, [], f'cmpl-{case}"', None)
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
        finish = rng.choice([None, "stop", "length", "abort"])
        stop = rng.choice([None, 0, 50256, "\n\n", '</s>"'])
        tokens = [rng.randrange(50272) for _ in range(rng.randint(0, 3))]
        prompt = rng.choice([None, [rng.randrange(50272) for _ in range(rng.randint(1, 5))]])
        for ids in (None, (tokens, prompt)):
            choice = CompletionResponseStreamChoice(
                index=case % 5, text=text, logprobs=None, finish_reason=finish, stop_reason=stop
            )
            if ids is not None:  # as chunks() sets them on the model
                choice.token_ids = tokens
                if prompt is not None:
                    choice.prompt_token_ids = prompt
            expected = sse(answer._chunk([choice]).model_dump_json(exclude_unset=True)).encode()
            assert answer._plain_chunk(case % 5, text, finish, stop, ids) == expected
