"""The Hugging Face `transformers` baseline: `generate` over static batches of the same workload.

Requests are batched in workload order, left-padded with an attention mask. A static batch runs
until its longest request is done (min_new_tokens = max_new_tokens = that length, so nothing
stops early), as `generate` must; only each request's own output length counts as useful output.
Sampling matches our engine's benchmark requests: the same temperature (0: greedy), no top-k / top-p cut.
"""

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from enginetui.bench.workload import prompts_of, total_output_len, warmup_workload
from enginetui.simulate.workload import SimRequest

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(slots=True)
class HFRun:
    """One pass of the baseline over the whole workload at one batch size."""

    batch_size: int  # requests per static batch
    num_batches: int  # batches run
    elapsed_s: float  # wall time of all batches
    num_requests: int  # requests in the workload
    prompt_tokens: int  # real (unpadded) prompt tokens
    output_tokens: int  # useful output tokens: each request's own output length
    generated_tokens: int  # output tokens computed, padding rows included (batch size x longest output)
    requests_per_s: float  # num_requests / elapsed
    total_tokens_per_s: float  # (prompt + useful output tokens) / elapsed
    output_tokens_per_s: float  # useful output tokens / elapsed


def load_hf_model(model_dir: Path, dtype: str, device: str) -> "PreTrainedModel":
    """The checkpoint as a transformers causal LM, in the dtype and on the device our engine used."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype))
    return model.to(device).eval()  # type: ignore[arg-type]  # transformers types `to` through functools.wraps


def run_hf(model: "PreTrainedModel", workload: list[SimRequest], batch_size: int, temperature: float = 1.0) -> HFRun:
    """Generate every request of the workload in static batches of `batch_size`; time it all."""
    pad_id = _pad_token_id(model)
    # Warm up at the timed batch size, so that a first batch of a new size pays no one-off cost in the
    # timing (on an H200, after a 2-request warm-up, one bf16 batch of 64 took 22 s: kernels/GPU_NOTES.md).
    _generate(model, warmup_workload(model.config.vocab_size, min(batch_size, len(workload))), pad_id, temperature)
    batches = [workload[i : i + batch_size] for i in range(0, len(workload), batch_size)]
    generated = 0
    start = time.perf_counter()
    for batch in batches:
        generated += _generate(model, batch, pad_id, temperature)
    elapsed = time.perf_counter() - start
    prompt_tokens = sum(r.prompt_len for r in workload)
    output_tokens = total_output_len(workload)
    return HFRun(
        batch_size=batch_size,
        num_batches=len(batches),
        elapsed_s=elapsed,
        num_requests=len(workload),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        generated_tokens=generated,
        requests_per_s=len(workload) / elapsed,
        total_tokens_per_s=(prompt_tokens + output_tokens) / elapsed,
        output_tokens_per_s=output_tokens / elapsed,
    )


@torch.inference_mode()
def _generate(model: "PreTrainedModel", batch: list[SimRequest], pad_id: int, temperature: float) -> int:
    """One static batch; returns the output tokens computed (rows x the longest output length)."""
    device = next(model.parameters()).device
    width = max(r.prompt_len for r in batch)
    new_tokens = max(r.output_len for r in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # [batch, width] left-padded
    attention_mask = torch.zeros((len(batch), width), dtype=torch.long)  # [batch, width] 1 = real token
    for row, (r, prompt) in enumerate(zip(batch, prompts_of(batch))):
        input_ids[row, width - r.prompt_len :] = torch.tensor(prompt)
        attention_mask[row, width - r.prompt_len :] = 1
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    out = model.generate(  # type: ignore[operator]  # a causal LM's (GenerationMixin), not declared on PreTrainedModel
        input_ids=input_ids.to(device),
        attention_mask=attention_mask.to(device),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=pad_id,
        **sampling,
    )  # [batch, width + new_tokens]
    if out.shape[1] != width + new_tokens:
        raise RuntimeError(f"generate made {out.shape[1] - width} tokens per row, expected {new_tokens}")
    return len(batch) * new_tokens


def _pad_token_id(model: "PreTrainedModel") -> int:
    pad = model.config.pad_token_id
    if pad is None:
        pad = model.config.eos_token_id
    if isinstance(pad, list):  # several EOS ids (Llama 3): any one pads
        pad = pad[0] if pad else None
    return pad if pad is not None else 0
