"""A 2-D view of a leaf (or of its selection) downsampled to at most ``rows x cols``
cells by block means, for a heatmap.

The table is the selection with dim 0 as rows and the other dims flattened in C order as
columns (a 1-d selection is one row). Of an ``R x C`` table, ``h = min(rows, R)`` by
``w = min(cols, C)`` cells are made: cell ``(i, j)`` is the mean of the finite values at
the rows ``r`` with ``r * h // R == i`` and the columns ``c`` with ``c * w // C == j``
(blocks of ``R / h`` by ``C / w`` values, rounded down or up), NaN where a block holds no
finite value. Values are those of the statistics: complex leaves by magnitude, booleans
as 0 and 1 (a cell is the fraction of ``True``). The table is read in chunks of at most
:data:`~._stats.CHUNK` values, so memory stays bounded (each chunk through ``read``: a
remote leaf's rows by byte ranges).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ._json import finite_or_none
from ._stats import CHUNK, Read, _values64, as_is


def _block(tensor: torch.Tensor, start: int, stop: int, read: Read) -> torch.Tensor:
    """Rows ``start:stop`` of the table of ``tensor``, ``[n, C]`` in its own dtype (a
    view where its layout allows; else read first: the reshape copies, and a copy of a
    ``meta`` view has no place in the leaf left to read)."""
    if tensor.dim() == 1:
        return tensor.reshape(1, -1)[start:stop]
    block = tensor[start:stop]
    shape = (block.shape[0], math.prod(block.shape[1:]))
    try:
        return block.view(shape)
    except RuntimeError:
        return read(block).reshape(shape)


def heatmap(
    tensor: torch.Tensor,
    rows: int,
    cols: int,
    check: Callable[[], None] = lambda: None,
    read: Read = as_is,
) -> dict[str, Any] | None:
    """``{cells, of, min, max}``: the ``float32 [h, w]`` cells of ``tensor``'s table
    (see the module docstring), the table's ``[R, C]`` and the finite range of the cells
    (None when none is finite). None for a 0-d tensor or an empty table.

    Examples
    --------
    >>> out = heatmap(torch.arange(12.0).reshape(4, 3), 2, 2)
    >>> out["cells"].tolist(), out["of"]
    ([[2.0, 3.5], [8.0, 9.5]], [4, 3])
    """
    if tensor.dim() == 0:
        return None
    n_rows = tensor.shape[0] if tensor.dim() > 1 else 1
    n_cols = math.prod(tensor.shape[1:]) if tensor.dim() > 1 else tensor.shape[0]
    if n_rows == 0 or n_cols == 0:
        return None
    h, w = min(rows, n_rows), min(cols, n_cols)
    group = (torch.arange(n_cols, dtype=torch.int64) * w) // n_cols
    sums = torch.zeros(h, w, dtype=torch.float64)
    counts = torch.zeros(h, w, dtype=torch.float64)
    step = max(1, CHUNK // n_cols)
    for i in range(h):
        first, last = -(-i * n_rows // h), -(-(i + 1) * n_rows // h)
        for start in range(first, last, step):
            check()
            block = _block(tensor, start, min(start + step, last), read)
            for c0 in range(0, n_cols, CHUNK):  # a row longer than a chunk: in pieces
                part = _values64(read(block[:, c0 : c0 + CHUNK]))
                finite = part.isfinite()
                sums[i].index_add_(0, group[c0 : c0 + CHUNK], torch.where(finite, part, 0.0).sum(0))
                counts[i].index_add_(0, group[c0 : c0 + CHUNK], finite.sum(0).to(torch.float64))
    cells = (sums / counts).to(torch.float32)  # 0 / 0: NaN, a block with no finite value
    finite = cells[cells.isfinite()]
    return {
        "cells": cells,
        "of": [n_rows, n_cols],
        "min": finite_or_none(float(finite.min())) if finite.numel() else None,
        "max": finite_or_none(float(finite.max())) if finite.numel() else None,
    }
