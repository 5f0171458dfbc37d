"""`enginetui simulate`: the engine's own scheduler and KV cache manager at any scale, on a simulated
clock (a roofline or a fitted step-time model, or a recorded run's own step times).

    from enginetui.simulate import simulate
    result = simulate(model="llama-3.1-8b", hardware="h200", num_prompts=100, request_rate=10)

Names are imported when first used, so importing the package (the CLI's parser does) costs nothing.
"""

__all__ = ["simulate", "SimSettings", "SimResult", "format_summary"]


def __getattr__(name: str):
    if name in ("simulate", "SimSettings", "SimResult"):
        from enginetui.simulate import api

        return getattr(api, name)
    if name == "format_summary":
        from enginetui.simulate.report import format_summary

        return format_summary
    raise AttributeError(f"module 'enginetui.simulate' has no attribute {name!r}")
