"""MLPs over long batches run a slice of rows at a time on CPU, with the same result."""

import torch

from enginetui.core.models.layers import row_chunks
from enginetui.core.models.layers.row_chunks import CHUNK_ROWS, MIN_ROWS, by_row_chunks


def test_long_batches_run_in_slices_short_ones_at_once():
    seen: list[int] = []

    def fn(x):
        seen.append(x.shape[0])
        return x * 2

    x = torch.randn(MIN_ROWS + 5, 3)
    torch.testing.assert_close(by_row_chunks(fn, x), x * 2)
    assert seen == [CHUNK_ROWS] * (MIN_ROWS // CHUNK_ROWS) + [5]
    seen.clear()
    by_row_chunks(fn, x[: MIN_ROWS - 1])
    assert seen == [MIN_ROWS - 1]


def test_an_mlp_in_slices_equals_it_at_once(monkeypatch):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    x = torch.randn(40, 16)
    monkeypatch.setattr(row_chunks, "CHUNK_ROWS", 8)
    monkeypatch.setattr(row_chunks, "MIN_ROWS", 16)
    with torch.no_grad():
        torch.testing.assert_close(by_row_chunks(mlp, x), mlp(x), rtol=1e-5, atol=1e-6)
