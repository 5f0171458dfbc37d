"""LLM.generate as a caller sees it: text in, text out, stops, ordering, params per prompt."""

import pytest

from enginetui.core import LLM, SamplingParams
from enginetui.core.config import OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS, EngineConfig, offline_config


@pytest.fixture(scope="module")
def llm(text_opt_dir):
    engine = LLM(model=text_opt_dir, multiprocess=False, num_gpu_blocks_override=128)
    yield engine
    engine.shutdown()


def test_outputs_come_back_in_prompt_order_with_text_and_timings(llm):
    prompts = ["The function returns", "A", "In Python, a class is a way to bundle data and behaviour together"]
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False)
    assert [o.prompt for o in outs] == prompts
    tok = llm.get_tokenizer()
    for o in outs:
        c = o.outputs[0]
        assert c.finish_reason == "length" and len(c.token_ids) == 8
        assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)  # incremental == full decode
        m = o.metrics
        assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.finished_time


def test_token_id_prompts_and_per_prompt_params(llm):
    params = [
        SamplingParams(temperature=0, max_tokens=3, ignore_eos=True),
        SamplingParams(temperature=0, max_tokens=5, ignore_eos=True),
    ]
    outs = llm.generate([[2, 100, 200], [2, 300]], params, use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in outs] == [3, 5]
    assert outs[0].prompt is None and outs[0].prompt_token_ids == [2, 100, 200]


def test_stop_string_cuts_text_before_it(llm):
    base = llm.generate(
        "Once upon a time", SamplingParams(temperature=0, max_tokens=24, ignore_eos=True), use_tqdm=False
    )[0]
    text = base.outputs[0].text
    assert len(text) > 6
    stop = text[3:6]
    cut = llm.generate(
        "Once upon a time", SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=[stop]), use_tqdm=False
    )[0]
    c = cut.outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop
    assert c.text == text[: text.find(stop)]
    kept = llm.generate(
        "Once upon a time",
        SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=[stop], include_stop_str_in_output=True),
        use_tqdm=False,
    )[0]
    assert kept.outputs[0].text == text[: text.find(stop) + len(stop)]


def test_stop_token_ids_end_generation(llm):
    base = llm.generate([[2, 50, 60]], SamplingParams(temperature=0, max_tokens=10, ignore_eos=True), use_tqdm=False)[0]
    third = base.outputs[0].token_ids[2]
    out = llm.generate(
        [[2, 50, 60]],
        SamplingParams(temperature=0, max_tokens=10, ignore_eos=True, stop_token_ids=[third]),
        use_tqdm=False,
    )[0]
    first_hit = base.outputs[0].token_ids.index(third)
    assert out.outputs[0].token_ids == base.outputs[0].token_ids[: first_hit + 1]
    assert out.outputs[0].finish_reason == "stop" and out.outputs[0].stop_reason == third


def test_seeded_sampling_is_reproducible_across_batches(llm):
    seeded = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12, seed=42, ignore_eos=True)
    alone = llm.generate("Numbers are", seeded, use_tqdm=False)[0].outputs[0].token_ids
    other = SamplingParams(temperature=1.0, max_tokens=20, ignore_eos=True)
    mixed = llm.generate(["Hello", "Numbers are", "A list"], [other, seeded, other], use_tqdm=False)
    assert mixed[1].outputs[0].token_ids == alone


def test_logprobs_are_returned_per_token(llm):
    out = llm.generate("The", SamplingParams(temperature=0, max_tokens=4, logprobs=3, ignore_eos=True), use_tqdm=False)[
        0
    ]
    c = out.outputs[0]
    assert len(c.logprobs) == 4
    for token, entry in zip(c.token_ids, c.logprobs):
        assert token in entry and len(entry) >= 3
        assert max(entry.values()) == entry[token]  # greedy: the sampled token is the most likely


def test_invalid_input_raises_before_reaching_the_engine(llm):
    with pytest.raises(ValueError, match="empty"):
        llm.generate("", use_tqdm=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.generate([[2, 999999]], use_tqdm=False)
    with pytest.raises(ValueError, match="max_model_len"):
        llm.generate("hi", SamplingParams(max_tokens=10**6), use_tqdm=False)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)
    # The engine still serves afterwards.
    assert llm.generate("ok", SamplingParams(max_tokens=2), use_tqdm=False)[0].finished


