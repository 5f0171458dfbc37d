"""LLM / the sync client: same greedy results in-process and in a child; control calls; shutdown."""

import pytest

from enginetui.core.config import EngineConfig
from enginetui.core.engine.core_client import EngineCoreClient
from enginetui.core.engine.llm import LLM
from enginetui.core.engine.processor import Processor
from enginetui.core.sampling_params import SamplingParams
from enginetui.serve.process import wait_gone
from tests.engine_proc.engine_args import engine_args

pytestmark = pytest.mark.timeout(90)

PROMPTS = [[5, 6, 7, 8], [9, 10, 11, 12, 13, 14], [20, 21], list(range(30, 70))]


def test_greedy_outputs_identical_inproc_and_multiproc(engine_model_dir):
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    args = engine_args(engine_model_dir)
    with LLM(multiprocess=False, **args) as llm:
        expected = llm.generate(PROMPTS, params, use_tqdm=False)
    with LLM(multiprocess=True, **args) as llm:
        pid = llm.engine.client.engine_pid
        assert pid is not None and pid == llm.engine.info.pid
        got = llm.generate(PROMPTS, params, use_tqdm=False)
        again = llm.generate(PROMPTS[:2], params, use_tqdm=False)  # the engine serves more than one batch
    assert wait_gone(pid, 3.0), "EngineCore still alive after LLM shutdown"
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in expected]
    assert [o.outputs[0].text for o in got] == [o.outputs[0].text for o in expected]
    assert [o.outputs[0].token_ids for o in again] == [o.outputs[0].token_ids for o in expected[:2]]
    assert all(len(o.outputs[0].token_ids) == 8 for o in got)


def test_sync_client_control_calls(engine_model_dir):
    client = EngineCoreClient.make(
        EngineConfig(**engine_args(engine_model_dir, skip_tokenizer_init=True)), asyncio_mode=False, multiprocess=True
    )
    try:
        assert client.info.pid == client.engine_pid
        processor = Processor(None, client.info)
        client.call("pause")
        s0 = client.call("snapshot")
        assert s0.paused and s0.step == 0 and s0.is_snapshot
        req, _ = processor.process("a", [1, 2, 3], SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True))
        client.add_request(req)
        assert client.call("step_once") is None
        out = client.get_output()  # what the step produced arrived before its reply
        assert out.step == 1 and [o.request_id for o in out.outputs] == ["a"]
        assert len(out.outputs[0].new_token_ids) == 1
        assert client.call("snapshot").step == 1
        client.abort_requests(["a"])
        aborted = client.get_output()
        assert aborted.outputs[0].finish_reason == "abort"
        assert client.call("reset_prefix_cache") is True  # nothing holds blocks any more
        with pytest.raises(ValueError, match="unknown control op 'explode'"):
            client.call("explode")
        with pytest.raises(ValueError, match="takes no value"):
            client.call("pause", 3)
        client.call("resume")
        assert not client.call("snapshot").paused
    finally:
        client.shutdown()
        client.shutdown()  # idempotent
    assert wait_gone(client.engine_pid, 3.0)


def test_llm_engine_step_with_nothing_in_flight_returns_at_once(engine_model_dir):
    from enginetui.core.engine.llm_engine import LLMEngine

    engine = LLMEngine(EngineConfig(**engine_args(engine_model_dir, skip_tokenizer_init=True)), multiprocess=True)
    try:
        assert engine.step() == []  # would block forever waiting on an idle EngineCore otherwise
        engine.add_request("a", [2, 5, 6], SamplingParams(max_tokens=2, ignore_eos=True))
        finals = []
        while engine.has_unfinished_requests():
            finals += [o for o in engine.step() if o.finished]
        assert [o.request_id for o in finals] == ["a"]
        assert engine.step() == []
    finally:
        engine.shutdown()


def test_an_in_process_engine_leaves_the_host_process_state_alone(engine_model_dir):
    """EngineCore on a thread of this process seeds no global RNG and changes no thread count
    (allocator tuning happens only in its own child process)."""
    import torch

    rng, threads = torch.random.get_rng_state(), torch.get_num_threads()
    with LLM(multiprocess=False, **engine_args(engine_model_dir, skip_tokenizer_init=True, seed=1234)) as llm:
        llm.generate([[5, 6, 7]], SamplingParams(temperature=0.8, max_tokens=4), use_tqdm=False)
    assert torch.equal(rng, torch.random.get_rng_state()) and torch.get_num_threads() == threads
