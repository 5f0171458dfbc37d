"""Process-level settings that make the CPU path fast.

Every step allocates large short-lived tensors (padded attention batches, logits). glibc hands
big allocations to mmap and gives freed heap back to the OS, so each step pays page faults on
fresh memory. Keeping allocations on the heap and never trimming it removes most of that cost
(the torch reference attention at 64 decodes: about 6x faster).
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # glibc mallopt parameter: heap top kept before trimming back to the OS
M_MMAP_MAX = -4  # glibc mallopt parameter: most allocations served by mmap at once
KEEP_HEAP_BYTES = 1 << 30  # keep up to 1 GiB of freed heap for reuse


def tune_cpu_allocator() -> bool:
    """Serve every allocation from the reusable heap. Returns False where glibc is not available."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEEP_HEAP_BYTES))
    except (OSError, AttributeError):
        return False