def test_a_request_that_can_never_fit_the_pool_is_rejected_with_a_reason(text_opt_dir):
    llm = LLM(model=text_opt_dir, multiprocess=False, num_gpu_blocks_override=4, block_size=16)
    outs = llm.generate(["short", "x " * 100], SamplingParams(max_tokens=8, ignore_eos=True), use_tqdm=False)
    assert outs[0].outputs[0].finish_reason == "length"
    rejected = outs[1].outputs[0]
    assert rejected.finish_reason == "rejected" and "pool has 4" in rejected.error
    llm.shutdown()


def test_vllm_prompt_forms(llm):
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    text = "The function returns"
    ids = llm.get_tokenizer().encode(text)
    outs = llm.generate([text, {"prompt": text}, {"prompt_token_ids": ids}, ids], params, use_tqdm=False)
    assert len({tuple(o.outputs[0].token_ids) for o in outs}) == 1  # one prompt, four spellings
    assert [o.prompt for o in outs] == [text, text, None, None]
    single = llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)
    assert single[0].outputs[0].token_ids == outs[0].outputs[0].token_ids
    for bad, match in (
        ({"text": text}, "exactly one key"),
        ({"prompt": 5}, "'prompt' must be a string"),
        ({"prompt": text, "prompt_token_ids": ids}, "exactly one key"),
    ):
        with pytest.raises(ValueError, match=match):
            llm.generate(bad, params, use_tqdm=False)


def test_parallel_sampling_returns_n_completions(llm):
    out = llm.generate(
        "Once upon a time",
        SamplingParams(n=4, seed=11, temperature=1.0, max_tokens=12, ignore_eos=True),
        use_tqdm=False,
    )[0]
    assert out.finished and [c.index for c in out.outputs] == [0, 1, 2, 3]
    assert all(len(c.token_ids) == 12 and c.finish_reason == "length" for c in out.outputs)
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1  # seeds seed+i: the samples differ
    # Sample i is the request with seed + i, alone.
    third = llm.generate(
        "Once upon a time", SamplingParams(seed=13, temperature=1.0, max_tokens=12, ignore_eos=True), use_tqdm=False
    )[0]
    assert third.outputs[0].token_ids == out.outputs[2].token_ids
    greedy = llm.generate(
        [[2, 40, 41]], SamplingParams(n=3, temperature=0, max_tokens=5, ignore_eos=True), use_tqdm=False
    )[0]
    assert len({tuple(c.token_ids) for c in greedy.outputs}) == 1


def test_parallel_samples_share_the_prompt_blocks(text_opt_dir):
    with LLM(
        model=text_opt_dir, multiprocess=False, num_gpu_blocks_override=64, enable_prefix_caching=True, max_num_seqs=1
    ) as llm:  # one at a time: each later sample finds the first one's blocks
        prompt = [2] + list(range(100, 150))  # 51 tokens: 3 full blocks
        out = llm.generate([prompt], SamplingParams(n=3, temperature=0, max_tokens=2, ignore_eos=True), use_tqdm=False)[
            0
        ]
        assert len(out.outputs) == 3 and out.num_cached_tokens in (0, 48)
        snap = llm.engine.snapshot()
        assert snap.prefix_cache_hits >= 2 * 48  # the second and third sample hit the cache


def test_cumulative_logprob_is_the_sum_of_the_sampled_tokens_logprobs(llm):
    out = llm.generate(
        [[2, 70, 71]],
        SamplingParams(temperature=0.7, seed=3, max_tokens=6, logprobs=2, ignore_eos=True),
        use_tqdm=False,
    )[0].outputs[0]
    assert len(out.logprobs) == 6
    assert out.cumulative_logprob == pytest.approx(sum(lp[t] for lp, t in zip(out.logprobs, out.token_ids)))
    plain = llm.generate([[2, 70, 71]], SamplingParams(max_tokens=2), use_tqdm=False)[0].outputs[0]
    assert plain.cumulative_logprob is None  # not asked for


def test_reset_prefix_cache_on_an_idle_engine(llm):
    assert llm.reset_prefix_cache() is True


def test_llm_on_cpu_takes_vllms_offline_step_budget_unless_one_is_given(llm):
    assert llm.config.torch_device.type != "cpu" or llm.config.max_num_batched_tokens == 4096
    assert offline_config(device="cpu").max_num_batched_tokens == OFFLINE_CPU_MAX_NUM_BATCHED_TOKENS == 4096
    assert offline_config(device="cpu", max_num_batched_tokens=512).max_num_batched_tokens == 512
    assert EngineConfig(device="cpu").max_num_batched_tokens == 2048  # AsyncLLM, the server, the dashboard
