"""The plane a preview shows, downsampled to at most ``rows x cols`` cells by block
means, for a heatmap (numpy only).

The plane is ``R x C`` (a 1-d one is one row of ``C``; see
:func:`~._selection.plane_of`). ``h = min(rows, R)`` by ``w = min(cols, C)`` cells are
made: cell ``(i, j)`` is the mean of the finite values at the rows ``r`` with
``r * h // R == i`` and the columns ``c`` with ``c * w // C == j`` (blocks of ``R / h`` by
``C / w`` values, rounded down or up), NaN where a block holds no finite value. Values
are those of the statistics: complex leaves by magnitude, booleans as 0 and 1 (a cell is
the fraction of ``True``). The plane is read in blocks of at most
:data:`~._stats.CHUNK` values, so memory stays bounded (each through ``read``: a remote
leaf's rows by byte ranges).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._json import finite_or_none
from ._preview_ranged import RangedView
from ._stats import CHUNK, Read, as_read
from ._stats import read_view as _read


def heatmap(
    plane: Any,
    rows: int,
    cols: int,
    check: Callable[[], None] = lambda: None,
    read: Read = _read,
    decode: Callable[[np.ndarray], np.ndarray] = as_read,
) -> dict[str, Any] | None:
    """``{cells, of, min, max}``: the ``float32 [h, w]`` cells of the plane (see the
    module docstring), its ``[R, C]`` and the finite range of the cells (None when none
    is finite). None for a 0-d plane or an empty one.

    Examples
    --------
    >>> out = heatmap(np.arange(12.0).reshape(4, 3), 2, 2)
    >>> out["cells"].tolist(), out["of"]
    ([[2.0, 3.5], [8.0, 9.5]], [4, 3])
    """
    if len(plane.shape) == 0:
        return None
    if len(plane.shape) == 1:
        plane = plane[None, :] if isinstance(plane, np.ndarray) else _one_row(plane)
    n_rows, n_cols = plane.shape
    if n_rows == 0 or n_cols == 0:
        return None
    h, w = min(rows, n_rows), min(cols, n_cols)
    sums = np.zeros((h, w), dtype=np.float64)
    counts = np.zeros((h, w), dtype=np.float64)
    step = max(1, CHUNK // n_cols)
    piece = min(n_cols, CHUNK)
    for i in range(h):
        first, last = -(-i * n_rows // h), -(-(i + 1) * n_rows // h)
        for start in range(first, last, step):
            for c0 in range(0, n_cols, piece):  # a row longer than a chunk: in pieces
                check()
                block = plane[start : min(start + step, last), c0 : c0 + piece]
                values = np.asarray(decode(read(block)), dtype=np.float64)
                finite = np.isfinite(values)
                group = (np.arange(c0, c0 + values.shape[1], dtype=np.int64) * w) // n_cols
                sums[i] += np.bincount(group, np.where(finite, values, 0.0).sum(0), minlength=w)
                counts[i] += np.bincount(group, finite.sum(0), minlength=w)
    with np.errstate(invalid="ignore", divide="ignore"):
        cells = (sums / counts).astype(np.float32)  # 0 / 0: NaN, a block with no finite value
    finite_cells = cells[np.isfinite(cells)]
    return {
        "cells": cells,
        "of": [n_rows, n_cols],
        "min": finite_or_none(float(finite_cells.min())) if finite_cells.size else None,
        "max": finite_or_none(float(finite_cells.max())) if finite_cells.size else None,
    }


def _one_row(view: Any) -> Any:
    """A 1-d ranged view as a plane of one row."""
    return RangedView(view.leaf, view.offset, (1, *view.shape), (0, *view.strides))
