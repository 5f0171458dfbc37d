"""Decode graphs on CPU: the static buffers, the padding and the replay path, with EagerReplay standing in
for torch.cuda.CUDAGraph (core/worker/cuda_graphs.py); whether graphs are captured at all."""

import pytest
import torch

from enginetui.core.config import EngineConfig
from enginetui.core.sched.output import CachedRequestData, SchedulerOutput
from enginetui.core.worker.cuda_graphs import EagerReplay, graph_plan
from enginetui.core.worker.eager_replay_runner import EagerReplayRunner
from enginetui.core.worker.forward_context import set_forward_context
from tests.support.parity import engine_greedy, mixed_prompts
from tests.worker.tiny_runner import make_runner, new_req

EAGER_REPLAY_RUNNER = f"{EagerReplayRunner.__module__}:{EagerReplayRunner.__name__}"  # EngineConfig.model_runner


def decode_step(runner, n: int) -> SchedulerOutput:
    """n requests, each decoding its one token at a different position (after a prompt of 3 + 7i tokens)."""
    reqs = [new_req(f"r{i}", 4 + 7 * i, 3 + 7 * i, [2 * i + 1, 2 * i + 2, 2 * i + 3, 2 * i + 4]) for i in range(n)]
    return SchedulerOutput(
        scheduled_new_reqs=reqs,
        scheduled_cached_reqs=CachedRequestData(),
        num_scheduled_tokens={r.req_id: 1 for r in reqs},
        total_num_scheduled_tokens=n,
        finished_req_ids=set(),
        preempted_req_ids=set(),
    )


def filled_runner(device="cpu"):
    runner = make_runner(device=device)
    torch.manual_seed(0)
    for param in runner.model.parameters():
        param.data.normal_(0, 0.2)
    runner.kv_cache.normal_()  # the history every decode reads
    return runner


@pytest.mark.parametrize("n,size", [(3, 4), (1, 1), (5, 8)])
def test_padding_rows_change_no_real_row(n, size):
    """A batch of n decodes replayed at a captured size: the n rows' hidden states equal the unpadded
    forward's, and the KV cache gets the same writes (padding writes none, capturing neither)."""
    eager, graphed = filled_runner(), filled_runner()
    out = decode_step(eager, n)
    for runner in (eager, graphed):
        runner.update_states(out)
    inputs = eager.prepare_inputs(out)
    with torch.inference_mode(), set_forward_context(inputs.attn):
        expected = eager.model(inputs.input_ids, inputs.positions)  # [n, hidden]

    graphed.capture_cuda_graphs([1, 2, 4, 8], EagerReplay)
    assert graphed.graphs.size_for(n, n) == size
    with torch.inference_mode():
        got = graphed.graphs.run(inputs.input_ids, inputs.positions, inputs.attn, size)  # [n, hidden]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    # The real tokens' K/V land in their slots (equal up to the GEMMs' row blocking); no other slot changed.
    layers, _, blocks, block_size = eager.kv_cache.shape[:4]
    flat = [r.kv_cache.reshape(layers, 2, blocks * block_size, -1) for r in (graphed, eager)]
    real = inputs.attn.slot_mapping
    torch.testing.assert_close(flat[0][:, :, real], flat[1][:, :, real], rtol=1e-5, atol=1e-6)
    untouched = torch.ones(blocks * block_size, dtype=torch.bool)
    untouched[real] = False
    assert torch.equal(flat[0][:, :, untouched], flat[1][:, :, untouched])
    buffers = graphed.graphs.buffers
    assert buffers.slot_mapping[n:size].eq(-1).all() and buffers.seq_lens[n:size].eq(1).all()


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="captures torch.cuda.CUDAGraph: needs a CUDA device (kernels/gpu_session.sh checks graphs on one)",
)
def test_captured_cuda_graphs_replay_the_eager_forward():
    """On CUDA: real graphs (CudaGraph), one per size, replayed for batches padded up to them, give the
    eager forward's hidden states; replaying a smaller batch after a larger one re-pads its rows."""
    eager, graphed = filled_runner("cuda"), filled_runner("cuda")
    graphed.capture_cuda_graphs([1, 2, 4, 8])
    for n in (5, 3, 1):
        for runner in (eager, graphed):
            runner.batch.__init__(
                runner.batch.max_num_reqs, runner.batch.token_ids.shape[1], runner.batch.block_table.shape[1]
            )
            out = decode_step(runner, n)
            runner.update_states(out)
        inputs = eager.prepare_inputs(out)
        with torch.inference_mode(), set_forward_context(inputs.attn):
            expected = eager.model(inputs.input_ids, inputs.positions)  # [n, hidden]
        size = graphed.graphs.size_for(n, n)
        with torch.inference_mode():
            got = graphed.graphs.run(inputs.input_ids, inputs.positions, inputs.attn, size)  # [n, hidden]
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_a_smaller_batch_repads_rows_a_larger_one_filled():
    runner = filled_runner()
    runner.capture_cuda_graphs([8], EagerReplay)
    graphs = runner.graphs
    for n in (6, 2):
        runner.batch.__init__(
            runner.batch.max_num_reqs, runner.batch.token_ids.shape[1], runner.batch.block_table.shape[1]
        )
        out = decode_step(runner, n)
        runner.update_states(out)
        inputs = runner.prepare_inputs(out)
        with torch.inference_mode():
            graphs.run(inputs.input_ids, inputs.positions, inputs.attn, graphs.size_for(n, n))
        assert graphs.buffers.seq_lens[:n].tolist() == inputs.attn.seq_lens.tolist()
        assert graphs.buffers.slot_mapping[n:].eq(-1).all() and graphs.buffers.positions[n:].eq(0).all()


