"""Whole prompts apart (kernels.prompt_sdpa): a step's prompts computed from their first token take torch's SDPA
(kernels.prompt_attention), every other request the paged kernel, with the result of one paged call."""

import dataclasses

import pytest
import torch

from enginetui.core.sched.output import CachedRequestData, SchedulerOutput
from enginetui.core.worker.forward_context import set_forward_context
from enginetui.kernels import prompt_sdpa
from enginetui.kernels.dispatch import PROMPT_SDPA_ENV, PROMPT_SDPA_MIN_TOKENS
from tests.support.models import make_opt_dir
from tests.support.parity import engine_greedy, hf_greedy, mixed_prompts
from tests.worker.tiny_runner import make_runner, new_req

CPU = torch.device("cpu")
# D decodes at position 50, P is a whole prompt of 70 tokens, S one of 10 (under the minimum: the kernel's), C a
# prompt's second chunk (30 tokens after 20): (request, its data, tokens this step)
REQUESTS = {
    "D": (new_req("D", 51, 50, [0, 1, 2, 3]), 1),
    "P": (new_req("P", 70, 0, [4, 5, 6, 7, 8]), 70),
    "S": (new_req("S", 10, 0, [9]), 10),
    "C": (new_req("C", 90, 20, [10, 11, 12, 13]), 30),
}


def step(order: str) -> SchedulerOutput:
    """One step of the requests named in `order`, packed in that order (the runner's rows)."""
    return SchedulerOutput(
        scheduled_new_reqs=[REQUESTS[r][0] for r in order],
        scheduled_cached_reqs=CachedRequestData(),
        num_scheduled_tokens={r: REQUESTS[r][1] for r in order},
        total_num_scheduled_tokens=sum(REQUESTS[r][1] for r in order),
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )


def test_the_rule(monkeypatch):
    monkeypatch.delenv(PROMPT_SDPA_ENV, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert prompt_sdpa(CPU, torch.bfloat16, "cpp")
    assert not prompt_sdpa(CPU, torch.float32, "cpp")  # the C++ kernel is faster in float32
    assert not prompt_sdpa(CPU, torch.bfloat16, "torch")
    assert not prompt_sdpa(torch.device("cuda"), torch.bfloat16, "triton")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert not prompt_sdpa(CPU, torch.bfloat16, "cpp")
    monkeypatch.setenv(PROMPT_SDPA_ENV, "1")
    assert prompt_sdpa(CPU, torch.float32, "cpp") and not prompt_sdpa(CPU, torch.float32, "torch")
    monkeypatch.setenv(PROMPT_SDPA_ENV, "0")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert not prompt_sdpa(CPU, torch.bfloat16, "cpp")
    monkeypatch.setenv(PROMPT_SDPA_ENV, "yes")
    with pytest.raises(ValueError, match=PROMPT_SDPA_ENV):
        prompt_sdpa(CPU, torch.bfloat16, "cpp")


def test_the_split_of_a_step(monkeypatch):
    monkeypatch.setenv(PROMPT_SDPA_ENV, "1")
    assert PROMPT_SDPA_MIN_TOKENS == 64  # P is over it, S under it
    runner = make_runner()
    out = step("DPSC")
    runner.update_states(out)
    split = runner.prepare_inputs(out).attn.prompt_split
    assert split.spans == [(1, 71)]
    assert split.rest_tokens.tolist() == [0, *range(71, 111)]  # D, then S and C after P
    assert split.rest.query_start_loc.tolist() == [0, 1, 11, 41] and split.rest.seq_lens.tolist() == [51, 10, 50]
    assert split.rest.block_table.tolist()[0] == [0, 1, 2, 3] and split.rest.block_table.tolist()[2] == [10, 11, 12, 13]
    assert split.rest.slot_mapping.tolist()[:2] == [3 * 16 + 2, 9 * 16]  # D's position 50, S's first token

    runner = make_runner()
    out = step("DSCP")  # P last: the rest is one run of tokens
    runner.update_states(out)
    split = runner.prepare_inputs(out).attn.prompt_split
    assert split.spans == [(41, 111)] and split.rest_tokens == slice(0, 41)

    for order, only in (("P", True), ("DSC", False)):
        runner = make_runner()
        out = step(order)
        runner.update_states(out)
        split = runner.prepare_inputs(out).attn.prompt_split
        assert (split is not None and split.rest is None) if only else split is None

    monkeypatch.setenv(PROMPT_SDPA_ENV, "0")
    runner = make_runner()
    out = step("DPSC")
    runner.update_states(out)
    assert runner.prepare_inputs(out).attn.prompt_split is None


@pytest.mark.parametrize("order", ["DPSC", "DSCP", "P"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_split_step_computes_what_one_paged_call_does(monkeypatch, order, dtype):
    monkeypatch.setenv(PROMPT_SDPA_ENV, "1")
    torch.manual_seed(0)
    runner = make_runner(dtype=dtype)
    for param in runner.model.parameters():  # the runner's model is built uninitialized
        param.data.normal_(0, 0.2)
    runner.kv_cache.normal_()  # the decode's and the second chunk's earlier keys and values
    out = step(order)
    runner.update_states(out)
    inputs = runner.prepare_inputs(out)
    assert inputs.attn.prompt_split is not None
    with torch.inference_mode():
        with set_forward_context(inputs.attn):
            split = runner.model(inputs.input_ids, inputs.positions).float()  # [num_tokens, hidden]
        with set_forward_context(dataclasses.replace(inputs.attn, prompt_split=None)):
            whole = runner.model(inputs.input_ids, inputs.positions).float()
    tol = 1e-5 if dtype == torch.float32 else 3e-2  # bf16: SDPA rounds the probabilities to bf16, the kernel not
    assert torch.allclose(split, whole, atol=tol, rtol=tol), (split - whole).abs().max()


def test_greedy_tokens_equal_transformers_with_whole_prompts_by_sdpa(monkeypatch, tmp_path):
    monkeypatch.setenv(PROMPT_SDPA_ENV, "1")
    model_dir = make_opt_dir(tmp_path / "opt")
    prompts = mixed_prompts(6, 512, 40, 140, seed=3)  # most over the minimum, a few under it
    tokens, _ = engine_greedy(model_dir, prompts, max_tokens=12)
    assert tokens == hf_greedy(model_dir, prompts, max_tokens=12)
