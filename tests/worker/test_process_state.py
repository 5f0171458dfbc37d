"""No process-wide state in the engine's forward: the forward context is the running thread's, the
attention backend is chosen once per engine (the C++ kernels built then, before it is ready), and
loading a model never changes torch's default dtype."""

import threading

import torch

from enginetui.core import LLM, SamplingParams
from enginetui.core.worker.forward_context import AttentionMetadata, get_forward_context, set_forward_context
from enginetui.kernels import cpu_kernels
from enginetui.kernels.dispatch import BACKEND_ENV


def metadata(n: int) -> AttentionMetadata:
    t = torch.zeros(n, dtype=torch.int32)  # [n]
    return AttentionMetadata(slot_mapping=t.long(), query_start_loc=t, seq_lens=t, block_table=t.view(1, n))


def test_each_thread_sees_only_its_own_forward_context():
    inside = threading.Barrier(2)  # both threads hold their context at once
    seen = {}

    def run(n: int) -> None:
        with set_forward_context(metadata(n)):
            inside.wait(timeout=10)
            seen[n] = get_forward_context().slot_mapping.numel()
            inside.wait(timeout=10)
        try:
            get_forward_context()
        except RuntimeError:
            seen[-n] = "none after"

    threads = [threading.Thread(target=run, args=(n,)) for n in (3, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert seen == {3: 3, 5: 5, -3: "none after", -5: "none after"}


def test_the_engine_chooses_its_attention_backend_once_when_it_starts(tiny_opt_dir, monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    llm = LLM(
        model=tiny_opt_dir, multiprocess=False, skip_tokenizer_init=True, num_gpu_blocks_override=16, device="cpu"
    )
    try:
        runner = llm.engine.client.core.runner
        assert runner.attention_backend == "cpp" and cpu_kernels.available()  # built (or loaded) before ready
        monkeypatch.setenv(BACKEND_ENV, "no-such-backend")  # read per call, this would fail every step
        out = llm.generate([[2, 7, 8]], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True), use_tqdm=False)
        assert out[0].outputs[0].finish_reason == "length"
    finally:
        llm.shutdown()
    assert torch.get_default_dtype() == torch.float32
