"""generation_config.json defaults, read as vLLM reads them: EOS ids (a list, as Llama 3 has) and
default sampling parameters for requests that give none."""

import json
import shutil

import pytest

from enginetui.core import LLM, SamplingParams
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.core.models.generation_config import generation_defaults
from tests.support.models import make_opt_dir

PROMPT = [2, 340, 61, 242, 43]


def write_generation_config(model_dir, **fields) -> None:
    with open(f"{model_dir}/generation_config.json", "w") as f:
        json.dump(fields, f)


def test_generation_config_file_gives_eos_list_and_sampling_defaults(tmp_path):
    d = make_opt_dir(tmp_path, seed=2)
    write_generation_config(
        d,
        eos_token_id=[7, 9, 7],
        do_sample=True,
        temperature=0.6,
        top_p=0.9,
        top_k=50,
        max_new_tokens=30,
        repetition_penalty=1.1,
    )
    gen = generation_defaults(tmp_path, None)
    assert gen.eos_token_ids == [7, 9]
    # do_sample is not a sampling default (vLLM ignores it); max_new_tokens becomes max_tokens.
    assert gen.sampling == {"temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_tokens": 30, "repetition_penalty": 1.1}


def test_without_a_generation_config_the_model_config_gives_the_eos(tmp_path):
    d = make_opt_dir(tmp_path, seed=2)
    (tmp_path / "generation_config.json").unlink()
    with open(f"{d}/config.json") as f:
        eos = json.load(f)["eos_token_id"]
    from transformers import AutoConfig

    gen = generation_defaults(tmp_path, AutoConfig.from_pretrained(d))
    assert gen.eos_token_ids == [eos] and gen.sampling == {}


def greedy_run(model_dir, **params):
    llm = LLM(model=model_dir, multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=16)
    try:
        out = llm.generate([PROMPT], SamplingParams(temperature=0, max_tokens=8, **params), use_tqdm=False)[0]
        return out.outputs[0], llm.engine.info
    finally:
        llm.shutdown()


def test_every_eos_id_stops_a_request_and_min_tokens_blocks_them_all(tmp_path):
    d = shutil.copytree(DEFAULT_MODEL_DIR, tmp_path / "m")  # trained: its greedy tokens vary
    free, _ = greedy_run(d, ignore_eos=True)
    # The first token (after the first) not generated before it: make it the second EOS id.
    k = next(i for i in range(1, len(free.token_ids)) if free.token_ids[i] not in free.token_ids[:i])
    eos = free.token_ids[k]
    write_generation_config(d, eos_token_id=[2, eos])

    stopped, info = greedy_run(d)
    assert info.eos_token_ids == [2, eos]
    assert stopped.token_ids == free.token_ids[: k + 1] and stopped.finish_reason == "stop"

    held, _ = greedy_run(d, min_tokens=k + 2)
    assert not {2, eos} & set(held.token_ids[: k + 2])

    ignored, _ = greedy_run(d, ignore_eos=True)
    assert ignored.token_ids == free.token_ids


def test_a_request_without_params_gets_the_model_defaults(tmp_path):
    d = make_opt_dir(tmp_path, seed=4)
    write_generation_config(d, eos_token_id=2, temperature=0.6, top_p=0.9, max_new_tokens=5)
    llm = LLM(model=d, multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=16)
    try:
        assert llm.engine.info.default_sampling == {"temperature": 0.6, "top_p": 0.9, "max_tokens": 5}
        request, _ = llm.engine.processor.process("a", PROMPT, None)
        assert (request.sampling_params.temperature, request.sampling_params.top_p) == (0.6, 0.9)
        out = llm.generate([PROMPT], use_tqdm=False)[0].outputs[0]
        assert len(out.token_ids) == 5 or out.finish_reason == "stop"
        # Params given explicitly are used as they are.
        explicit, _ = llm.engine.processor.process("b", PROMPT, SamplingParams(max_tokens=3))
        assert (explicit.sampling_params.temperature, explicit.sampling_params.max_tokens) == (1.0, 3)
    finally:
        llm.shutdown()


@pytest.mark.parametrize("eos", [[], [3, 3, 5]])
def test_processor_puts_the_tokenizer_eos_first(eos):
    from enginetui.core.engine.engine_info import EngineInfo
    from enginetui.core.engine.processor import Processor

    class Tok:
        eos_token_id = 5

    info = EngineInfo(
        model_name="m",
        model_dir=None,
        architecture="OPTForCausalLM",
        num_parameters=1000,
        kv_bytes_per_token=96,
        vocab_size=10,
        max_model_len=32,
        num_blocks=4,
        block_size=16,
        device="cpu",
        dtype="float32",
        eos_token_ids=eos,
        default_sampling={},
        pid=1,
    )
    assert Processor(Tok(), info).eos_token_ids == [5, 3][: 1 + bool(eos)]
    assert Processor(None, info).eos_token_ids == list(dict.fromkeys(eos))
