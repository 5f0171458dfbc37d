"""The progress bar of a long simulation (tqdm on stderr), fed with the count of ended requests."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(total: int, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    """Yields `update(ended)` (None when disabled)."""
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, unit="req", desc="simulating", smoothing=0.1, mininterval=0.25)

    def update(ended: int) -> None:
        bar.update(ended - bar.n)

    try:
        yield update
    finally:
        bar.close()
