"""The ``preview`` method: what an index selects of one leaf, its statistics and
histogram, a table of it and, when asked, a heatmap; numpy on the leaf's bytes, never
torch or tensordict (:mod:`._preview_source`).

What is sent for each dtype (``display_dtype``):

- float32, float64, the integer dtypes: as they are;
- bfloat16, float16 and the float8 dtypes: converted to float32;
- complex dtypes: their magnitude ``|z|`` (float32, float64 for complex128): table,
  statistics, histogram and heatmap all describe the magnitude;
- bool: one byte per element (0/1), buffer dtype ``"bool"``;
- the others (float4, quantized, bit and sub-byte dtypes): not previewed (an error).

**The selection.** ``index`` (an expression such as ``[50000:50020, :8]`` or ``[..., 0]``,
see :mod:`._selection`) picks what the preview describes, per dim: the statistics, the
histogram and the heatmap are of the selection, never of more. Indexing a mapped leaf is
a view: only the pages of what is read are read. A leaf of a remote checkpoint stored as
it is (a folder's file, a STORED archive entry) is read by the byte ranges of what is
read (:mod:`._preview_ranged`: adjacent rows are one ranged read). The reply's
``selection`` says what was picked, clipped to the leaf: ``{index, dims: [{start, stop,
step, kept}], shape}`` (``index`` written back canonically, one dim per dim of the leaf,
``kept`` false for a dim an integer dropped, ``shape`` the selection's).

**The plane** (``plane`` param and reply, :func:`~._selection.plane_of`): the two dims of
the selection that the table and the heatmap show as rows and columns (H5Web's dimension
mapper), and one position of each other dim it keeps; by default its last two dims. A
conv weight ``[64, 3, 7, 7]`` shows the 7 x 7 kernel of ``[0, 0]`` (its statistics are of
all 9,408 values), never columns of flattened dims.

**The table** (``slice``) is ``rows`` (at most 100) rows of the plane from its row
``offset``, and :data:`MAX_COLS` of its columns from ``col_offset``: a 0-d selection is
its single value, a 1-d one a column of values. Row ``i`` of the table is the leaf's index ``start +
(offset + i) * step`` in the plane's rows dim (``selection.dims``). A nested (ragged)
leaf is previewed as the concatenation of its flattened components (1-d; the reply's
``shape`` is then that of the concatenation).

**Statistics and histogram** (:mod:`._stats`) are of the selection, kept per leaf and
selection (the last 64 of each checkpoint): paging through a table reads its rows once,
and then only the rows shown. ``stats=False`` sends them only when they are known
already (else ``stats`` and ``histogram`` are null), so that a first page of a very large
leaf reads its rows alone. Statistics that mean nothing for a dtype are null
(``nan``/``inf`` of integers and booleans, ``mean``/``std`` of booleans); integers and
booleans with at most 64 distinct values have a bar per value (``histogram.values``).

**Heatmap** (``heatmap={"rows": N, "cols": M}``, each 1 to 1024): the plane downsampled
to at most N x M cells by block means (:mod:`._heatmap`), sent as a float32 buffer:
``{cells: BufferRef [h, w], of: [R, C], min, max}``; null when not asked or the plane is
0-d or empty.

Below a torchrl replay-buffer storage (:func:`tdview.index.rows_of_leaf`), selection,
statistics, histogram and heatmap cover the rows written (``rows_scope="written"``, the
default: the others hold zeros or uninitialised memory) or every row (``"all"``); the
reply's ``rows`` says ``{written, capacity, scope}`` then, and is None elsewhere.
``shape`` is always the leaf's own.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import LimitExceededError, PreviewUnsupportedError
from ..index import DECOMPRESS, Node, Tree, leaf_storage, rows_of_leaf
from ._heatmap import heatmap as heatmap_of
from ._load import host_memory
from ._preview_ranged import read
from ._preview_source import Display, display_of, leaf_values
from ._selection import Dim, Part, Plane, index_text, plane_of, select
from ._stats import BINS, CHUNK, statistics

__all__ = ["BINS", "CHUNK", "MAX_COLS", "preview", "statistics"]

MAX_COLS = 50
#: Selections whose statistics are kept, per checkpoint.
MAX_KEPT_STATS = 64

# Checkpoint -> (path, rows covered, selection) -> (stats, histogram): the statistics of
# the selections previewed last (a leaf changed on disk under an open checkpoint is
# stale here as its index is).
_KEPT: weakref.WeakKeyDictionary[Tree, OrderedDict[tuple, tuple]] = weakref.WeakKeyDictionary()


def _ref(values: np.ndarray, dtype: str, buffers: list[bytes]) -> dict[str, Any]:
    buffers.append(values.tobytes())  # C order
    return {"dtype": dtype, "shape": list(values.shape), "buffer": len(buffers) - 1}


def _checked_intact(ckpt: Tree, check: Callable[[], None]) -> Callable[[], None]:
    """``check``, and the store's ``check_intact``: a preview reads a leaf that views an
    archive's mapping, block by block, and a file truncated under it would kill the
    kernel (SIGBUS) at the first page past its new end; asked before each block, it is
    an ``ArchiveError`` instead (a store that maps nothing itself has nothing to check)."""
    intact = ckpt.store.check_intact

    def checked() -> None:
        check()
        intact()

    return checked


def _check_room(ckpt: Tree, node: Node) -> None:
    """Refuse to preview a leaf that must be decompressed whole into more than half the
    memory available now: a small hostile archive can declare gigabytes, and one click
    must not get the kernel killed. A mapped leaf reads only its pages."""
    facts = leaf_storage(ckpt.store, node)
    if facts.cost != DECOMPRESS:
        return
    free = host_memory()["free_bytes"]
    if free is not None and facts.size > free // 2:
        raise LimitExceededError(
            f"{facts.location}: a preview of this leaf would {facts.cost} all {facts.size:,} "
            f"bytes of it into memory, more than half of the {free:,} bytes available now. "
            "Load it where it fits instead (the Load form shows what it takes)."
        )


def _kept_stats(
    ckpt: Tree,
    key: tuple,
    chosen: Any,
    compute: bool,
    check: Callable[[], None],
    display: Display,
) -> tuple[dict[str, Any] | None, dict | None]:
    """The statistics of a selection: kept ones, else computed (``compute``) and kept."""
    kept = _KEPT.setdefault(ckpt, OrderedDict())
    found = kept.get(key)
    if found is not None:
        kept.move_to_end(key)
        return found
    if not compute:
        return None, None
    found = statistics(chosen, check, read, kind=display.kind, decode=display.decode)
    kept[key] = found
    while len(kept) > MAX_KEPT_STATS:
        kept.popitem(last=False)
    return found


def _chosen(
    values: Any, parts: tuple[Part, ...] | None, asked: Plane | None
) -> tuple[Any, list[Dim], Plane, Any]:
    """The selection of ``values``, what it shows per dim, its plane and the plane's
    view (rows first)."""
    shape = tuple(values.shape)
    key, dims = select(parts or (), shape)
    chosen = values[(*key, ...)]
    plane = plane_of(dims, asked, shape)
    view = chosen[(*plane.key(dims), ...)]
    return chosen, dims, plane, (view.T if plane.transposed else view)


def _table(view: Any, offset: int, rows: int, display: Display, col_offset: int = 0) -> np.ndarray:
    """Rows ``offset`` to ``offset + rows`` and :data:`MAX_COLS` columns from
    ``col_offset`` of the plane, read now and shown as ``display`` says."""
    if len(view.shape) == 0:
        cut = view
    elif len(view.shape) == 1:
        cut = view[offset : offset + rows]
    else:
        cut = view[offset : offset + rows, col_offset : col_offset + MAX_COLS]
    return np.array(display.decode(read(cut)))  # a copy, 0-d stays 0-d


def _histogram_json(histogram: dict | None, buffers: list[bytes]) -> dict | None:
    if histogram is None:
        return None
    return {
        "edges": _ref(histogram["edges"], "float64", buffers),
        "counts": _ref(histogram["counts"], "int64", buffers),
        "values": None
        if histogram["values"] is None
        else _ref(histogram["values"], "float64", buffers),
    }


def _heatmap_json(cells: dict | None, buffers: list[bytes]) -> dict | None:
    if cells is None:
        return None
    return {
        "cells": _ref(cells["cells"], "float32", buffers),
        "of": cells["of"],
        "min": cells["min"],
        "max": cells["max"],
    }


def preview(
    ckpt: Tree,
    path: tuple[str, ...],
    rows: int,
    check: Callable[[], None] = lambda: None,
    *,
    rows_scope: str = "written",
    index: tuple[Part, ...] | None = None,
    offset: int | None = None,
    stats: bool = True,
    heatmap: tuple[int, int] | None = None,
    plane: Plane | None = None,
    col_offset: int = 0,
) -> tuple[dict[str, Any], list[bytes]]:
    """``PreviewResult`` of the leaf at ``path`` and its buffers: ``[slice, edges, counts,
    values?, heatmap?]`` (the reply's ``BufferRef`` objects say which is which).

    Parameters
    ----------
    ckpt : Checkpoint
    path : tuple of str
    rows : int
        Rows of the table (the caller caps it).
    check : callable, optional
        Called between blocks; raise from it to cancel.
    rows_scope : {"written", "all"}
        Below a torchrl storage: only its written rows, or all of them.
    index : tuple of parts, optional
        The selection (:func:`~._selection.parse_index`); None: the whole leaf.
    offset : int, optional
        The first row of the plane in the table (0 by default).
    stats : bool
        False: statistics and histogram only when they are known already.
    heatmap : (rows, cols), optional
        Also send the plane downsampled to at most that many cells.
    plane : Plane, optional
        The dims shown as rows and columns and the positions of the others
        (:func:`~._selection.plane_params`); None: the last two dims kept.
    col_offset : int
        The first column of the plane in the table (0 by default).

    Raises
    ------
    SubpathError
        No node at ``path``.
    PreviewUnsupportedError
        The node is not a tensor leaf, or its dtype has no display form.
    PreviewIndexError
        ``index`` or ``plane`` does not fit the leaf (more parts than dims, an integer
        past a dim...): the message names the part and the leaf's shape.

    Examples
    --------
    >>> result, buffers = preview(ckpt, ("replay", "reward"), 4)      # doctest: +SKIP
    >>> result["display_dtype"], result["slice"]["shape"]            # doctest: +SKIP
    ('float32', [4])
    >>> result, _ = preview(ckpt, ("replay", "observation"), 20,
    ...                     index=parse_index("[50000:50020, :8]"))  # doctest: +SKIP
    >>> result["selection"]["index"], result["slice"]["shape"]       # doctest: +SKIP
    ('[50000:50020, 0:8]', [20, 8])
    """
    node = ckpt.node(path)
    if not node.is_leaf or node.record is None:
        raise PreviewUnsupportedError(
            f"{'/'.join(path) or '<root>'} is a {node.kind}, "
            "not a tensor: only tensor leaves have a preview"
        )
    display = display_of(node.record.dtype.torch_name)
    _check_room(ckpt, node)
    values = leaf_values(ckpt, node, display)
    check = _checked_intact(ckpt, check)
    shape = list(values.shape)
    written = rows_of_leaf(ckpt, path)
    if written is not None and rows_scope == "written" and values.shape:
        values = values[: written.written]
    chosen, dims, shown, view = _chosen(values, index, plane)
    check()
    table = _table(view, offset or 0, rows, display, col_offset)
    covered = values.shape[0] if values.shape else None
    found, histogram = _kept_stats(
        ckpt, (tuple(path), covered, index_text(dims)), chosen, stats, check, display
    )
    cells = None
    if heatmap is not None:
        cells = heatmap_of(view, *heatmap, check, read, display.decode)
    buffers: list[bytes] = []
    result = {
        "path": list(path),
        "dtype": node.record.dtype.torch_name,
        "shape": shape,
        "display_dtype": display.name,
        "slice": _ref(table, display.name, buffers),
        "selection": {
            "index": index_text(dims),
            "dims": [d.as_json() for d in dims],
            "shape": list(chosen.shape),
        },
        "plane": {**shown.as_json(), "offset": offset or 0, "col_offset": col_offset},
        "stats": found,
        "histogram": _histogram_json(histogram, buffers),
        "heatmap": _heatmap_json(cells, buffers),
        "rows": None
        if written is None
        else {"written": written.written, "capacity": written.capacity, "scope": rows_scope},
    }
    return result, buffers
