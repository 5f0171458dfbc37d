"""simulate's summary names what was simulated: the model, every rate a sweep ran (in its header and the
plot's title), and a shared-prefix run's prefix-cache hit rate."""

from enginetui.simulate import SimSettings, simulate
from enginetui.simulate.report import describe_setup, format_summary
from enginetui.simulate.sweep import parse_sweep, run_sweep, sweep_title


def test_the_summary_names_the_model_and_the_hit_rate():
    result = simulate(
        model="qwen3-8b",
        hardware="h100",
        dataset="shared-prefix",
        num_prompts=40,
        num_prefixes=2,
        prefix_len=256,
        input_len=64,
        output_len=8,
        enable_prefix_caching=True,
    )
    text = format_summary(result)
    assert "model         qwen3-8b, bf16 weights, on h100\n" in text
    m = result.summary
    # 40 prompts of 2 prefixes: all but the first of each find the 256-token prefix (16 blocks) cached
    assert m.prefix_hits == 38 * 256 and m.prefix_queries == sum(r.prompt_len for r in result.run.requests)
    assert f"prefix cache  {m.prefix_hits / m.prefix_queries:.1%} hit rate ({m.prefix_hits} of " in text
    off = format_summary(simulate(dataset="shared-prefix", num_prompts=4, input_len=16, output_len=4))
    assert "prefix cache  off: the shared prefixes are computed again" in off


def test_a_sweeps_header_and_plot_title_name_every_rate_and_the_model():
    sweep = parse_sweep("request_rate=2,4,8,16")
    results = run_sweep(sweep, SimSettings(num_prompts=20, input_len=64, output_len=8), {})
    header = "\n".join(describe_setup(results[0], sweep))
    assert "random, 20 prompts, at 2, 4, 8, 16 req/s, seed 0" in header
    assert "sweep         request_rate = 2, 4, 8, 16" in header
    assert sweep_title(sweep, results) == "enginetui simulate: llama-3.1-8b on roofline h200, sweep of request_rate"
