"""The fast detokenizer (the Rust tokenizer's DecodeStream) emits, token by token, the same text as
the general one, on a byte-level BPE (the embedded model's) and on a SentencePiece-style one with
byte fallback; tokenizers it cannot serve exactly get the general one."""

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from enginetui.core.engine.detokenizer import FastIncrementalDetokenizer, IncrementalDetokenizer, detokenizer_for
from enginetui.core.engine.tokenizer import StandInTokenizer
from enginetui.core.models.loader import default_model_dir

TEXT = "Once upon a time, a naïve café served crème brûlée — 日本語 too — to 42 guests. " * 20


def embedded():
    return AutoTokenizer.from_pretrained(default_model_dir())


def sentencepiece_style() -> PreTrainedTokenizerFast:
    """A Llama-style BPE trained here: "▁" for spaces, unknown characters as byte tokens."""
    bpe = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    bpe.train_from_iterator(
        [TEXT.replace("日本語", "")],
        trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", *byte_tokens], show_progress=False),
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>", clean_up_tokenization_spaces=False
    )


def deltas(detok, ids: list[int], per_add: int) -> list[str]:
    return [detok.add(ids[i : i + per_add]) for i in range(0, len(ids), per_add)]


@pytest.mark.parametrize("make", [embedded, sentencepiece_style])
@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_the_fast_detokenizer_adds_the_same_text_at_every_step(make, skip_special_tokens):
    tokenizer = make()
    rng = random.Random(0)
    special = tokenizer.all_special_ids
    samples = [
        tokenizer.encode(TEXT, add_special_tokens=False),  # real text, multi-byte characters included
        [rng.randrange(len(tokenizer)) for _ in range(600)],  # random ids: broken characters, special tokens
        [rng.choice(special) if rng.random() < 0.2 else t for t in tokenizer.encode(TEXT, add_special_tokens=False)],
    ]
    for ids in samples:
        for per_add in (1, 3):  # one token a step, and several (a stream interval, a burst)
            fast = detokenizer_for(tokenizer, skip_special_tokens)
            assert isinstance(fast, FastIncrementalDetokenizer)
            general = IncrementalDetokenizer(tokenizer, skip_special_tokens)
            assert deltas(fast, ids, per_add) == deltas(general, ids, per_add)
            assert fast.text == general.text and fast.token_ids == general.token_ids == ids
    whole = tokenizer.encode(TEXT, add_special_tokens=False)
    fast = detokenizer_for(tokenizer, skip_special_tokens)
    fast.add(whole)
    assert fast.text == tokenizer.decode(whole, skip_special_tokens=skip_special_tokens)


def test_where_decode_stream_gives_up_the_general_detokenizer_takes_over_with_the_same_text():
    tokenizer = sentencepiece_style()
    rng = random.Random(0)
    ids = [rng.randrange(len(tokenizer)) for _ in range(600)]  # byte tokens that make no UTF-8 among them
    fast = detokenizer_for(tokenizer, skip_special_tokens=False)
    assert deltas(fast, ids, 1) == deltas(IncrementalDetokenizer(tokenizer, False), ids, 1)
    assert fast.general is not None  # DecodeStream raised "Invalid prefix encountered" on the way
    assert fast.token_ids == ids


def test_a_stand_in_tokenizer_folds_ids_past_its_vocabulary_in_the_fast_detokenizer_too():
    stand_in = StandInTokenizer(embedded())
    ids = stand_in.encode("Once upon a time there was a café", add_special_tokens=False)
    past = [t + len(stand_in) * (i % 3) for i, t in enumerate(ids)]  # ids a model of a larger vocabulary samples
    fast = detokenizer_for(stand_in, skip_special_tokens=True)
    assert isinstance(fast, FastIncrementalDetokenizer)
    assert deltas(fast, past, 1) == deltas(IncrementalDetokenizer(stand_in, True), past, 1)
    assert fast.text == "Once upon a time there was a café" and fast.token_ids == past


def test_tokenizers_the_fast_one_cannot_serve_exactly_get_the_general_one():
    cleaned = embedded()
    cleaned.clean_up_tokenization_spaces = True  # decode() then edits spaces in Python: DecodeStream does not
    assert isinstance(detokenizer_for(cleaned, True), IncrementalDetokenizer)
    assert isinstance(detokenizer_for(None, True), IncrementalDetokenizer)  # token ids only
    from transformers import ByT5Tokenizer

    assert isinstance(detokenizer_for(StandInTokenizer(ByT5Tokenizer(extra_ids=0)), True), IncrementalDetokenizer)
