"""LLM / SyncMPClient: same greedy results in-process and in a child; control calls; shutdown."""

import pytest

from core.config import EngineConfig
from core.engine.llm import LLM
from core.engine.mp_client import SyncMPClient
from core.engine.processor import Processor
from core.sampling_params import SamplingParams
from tests.engine_proc.conftest import engine_args, wait_gone

pytestmark = pytest.mark.timeout(90)

PROMPTS = [[5, 6, 7, 8], [9, 10, 11, 12, 13, 14], [20, 21], list(range(30, 70))]


def test_greedy_outputs_identical_inproc_and_multiproc(engine_model_dir, has_tokenizer):
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    args = engine_args(engine_model_dir, has_tokenizer)
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


def test_sync_client_control_calls(engine_model_dir, has_tokenizer):
    client = SyncMPClient(EngineConfig(**engine_args(engine_model_dir, False)))
    try:
        assert client.info.pid == client.engine_pid
        processor = Processor(None, client.info)
        client.pause()
        s0 = client.snapshot()
        assert s0.paused and s0.step == 0
        req, _ = processor.process("a", [1, 2, 3], SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True))
        client.add_request(req)
        out = client.step_once()
        assert out.step == 1 and [o.request_id for o in out.outputs] == ["a"]
        assert len(out.outputs[0].new_token_ids) == 1
        assert client.snapshot().step == 1
        client.abort_requests(["a"])
        aborted = client.get_output()
        assert aborted.outputs[0].finish_reason == "abort"
        client.reset_prefix_cache()
        client.resume()
        assert not client.snapshot().paused
    finally:
        client.shutdown()
        client.shutdown()  # idempotent
    assert wait_gone(client.engine_pid, 3.0)


def test_llm_engine_step_with_nothing_in_flight_returns_at_once(engine_model_dir):
    from core.engine.llm_engine import LLMEngine

    engine = LLMEngine(EngineConfig(**engine_args(engine_model_dir, False)), multiprocess=True)
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
