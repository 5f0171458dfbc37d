"""An exception inside a model step fails the requests in that step; the engine keeps serving."""

from enginetui.core import LLM, SamplingParams


def test_model_step_exception_errors_its_requests_and_the_engine_goes_on(tiny_opt_dir):
    llm = LLM(
        model=tiny_opt_dir,
        multiprocess=False,
        skip_tokenizer_init=True,
        num_gpu_blocks_override=32,
        debug_invariants=True,
    )
    core = llm.engine.client.core
    model = core.runner.model
    original = model.forward
    calls = {"n": 0}

    def flaky_forward(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected fault")
        return original(*args, **kwargs)

    model.forward = flaky_forward
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    outs = llm.generate([[2, 7, 8], [2, 9, 10, 11]], params, use_tqdm=False)
    for out in outs:
        assert out.finished and out.outputs[0].finish_reason == "error"
        assert "injected fault" in out.outputs[0].error
    assert core.scheduler.kv.pool.num_free_blocks == 32
    model.forward = original
    again = llm.generate([[2, 7, 8]], params, use_tqdm=False)[0]
    assert again.outputs[0].finish_reason == "length" and len(again.outputs[0].token_ids) == 6
    llm.shutdown()
