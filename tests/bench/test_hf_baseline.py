"""The transformers baseline: static batches run to their longest request; only useful tokens count."""

import torch

from enginetui.bench.engines import shared_weights
from enginetui.bench.hf_baseline import load_hf_model, run_hf
from enginetui.core import LLM
from enginetui.simulate.workload import SimRequest


def req(prompt: list[int], output_len: int) -> SimRequest:
    return SimRequest(f"r{len(prompt)}-{output_len}", 0.0, len(prompt), output_len, prompt_token_ids=prompt)


def test_static_batches_generate_to_the_longest_request_but_count_only_useful_tokens(tiny_opt_dir):
    model = load_hf_model(tiny_opt_dir, "float32", "cpu")
    workload = [req([5, 6, 7], 2), req([8] * 10, 5), req([9, 10], 3)]
    run = run_hf(model, workload, batch_size=2)
    assert run.num_batches == 2  # [2 prompts], [1 prompt]
    assert run.output_tokens == 2 + 5 + 3  # each request's own length
    assert run.generated_tokens == 2 * 5 + 1 * 3  # what generate computed: rows x the batch's longest
    assert run.prompt_tokens == 15 and run.num_requests == 3
    assert run.output_tokens_per_s == run.output_tokens / run.elapsed_s


def test_dummy_weights_are_identical_in_both_engines_by_construction(tiny_opt_dir):
    kwargs = {
        "model": tiny_opt_dir,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "seed": 3,
        "num_gpu_blocks_override": 16,
    }
    with shared_weights(kwargs) as (engine_kwargs, hf_dir):
        assert engine_kwargs["load_format"] == "auto" and engine_kwargs["model"] == str(hf_dir)
        hf = load_hf_model(hf_dir, "float32", "cpu")
        llm = LLM(**engine_kwargs, multiprocess=False)
        try:
            ours = dict(llm.engine.client.core.runner.model.named_parameters())
            embed = next(v for k, v in ours.items() if k.endswith("embed_tokens.weight"))
            assert torch.equal(embed, hf.get_input_embeddings().weight)
            fc1 = next(v for k, v in ours.items() if k.endswith("layers.1.fc1.weight"))
            assert torch.equal(fc1, hf.model.decoder.layers[1].fc1.weight)
        finally:
            llm.shutdown()
        original = load_hf_model(tiny_opt_dir, "float32", "cpu")
        assert not torch.equal(original.get_input_embeddings().weight, hf.get_input_embeddings().weight)
    assert not hf_dir.exists()  # the temporary checkpoint is gone


def test_real_weights_are_the_model_directory_itself(tiny_opt_dir):
    kwargs = {"model": tiny_opt_dir}
    with shared_weights(kwargs) as (engine_kwargs, hf_dir):
        assert engine_kwargs is kwargs and str(hf_dir) == tiny_opt_dir


def test_a_model_with_several_eos_ids_and_no_pad_runs(tmp_path):
    """Llama 3's config: no pad id and a list of EOS ids; the baseline pads with the first EOS."""
    from tests.models.families import make_family_dir

    d = make_family_dir(tmp_path, "llama", seed=2, pad_token_id=None, eos_token_id=[3, 7])
    model = load_hf_model(d, "float32", "cpu")
    run = run_hf(model, [req([5, 6, 7], 2), req([8] * 4, 3)], batch_size=2)
    assert run.output_tokens == 5