def test_only_uniform_decodes_within_the_largest_size_replay():
    runner = make_runner()
    runner.capture_cuda_graphs([1, 2, 4], EagerReplay)
    assert runner.graphs.sizes == [1, 2, 4]
    assert runner.graphs.size_for(3, 3) == 4
    assert runner.graphs.size_for(5, 5) is None  # past the largest: eager
    assert runner.graphs.size_for(6, 2) is None  # a prefill chunk in the step: eager
    with pytest.raises(ValueError, match="does not fit"):
        out = decode_step(runner, 3)
        runner.update_states(out)
        inputs = runner.prepare_inputs(out)
        runner.graphs.run(inputs.input_ids, inputs.positions, inputs.attn, 2)


def test_graphs_are_off_with_a_reason_where_they_cannot_run():
    cpu = torch.device("cpu")
    assert graph_plan(EngineConfig(device="cpu"), cpu, "cpp").off_reason.startswith("CUDA graphs need a CUDA device")
    assert graph_plan(EngineConfig(enforce_eager=True), cpu, "cpp").off_reason == "--enforce-eager"
    assert graph_plan(EngineConfig(), torch.device("cuda"), "torch").off_reason.startswith(
        "the torch attention backend"
    )


def test_engine_on_cpu_says_why_it_runs_eagerly():
    from enginetui.core.engine.core import EngineCore

    core = EngineCore(EngineConfig(device="cpu", num_gpu_blocks_override=16, max_model_len=64))
    info = core.describe(0)
    assert info.cuda_graph_sizes == [] and info.cuda_graphs_off.startswith("CUDA graphs need a CUDA device")
    assert info.cuda_graphs_text == ""  # a CPU engine's model panel shows nothing about graphs
    cuda_info = type(info)(
        **{
            **{f: getattr(info, f) for f in info.__struct_fields__},
            "device": "cuda:0",
            "cuda_graph_sizes": [1, 2, 4],
            "cuda_graph_capture_s": 1.25,
        }
    )
    assert cuda_info.cuda_graphs_text == "CUDA graphs 1-4 (3 sizes, captured in 1.2 s)"


def test_greedy_tokens_equal_with_and_without_replayed_graphs(tiny_opt_dir):
    """The whole engine, graphs replayed by EagerReplay: same tokens as eager steps; the step events say
    which steps replayed (decodes, padded 5 -> 8 and then smaller), and prompt steps did not."""
    prompts = mixed_prompts(5, 512, 1, 40)
    expected, _ = engine_greedy(tiny_opt_dir, prompts, 12, max_num_seqs=8)
    got, events = engine_greedy(tiny_opt_dir, prompts, 12, max_num_seqs=8, model_runner=EAGER_REPLAY_RUNNER)
    assert got == expected
    assert all(e.cuda_graph_size == 0 for e in events if e.num_prefill_tokens)
    decodes = [e for e in events if e.num_decode_tokens and not e.num_prefill_tokens]
    assert decodes and all(e.cuda_graph_size >= e.num_decode_tokens for e in decodes)
    assert {e.cuda_graph_size for e in decodes} >= {8}


HOST_READS = {"_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique", "repeat_interleave"}


@pytest.mark.parametrize("shape", ["opt", "llama-3.1-8b", "qwen3-8b"])
def test_the_captured_forward_reads_no_device_value_on_the_host(tmp_path, shape):
    """What a CUDA graph cannot capture: an op that reads a device tensor's value on the host (.item(),
    data-dependent shapes). The decode forward over the static buffers calls none, for each architecture
    the GPU session captures (scaled down; the attention kernels are launches without host reads)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoConfig

    from enginetui.core.models.known_configs import SHAPES
    from enginetui.core.models.loader import load_hf_config, load_model
    from enginetui.core.worker.model_runner import ModelRunner

    class HostReads(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.add(func.__name__.split(".")[0])
            return func(*args, **(kwargs or {}))

    if shape == "opt":
        runner = filled_runner()
    else:
        fields = dict(
            SHAPES[shape],
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            vocab_size=512,
            max_position_embeddings=256,
        )
        AutoConfig.for_model(fields.pop("model_type"), **fields).save_pretrained(tmp_path)
        config = EngineConfig(model=str(tmp_path), load_format="dummy", device="cpu", dtype="float32")
        hf_config, model_dir = load_hf_config(config)
        runner = ModelRunner(
            load_model(config, hf_config, model_dir),
            num_blocks=32,
            block_size=16,
            max_num_reqs=8,
            max_model_len=128,
            dtype=torch.float32,
            device=torch.device("cpu"),
            seed=0,
        )
    runner.capture_cuda_graphs([4], EagerReplay)
    out = decode_step(runner, 3)
    runner.update_states(out)
    inputs = runner.prepare_inputs(out)
    graph = runner.graphs.graphs[4]
    runner.graphs.buffers.load(inputs.input_ids, inputs.positions, inputs.attn, 4)
    with HostReads() as mode, torch.inference_mode():
        graph.forward()
    assert "linear" in mode.seen and not mode.seen & HOST_READS
