"""How the EngineCore child's C allocator (glibc malloc) keeps memory it has freed.

A CPU step allocates and frees tensors of megabytes (logits of 64 rows x 50,272 entries: 12.9 MB,
the MLP's intermediates). By default glibc serves such blocks with fresh mmaps and gives freed
heap memory back to the kernel, so the next step touches new pages again: page faults and the
kernel zeroing them, every step. Measured with `enginetui bench profile` (opt-125m, 64 running,
temperature 1): a decode step took 98.5-99.3 ms, 89.8-90.8 with both settings below (forward
90 -> 85 ms, sampling 7.7 -> 4.1 ms); either one alone gained nothing. The price is that the
child keeps the peak of its heap (it holds the KV cache and weights anyway).

`malloc_env()` is merged into the child's environment by core/worker/cpu_threads.engine_process_env
(glibc reads these when the process starts); a value the user set is kept.
"""

import os

MMAP_THRESHOLD = 32 * 1024 * 1024  # blocks below this come from the heap (glibc's upper limit)
TRIM_THRESHOLD = 4 * 1024**3  # free memory at the heap's top kept before any is given back


def malloc_env() -> dict[str, str]:
    """glibc's malloc settings for the EngineCore child, less those the user already set."""
    wanted = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
    return {name: value for name, value in wanted.items() if name not in os.environ}
