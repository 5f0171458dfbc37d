"""`bench ... --plot OUT.png`: each benchmark draws its own numbers (bars, CDFs, stacked stages)."""

import matplotlib
import pytest

from enginetui.bench import plot
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args

matplotlib.use("Agg")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def plotted(monkeypatch) -> list:
    """The result each `--plot` run drew, in order (plot.save_plot still draws and writes the file):
    the figures are checked against the very numbers the command plotted, without a second run."""
    results = []
    save_plot = plot.save_plot

    def save_and_keep(draw, result, path) -> None:
        results.append(result)
        save_plot(draw, result, path)

    monkeypatch.setattr(plot, "save_plot", save_and_keep)
    return results


@pytest.mark.slow
def test_throughput_bars_are_the_best_passes_and_the_dots_every_pass(tiny_opt_dir, tmp_path, capsys, plotted):
    path = tmp_path / "tp.png"
    args = bench_args(
        "throughput", tiny_opt_dir, *SMALL_WORKLOAD, "--events", "on", "record", "--repeats", "2", "--plot", str(path)
    )
    assert args.func(args) == 0
    assert path.read_bytes().startswith(PNG_MAGIC) and f"plot written to {path}" in capsys.readouterr().out
    [result] = plotted
    assert [(r.events, r.repeat) for r in result.runs] == [("on", 0), ("record", 0), ("on", 1), ("record", 1)]
    import matplotlib.pyplot as plt

    fig = plot.throughput_figure(plt, result)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["enginetui on", "enginetui record"]
    assert [bar.get_width() for bar in ax.patches] == [result.best[m].output_tokens_per_s for m in ("on", "record")]
    plt.close(fig)


def test_latency_cdfs_step_through_every_request(tiny_opt_dir, tmp_path, monkeypatch, plotted):
    monkeypatch.setenv("ENGINETUI_MULTIPROC", "0")
    path = tmp_path / "lat.png"
    args = bench_args("latency", tiny_opt_dir, *SMALL_WORKLOAD, "--request-rate", "50", "--plot", str(path))
    assert args.func(args) == 0
    assert path.read_bytes().startswith(PNG_MAGIC)
    [result] = plotted
    import matplotlib.pyplot as plt

    fig = plot.latency_figure(plt, result)
    ttft = fig.axes[0].lines[0]
    assert list(ttft.get_xdata()) == result.runs[0].ttft_ms.samples and len(ttft.get_xdata()) == 5
    assert list(ttft.get_ydata()) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert result.runs[0].itl_ms.samples == [] and result.runs[0].itl_ms.count > 0  # not kept: one per token
    plt.close(fig)


def test_profile_stacks_each_stage_of_a_step(tiny_opt_dir, tmp_path, plotted):
    path = tmp_path / "prof.png"
    args = bench_args(
        "profile",
        tiny_opt_dir,
        "--batch-sizes",
        "1",
        "4",
        "--input-len",
        "40",
        "--warmup-steps",
        "1",
        "--steps",
        "3",
        "--max-num-batched-tokens",
        "64",
        "--plot",
        str(path),
    )
    assert args.func(args) == 0
    assert path.read_bytes().startswith(PNG_MAGIC)
    [result] = plotted
    assert [row.batch_size for row in result.rows] == [1, 4]
    import matplotlib.pyplot as plt

    fig = plot.profile_figure(plt, result)
    widths = [bar.get_width() for bar in fig.axes[0].patches]  # stage by stage, a bar per batch size in each
    for row, bars in zip(result.rows, (widths[0::2], widths[1::2]), strict=True):
        assert bars == pytest.approx(list(row.stage_ms.values()))  # a stacked bar's width: right edge - left
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["1 running", "4 running"]
    plt.close(fig)
