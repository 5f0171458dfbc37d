"""What kind of work a profiled operator does, by its name: the one rule `bench ops` sorts both
engines' operators by (the torch profiler's names: `aten::addmm`, `enginetui_cpu::paged_attention`,
vLLM's `_C::onednn_mm`, `_C::cpu_attention_with_kv_cache`, `## Call CompiledFxGraph ... ##`).

Kinds are tried in order; the first whose words the lower-cased name contains wins, so a KV write
(`reshape_and_cache`, `kv_cache_update`) is never taken for attention, and an operator no kind names
is "other ops" (views, copies, layer norms and adds run one by one).
"""

KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kv write", ("reshape_and_cache", "kv_cache_update")),  # new keys and values into the paged cache
    ("attention", ("attention",)),  # paged attention over the cache (and vLLM's custom-op wrapper around it)
    ("gemm", ("linear", "addmm", "onednn_mm", "aten::mm", "aten::bmm", "matmul")),  # the projections and lm_head
    (
        "sampling",
        (
            "gumbel",
            "argmax",
            "softmax",
            "searchsorted",
            "cumsum",
            "uniform",
            "exponential",
            "multinomial",
            "topk",
            "aten::sort",
        ),
    ),  # logits to tokens
    ("compiled", ("compiled", "graph", "bytecode", "aotdispatcher")),  # torch.compile'd regions (fused elementwise)
)
OTHER = "other ops"  # every operator no kind names
OUTSIDE = "outside ops"  # step time in no operator: Python (scheduling, bookkeeping) and the framework
ORDER = (*(kind for kind, _ in KINDS), OTHER, OUTSIDE)  # how the kinds are listed


def kind_of(op_name: str) -> str:
    """The kind of work of a profiled operator (see the module docstring)."""
    name = op_name.lower()
    for kind, words in KINDS:
        if any(word in name for word in words):
            return kind
    return OTHER


def ms_per_kind(ops: dict[str, tuple[float, int]], steps: int, step_ms: float) -> dict[str, float]:
    """Milliseconds per step of each kind, from {op name: (self time in microseconds over all the profiled
    steps, calls)}; `step_ms` is the profiled steps' mean wall time, and what the operators leave of it is
    OUTSIDE (never below 0)."""
    totals = dict.fromkeys(ORDER, 0.0)
    for name, (self_us, _) in ops.items():
        totals[kind_of(name)] += self_us / 1e3 / steps
    totals[OUTSIDE] = max(0.0, step_ms - sum(totals.values()))
    return totals
