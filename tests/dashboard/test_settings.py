"""The /set command and the sampling settings it edits."""

import pytest

from enginetui.core.sampling_params import SamplingParams
from enginetui.settings import SamplingSettings, apply_set_command


def test_defaults_summarised_on_one_line():
    assert SamplingSettings().summary() == "max 64 · temp 0.8 · top-p 0.95 · top-k 0 · seed - · stop -"


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        ("max 128", "max_tokens", 128),
        ("max_tokens 5", "max_tokens", 5),
        ("temp 0", "temperature", 0.0),
        ("temperature 1.5", "temperature", 1.5),
        ("top-p 0.5", "top_p", 0.5),
        ("top_p 1", "top_p", 1.0),
        ("top-k 40", "top_k", 40),
        ("seed 7", "seed", 7),
        ("TEMP 0.3", "temperature", 0.3),
    ],
)
def test_set_changes_one_field(args, field, value):
    settings = apply_set_command(SamplingSettings(), args)
    assert getattr(settings, field) == value
    assert type(getattr(settings, field)) is type(value)


def test_seed_and_stop_can_be_cleared():
    s = apply_set_command(SamplingSettings(), "seed 3")
    assert apply_set_command(s, "seed -").seed is None
    s = apply_set_command(s, "stop . END")
    assert s.stop == (".", "END")
    assert apply_set_command(s, "stop none").stop == ()


def test_stop_understands_escapes_and_quotes():
    s = apply_set_command(SamplingSettings(), r'stop "\n" "the end"')
    assert s.stop == ("\n", "the end")
    assert "stop '\\n' 'the end'" in s.summary()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("", "usage: /set"),
        ("temp", "usage: /set"),
        ("warmth 3", "unknown setting 'warmth'"),
        ("max lots", "max_tokens needs an integer, got 'lots'"),
        ("temp hot", "temperature needs a number"),
        ("max 0", "max tokens must be at least 1"),
        ("temp -1", "temperature must be >= 0"),
        ("top-p 0", "top-p must be in (0, 1]"),
        ("top-k -3", "top-k must be >= 0"),
        ("seed 1 2", "takes one value"),
        ('stop "open', "cannot parse"),
    ],
)
def test_bad_values_are_refused_with_a_reason(args, message):
    with pytest.raises(ValueError, match=None) as info:
        apply_set_command(SamplingSettings(), args)
    assert message in str(info.value)


def test_settings_build_valid_sampling_params():
    s = apply_set_command(apply_set_command(SamplingSettings(), "stop ."), "seed 9")
    params = SamplingParams(**s.as_kwargs())
    assert (params.max_tokens, params.temperature, params.top_p, params.top_k) == (64, 0.8, 0.95, 0)
    assert (params.seed, params.stop) == (9, ["."])
    assert SamplingParams(**SamplingSettings().as_kwargs()).stop is None
