"""Small, fast engine arguments for the EngineCore-process tests."""


def engine_args(model_dir: str, **overrides) -> dict:
    """Small, fast engine arguments for tests."""
    args = {
        "model": model_dir,
        "num_gpu_blocks_override": 64,
        "block_size": 16,
        "max_num_batched_tokens": 256,
        "max_num_seqs": 8,
        "device": "cpu",
        "seed": 0,
    }
    args.update(overrides)
    return args
