"""`--plot OUT.png` of the benchmarks, with matplotlib: throughput against the peers (throughput),
latency CDFs (latency), where a step's time goes (profile).

Every bar, dot and curve is a number of the result the benchmark prints (and writes with --json).
"""

import textwrap
from typing import Any

import numpy as np

PEER_COLOR, OURS_COLOR = "#8c8c8c", "#2f7ed8"  # bars of the peers, of our engine's modes
DPI = 120
SUMMARY_WIDTH = 100  # characters per line of the printed summary, in the title


def save_plot(draw, result: Any, path: str) -> None:
    """Draw `result` with `draw` (throughput_figure, latency_figure or profile_figure) into the PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file
    import matplotlib.pyplot as plt

    fig = draw(plt, result)
    fig.suptitle(
        "\n".join([f"enginetui bench · {result.model}", *textwrap.wrap(result.summary, SUMMARY_WIDTH)]), fontsize=8
    )
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"plot written to {path}")


def throughput_figure(plt, result):
    """Output tokens/s: a bar per mode and peer (its best pass), a dot per pass (the spread)."""
    bars: list[tuple[str, float, list[float], str]] = []  # (label, best, every pass, colour)
    for label, best in result.best.items():
        passes = [r.output_tokens_per_s for r in result.runs if r.label == label]
        bars.append((f"enginetui {label}", best.output_tokens_per_s, passes, OURS_COLOR))
    for label, best in result.vllm_best.items():
        passes = [r.output_tokens_per_s for r in result.vllm_runs if r.label == label]
        bars.append((label, best.output_tokens_per_s, passes, PEER_COLOR))
    if result.hf_best is not None:
        bars.append(
            (
                f"hf generate (batch {result.hf_best.batch_size})",
                result.hf_best.output_tokens_per_s,
                [r.output_tokens_per_s for r in result.hf_runs],
                PEER_COLOR,
            )
        )
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(bars) + 1.5))
    y = np.arange(len(bars))
    ax.barh(y, [b[1] for b in bars], color=[b[3] for b in bars])
    for i, (_, best, passes, _) in enumerate(bars):
        ax.scatter(passes, [i] * len(passes), color="black", s=10, zorder=3)
        ax.annotate(f"{best:,.0f}", (best, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, [b[0] for b in bars])
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s (bar: best pass, dots: every pass)")
    ax.set_title("offline throughput, same prompts and weights", fontsize=10)
    return fig


def latency_figure(plt, result):
    """CDFs of TTFT, time per output token and end-to-end latency, a curve per engine and load."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, field, title in zip(
        axes, ("ttft_ms", "tpot_ms", "e2e_ms"), ("time to first token", "time per output token", "end to end")
    ):
        for run in result.runs:
            samples = np.sort(np.asarray(getattr(run, field).samples))
            if samples.size:
                ax.step(samples, np.arange(1, samples.size + 1) / samples.size, where="post", label=run.label)
        ax.set_xlabel("ms")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of requests")
    axes[-1].legend(fontsize=8)
    return fig


def profile_figure(plt, result):
    """A stacked bar per batch size: the mean ms of each stage of a decode step."""
    fig, ax = plt.subplots(figsize=(9, 0.7 * len(result.rows) + 2.2))
    stages = list(dict.fromkeys(stage for row in result.rows for stage in row.stage_ms))
    y = np.arange(len(result.rows))
    left = np.zeros(len(result.rows))
    for stage in stages:
        widths = np.array([row.stage_ms.get(stage, 0.0) for row in result.rows])
        ax.barh(y, widths, left=left, label=stage)
        left += widths
    ax.set_yticks(y, [f"{row.batch_size} running" for row in result.rows])
    ax.set_xlabel("ms per decode step")
    ax.set_title("where a decode step's time goes", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
