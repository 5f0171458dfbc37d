"""Capture sizes and padding of decode CUDA graphs: vLLM's documented rule, and vLLM's own code when it is at hand."""

import json
import subprocess
from pathlib import Path

import pytest

from enginetui.core.config import ConfigError, EngineConfig
from enginetui.core.worker.graph_sizes import capture_sizes, padded_size
from tests.support.vllm_marks import REAL_VLLM, needs_real_vllm

VLLM_DEFAULT = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))  # vLLM's docstring, max 512


def test_default_sizes_are_vllms_documented_list():
    assert capture_sizes(256, 2048) == VLLM_DEFAULT
    assert capture_sizes(1024, 8192, blackwell=True) == VLLM_DEFAULT + list(range(528, 1025, 16))
    # min(2 x max_num_seqs, 512) caps the list; max_num_seqs itself is appended where it fits.
    assert capture_sizes(5, 2048) == [1, 2, 4, 5, 8]
    assert capture_sizes(100, 2048) == sorted([1, 2, 4] + list(range(8, 201, 8)) + [100])
    # The step budget caps it too, and is captured itself.
    assert capture_sizes(256, 100) == [1, 2, 4] + list(range(8, 97, 8)) + [100]


def test_given_sizes_and_maximum():
    assert capture_sizes(256, 2048, sizes=[3, 1, 8, 8, 4096]) == [1, 3, 8]  # deduplicated, cut at the step budget
    assert capture_sizes(256, 2048, max_size=100) == [1, 2, 4] + list(range(8, 97, 8))  # no max_num_seqs appended
    assert capture_sizes(256, 4, sizes=[8, 16]) == []


def test_padding_takes_the_next_captured_size():
    sizes = [1, 2, 4, 8, 16, 24]
    assert [padded_size(n, sizes) for n in range(1, 26)] == ([1, 2, 4, 4] + [8] * 4 + [16] * 8 + [24] * 8 + [None])


def test_inconsistent_flags_are_refused_by_name():
    with pytest.raises(ConfigError, match="max_cudagraph_capture_size .8. must equal .* .4.") as exc:
        EngineConfig(cudagraph_capture_sizes=[1, 2, 4], max_cudagraph_capture_size=8)
    assert exc.value.field == "max_cudagraph_capture_size"
    EngineConfig(cudagraph_capture_sizes=[1, 2, 4, 9000], max_cudagraph_capture_size=4)  # 9000 > the step budget
    for bad in ([], [0, 2], ["4"], 4):
        with pytest.raises(ConfigError, match="cudagraph_capture_sizes must be"):
            EngineConfig(cudagraph_capture_sizes=bad)
    with pytest.raises(ConfigError, match="enforce_eager"):
        EngineConfig(enforce_eager="yes")


def test_flags_reach_the_config():
    import argparse

    from enginetui.flags.engine import add_engine_args, engine_args, flag_problem

    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    args = parser.parse_args(["--enforce-eager", "--cudagraph-capture-sizes", "1", "2", "8"])
    kwargs = engine_args(args)
    assert kwargs["enforce_eager"] is True and kwargs["cudagraph_capture_sizes"] == [1, 2, 8]
    assert EngineConfig(**kwargs).cudagraph_capture_sizes == [1, 2, 8]
    bad = parser.parse_args(["--cudagraph-capture-sizes", "1", "2", "--max-cudagraph-capture-size", "4"])
    assert flag_problem(bad).startswith("argument --max-cudagraph-capture-size: ")


# vLLM's own rule, called in its interpreter without a GPU: VllmConfig._set_cudagraph_sizes and
# CudagraphDispatcher._compute_bs_to_padded_graph_size on stand-ins for the configs they read.
VLLM_SCRIPT = r"""
import json, sys
from types import SimpleNamespace
from vllm.config import VllmConfig, CompilationConfig, CUDAGraphMode
from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher
results = []
for seqs, tokens, sizes, max_size in json.loads(sys.argv[1]):
    kw = {k: v for k, v in (("cudagraph_capture_sizes", sizes), ("max_cudagraph_capture_size", max_size)) if v is not None}
    cc = CompilationConfig(**kw)
    cc.cudagraph_mode = CUDAGraphMode.FULL
    VllmConfig._set_cudagraph_sizes(SimpleNamespace(
        model_config=SimpleNamespace(enforce_eager=False), compilation_config=cc,
        scheduler_config=SimpleNamespace(max_num_seqs=seqs, max_num_batched_tokens=tokens),
        uniform_decode_query_len=1, performance_mode="balanced", speculative_config=None, num_speculative_tokens=0))
    dispatcher = SimpleNamespace(compilation_config=cc, cudagraph_mode=CUDAGraphMode.NONE)
    padding = []
    if cc.cudagraph_capture_sizes:
        CudagraphDispatcher._compute_bs_to_padded_graph_size(dispatcher)
        padding = dispatcher._bs_to_padded_graph_size
    results.append([cc.cudagraph_capture_sizes, padding])
print(json.dumps(results))
"""
CASES = [
    (256, 2048, None, None),
    (5, 2048, None, None),
    (100, 2048, None, None),
    (256, 100, None, None),
    (1, 1, None, None),
    (512, 8192, None, None),
    (300, 600, None, None),
    (256, 2048, [3, 1, 8, 8, 4096], None),
    (256, 2048, None, 100),
    (256, 2048, None, 1000),
    (64, 2048, [1, 2, 4, 64], 64),
    (256, 4, [8, 16], None),
]


@pytest.mark.slow  # vLLM's import takes seconds
@needs_real_vllm
def test_sizes_and_padding_equal_vllms_own():
    done = subprocess.run(
        [REAL_VLLM, "-c", VLLM_SCRIPT, json.dumps(CASES)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    for (seqs, tokens, sizes, max_size), (their_sizes, their_padding) in zip(CASES, theirs):
        ours = capture_sizes(seqs, tokens, sizes, max_size)
        assert ours == their_sizes, (seqs, tokens, sizes, max_size)
        assert [padded_size(n, ours) for n in range(1, len(their_padding))] == their_padding[1:]
