"""Asynchronous scheduling through the whole engine: the same greedy tokens as transformers and as
synchronous steps, every stop rule, and events that show step N+1 planned while step N executes."""

import pytest

from enginetui.cli import build_parser
from enginetui.core import LLM, SamplingParams
from enginetui.core.config import EngineConfig
from enginetui.flags.engine import engine_args
from tests.support.models import make_opt_dir
from tests.support.parity import engine_greedy, hf_greedy, mixed_prompts


@pytest.fixture(scope="module")
def tiny_reference(tiny_opt_dir):
    prompts = mixed_prompts(6, 512, 1, 70)
    return prompts, hf_greedy(tiny_opt_dir, prompts, 16)


@pytest.mark.parametrize(
    "engine_args",
    [{}, {"max_num_batched_tokens": 32}, {"num_gpu_blocks_override": 10, "block_size": 16}],
    ids=["plain", "chunked", "preempting"],
)
def test_async_greedy_tokens_match_transformers(tiny_opt_dir, tiny_reference, engine_args):
    prompts, expected = tiny_reference
    got, events = engine_greedy(tiny_opt_dir, prompts, 16, async_scheduling=True, **engine_args)
    assert got == expected
    assert all(e.async_scheduling for e in events)
    # Step N+1 is planned before step N's tokens are applied: placeholders are seen, and plans run ahead.
    assert any(r.num_output_placeholders for e in events for r in e.running)
    assert any(e.planned_step == e.executed_step + 1 for e in events)
    assert sum(e.total_output_tokens for e in events[-1:]) == sum(len(t) for t in got)  # nothing discarded counted
    if "num_gpu_blocks_override" in engine_args:
        assert sum(len(e.preempted) for e in events) > 0 and events[-1].num_free_blocks == 10


def test_events_show_the_next_plan_overlapping_the_execution(tiny_opt_dir, tiny_reference, slow_model_thread):
    prompts, _ = tiny_reference
    _, events = engine_greedy(tiny_opt_dir, prompts, 16, async_scheduling=True)
    schedule = {p.step: p for e in events for p in e.phases if p.name == "schedule"}
    execute = {p.step: p for e in events for p in e.phases if p.name == "execute"}
    update = {p.step: p for e in events for p in e.phases if p.name == "update"}
    assert set(execute) == set(update) and set(execute) <= set(schedule)
    overlapped = [n for n in execute if n + 1 in schedule and schedule[n + 1].start < execute[n].end]
    assert len(overlapped) > len(execute) // 2  # the plan of N+1 is made while N executes
    for n in execute:
        assert schedule[n].end <= execute[n].start <= execute[n].end <= update[n].start  # each step in order


def _generate(model_dir, params, async_scheduling, prompt=(2, 50, 60, 70)):
    llm = LLM(
        model=model_dir,
        multiprocess=False,
        skip_tokenizer_init=True,
        dtype="float32",
        async_scheduling=async_scheduling,
    )
    out = llm.generate([list(prompt)], params, use_tqdm=False)[0].outputs[0]
    llm.shutdown()
    return out


def _base_tokens(model_dir):
    return _generate(model_dir, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True), False).token_ids


@pytest.mark.parametrize("rule", ["max_tokens", "stop_token", "min_tokens"])
def test_async_stops_as_synchronous_steps_do(tiny_opt_dir, rule):
    base = _base_tokens(tiny_opt_dir)
    third = base[2]
    params = {
        "max_tokens": SamplingParams(temperature=0, max_tokens=5, ignore_eos=True),
        "stop_token": SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, stop_token_ids=[third]),
        "min_tokens": SamplingParams(
            temperature=0, max_tokens=12, ignore_eos=True, stop_token_ids=[third], min_tokens=4
        ),
    }[rule]
    sync_out = _generate(tiny_opt_dir, params, False)
    async_out = _generate(tiny_opt_dir, params, True)
    assert (async_out.token_ids, async_out.finish_reason) == (sync_out.token_ids, sync_out.finish_reason)
    if rule == "max_tokens":
        assert async_out.token_ids == base[:5] and async_out.finish_reason == "length"
    elif rule == "stop_token":
        assert async_out.token_ids == base[: base.index(third) + 1] and async_out.finish_reason == "stop"
    else:
        tokens = async_out.token_ids  # the stop token is masked for the first 4 tokens, then it stops
        assert third not in tokens[:4]
        assert (async_out.finish_reason, tokens[-1]) == ("stop", third) or (async_out.finish_reason, len(tokens)) == (
            "length",
            12,
        )


def test_async_stops_at_eos(tiny_opt_dir, tmp_path):
    base = _base_tokens(tiny_opt_dir)
    eos = base[3]
    eos_dir = make_opt_dir(tmp_path / "eos", eos_token_id=eos)  # the same weights (seed 0), another EOS id
    params = SamplingParams(temperature=0, max_tokens=12)
    async_out = _generate(eos_dir, params, True)
    assert async_out.token_ids == base[: base.index(eos) + 1] and async_out.finish_reason == "stop"
    assert async_out.token_ids == _generate(eos_dir, params, False).token_ids


def test_async_stop_string(text_opt_dir):
    def run(async_scheduling, stop=None):
        llm = LLM(model=text_opt_dir, multiprocess=False, num_gpu_blocks_override=64, async_scheduling=async_scheduling)
        out = llm.generate(
            "Once upon a time", SamplingParams(temperature=0, max_tokens=16, ignore_eos=True, stop=stop), use_tqdm=False
        )[0].outputs[0]
        llm.shutdown()
        return out

    text = run(True).text
    assert len(text) > 6
    stop = text[3:6]
    cut = run(True, [stop])
    assert cut.finish_reason == "stop" and cut.text == text[: text.find(stop)]
    assert cut.text == run(False, [stop]).text


def test_the_flag_and_its_device_default():
    parse = lambda *argv: engine_args(build_parser().parse_args(list(argv)))  # noqa: E731
    assert parse("--async-scheduling")["async_scheduling"] is True
    assert parse("--no-async-scheduling")["async_scheduling"] is False
    assert "async_scheduling" not in parse()  # unset: the engine decides by device
    assert EngineConfig(device="cpu").use_async_scheduling is False  # as vLLM's CPU platform
    assert EngineConfig(device="cpu", async_scheduling=True).use_async_scheduling is True
    with pytest.raises(ValueError, match="async_scheduling must be True, False or None"):
        EngineConfig(async_scheduling="yes")
