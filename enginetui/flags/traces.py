"""The trace flags of `enginetui simulate` and `enginetui bench serve`: a trace file or a named one, the
window of it served, its time scale, and what happens to requests longer than the model's context.
Both commands read them into the same requests (enginetui/simulate/traces.py)."""

import argparse

TRACE_DATASETS = {"azure-conv": "azure-2023-conv.csv", "mooncake": "mooncake-conversation.jsonl"}  # --dataset names
OVER_CONTEXT_RULES = ("clip", "skip")  # what happens to a request longer than max_model_len
TRACE_DATASET_HELP = (
    "azure-conv and mooncake are real traces, read from $ENGINETUI_TRACES_DIR or shared/traces beside the checkout"
)


def add_trace_args(group: argparse._ArgumentGroup) -> None:
    """--trace, --trace-window, --time-scale and --over-context (--dataset is each command's own)."""
    group.add_argument(
        "--trace",
        metavar="FILE",
        help="serve a trace file (Azure or BurstGPT CSV, Mooncake JSON lines) with its own arrivals",
    )
    group.add_argument(
        "--trace-window",
        metavar="START:END",
        help="traces: serve the requests arriving in these seconds of the trace (e.g. 0:60)",
    )
    group.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="traces: arrivals X times as fast (2: twice the rate; default: 1)",
    )
    group.add_argument(
        "--over-context",
        default="clip",
        choices=OVER_CONTEXT_RULES,
        help="traces: a request longer than max_model_len is clipped to fit or skipped (default: clip)",
    )


def uses_trace(args: argparse.Namespace) -> bool:
    """Whether the flags name a trace (--trace FILE or --dataset azure-conv|mooncake)."""
    return bool(getattr(args, "trace", None)) or getattr(args, "dataset", None) in TRACE_DATASETS


def check_trace_args(args: argparse.Namespace) -> None:
    """The window and time scale need a trace: one line saying so otherwise."""
    if not uses_trace(args) and (args.trace_window or args.time_scale != 1.0):
        raise ValueError(
            "--trace-window and --time-scale apply to traces: give --trace FILE or --dataset azure-conv|mooncake"
        )
