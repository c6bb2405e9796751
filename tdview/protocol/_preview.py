"""The ``preview`` method: a bounded slice, statistics, a histogram and, when asked, a
heatmap of one leaf.

The leaf is loaded memory-mapped (``mode="r"``). What is sent for each dtype
(``display_dtype``):

- float32, float64, the integer dtypes: as they are;
- bfloat16, float16 and the float8 dtypes: converted to float32;
- complex dtypes: their magnitude ``|z|`` (float32, float64 for complex128): slice,
  statistics, histogram and heatmap all describe the magnitude;
- bool: one byte per element (0/1), buffer dtype ``"bool"``;
- the others (quantized, bit and sub-byte dtypes): not previewed (an error reply).

**The selection.** ``index`` (an expression such as ``[50000:50020, :8]``, see
:mod:`._selection`) picks what the table shows, per dim; ``offset`` alone is ``[offset:]``
(the rows from ``offset`` on). Indexing a mapped leaf is a view: only the pages of the
rows and columns shown are read. A leaf of a remote checkpoint, stored as it is (a
folder's file, a STORED archive entry), is sliced the same way as a ``meta`` tensor, and
only the byte ranges of what is shown are read (:mod:`tdview.loader._ranged`: adjacent
rows are one ranged read); a nested or compressed remote leaf is read whole. The reply's
``selection`` says what was picked, clipped to the leaf: ``{index, dims: [{start, stop,
step, kept}], shape}`` (``index`` written back canonically, one dim per dim of the leaf,
``kept`` false for a dim an integer dropped, ``shape`` the selection's).

**The table** (``slice``) is the first ``rows`` (at most 100) rows of the selection as a
table: a 0-d selection is its single value, a 1-d one its first ``rows`` values, and an
n-d one (n >= 2) a table with its dim 0 as rows and its other dims flattened in C order
as columns (at most 50, the first ones). Row ``i`` of the table is the leaf's index
``start + i * step`` in the first kept dim of ``selection.dims``. A nested (ragged) leaf
is previewed as the concatenation of its flattened components (1-d; the reply's
``shape`` is then that of the concatenation).

**Statistics and histogram** (:mod:`._stats`) cover the whole leaf, not the selection, and
are kept per leaf (the last 64 leaves of each checkpoint): paging through a leaf reads its
rows once, and then only the rows shown. ``stats=False`` sends them only when they are
known already (else ``stats`` and ``histogram`` are null), so that a first page of a
very large leaf reads its slice alone. Statistics that mean nothing for a dtype are null
(``nan``/``inf`` of integers and booleans, ``mean``/``std`` of booleans); integers and
booleans with at most 64 distinct values have a bar per value (``histogram.values``).

**Heatmap** (``heatmap={"rows": N, "cols": M}``, each 1 to 1024): the selection as a
table downsampled to at most N x M cells by block means (:mod:`._heatmap`), sent as a
float32 buffer: ``{cells: BufferRef [h, w], of: [R, C], min, max}``; null when not asked
or the selection is 0-d or empty.

Below a torchrl replay-buffer storage (:func:`tdview.index.rows_of_leaf`), selection,
statistics, histogram and heatmap cover the rows written (``rows_scope="written"``, the
default: the others hold zeros or uninitialised memory) or every row (``"all"``); the
reply's ``rows`` says ``{written, capacity, scope}`` then, and is None elsewhere.
``shape`` is always the leaf's own.
"""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from ..errors import LimitExceededError, PreviewUnsupportedError
from ..index import Checkpoint, Node, leaf_storage, rows_of_leaf
from ..index._facts import COPY, DECOMPRESS
from ..loader._ranged import ranged_leaf
from ._heatmap import heatmap as heatmap_of
from ._load import host_memory
from ._selection import Dim, Part, index_text, select
from ._stats import BINS, CHUNK, Read, as_is, statistics
from ._summaries import dtype_name

__all__ = ["BINS", "CHUNK", "MAX_COLS", "preview", "statistics"]

MAX_COLS = 50
#: Leaves whose statistics are kept, per checkpoint.
MAX_KEPT_STATS = 64

_TO_FLOAT32 = {torch.float16, torch.bfloat16}
_TO_FLOAT32.update(
    getattr(torch, name)
    for name in (
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    )
    if hasattr(torch, name)
)
_AS_IS = {
    torch.float32,
    torch.float64,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
}
_COMPLEX = {
    torch.complex32: torch.float32,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}

# Checkpoint -> (path, rows covered) -> (stats, histogram): the statistics of the leaves
# previewed last (a leaf changed on disk under an open checkpoint is stale here as its
# index is).
_KEPT: weakref.WeakKeyDictionary[Checkpoint, OrderedDict[tuple, tuple]] = (
    weakref.WeakKeyDictionary()
)


def _display(tensor: torch.Tensor) -> tuple[torch.Tensor, str]:
    """``tensor`` converted for display, and the buffer dtype name."""
    dtype = tensor.dtype
    if dtype in _AS_IS:
        return tensor, dtype_name(str(dtype))
    if dtype in _TO_FLOAT32:
        return tensor.to(torch.float32), "float32"
    if dtype == torch.bool:
        return tensor.to(torch.uint8), "bool"
    if dtype in _COMPLEX:
        wide = tensor.to(torch.complex64) if dtype == torch.complex32 else tensor
        return wide.abs().to(_COMPLEX[dtype]), dtype_name(str(_COMPLEX[dtype]))
    raise PreviewUnsupportedError(f"a leaf of dtype {dtype_name(str(dtype))} cannot be previewed")


def _table(tensor: torch.Tensor, rows: int, read: Read = as_is) -> torch.Tensor:
    """The first ``rows`` rows and :data:`MAX_COLS` columns of ``tensor`` as a table,
    reading no more of it than they hold: the rows and columns are cut before anything is
    flattened (a view of a mapped leaf would otherwise be copied whole), and ``read``
    (ranged reads of a remote leaf's ``meta`` view) sees only what is cut."""
    if tensor.dim() == 0:
        return read(tensor).reshape(())
    if tensor.dim() == 1:
        return read(tensor[:rows])
    block = tensor[:rows]
    # the first MAX_COLS flattened columns lie in the first indices of the trailing dims
    while block.dim() > 2 and math.prod(block.shape[2:]) >= MAX_COLS:
        block = block[:, 0]
    if block.dim() > 2:
        inner = math.prod(block.shape[2:]) or 1
        block = block[:, : -(-MAX_COLS // inner)]
    else:
        block = block[:, :MAX_COLS]
    block = read(block)
    return block.reshape(block.shape[0], math.prod(block.shape[1:]))[:, :MAX_COLS]


def _ref(tensor: torch.Tensor, dtype: str, buffers: list[bytes]) -> dict[str, Any]:
    data = tensor.contiguous().reshape(-1)
    buffers.append(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return {"dtype": dtype, "shape": list(tensor.shape), "buffer": len(buffers) - 1}


def _checked_intact(ckpt: Checkpoint, check: Callable[[], None]) -> Callable[[], None]:
    """``check``, and the store's ``check_intact``: a preview reads a leaf that views an
    archive's mapping, chunk by chunk, and a file truncated under it would kill the
    kernel (SIGBUS) at the first page past its new end; asked before each chunk, it is
    an ``ArchiveError`` instead (a store that maps nothing itself has nothing to check)."""
    intact = ckpt.store.check_intact

    def checked() -> None:
        check()
        intact()

    return checked


def _check_room(ckpt: Checkpoint, node: Node) -> None:
    """Refuse to preview a leaf that must be decompressed (or copied) whole into more
    than half the memory available now: a small hostile archive can declare gigabytes,
    and one click must not get the kernel killed. A mapped leaf reads only its pages."""
    facts = leaf_storage(ckpt.store, node)
    if facts.cost not in (DECOMPRESS, COPY):
        return
    free = host_memory()["free_bytes"]
    if free is not None and facts.size > free // 2:
        raise LimitExceededError(
            f"{facts.location}: a preview of this leaf would {facts.cost} all {facts.size:,} "
            f"bytes of it into memory, more than half of the {free:,} bytes available now. "
            "Load it where it fits instead (the Load form shows what it takes)."
        )


def _packed(nested: torch.Tensor) -> torch.Tensor:
    """The elements of a nested (strided) tensor, component after component, as one 1-d
    tensor: a view of its storage when the components lie packed in it from its start
    (as tdview's loader lays them out), a copy otherwise."""
    sizes = nested._nested_tensor_size()
    strides, offsets = torch._nested_compute_contiguous_strides_offsets(sizes)
    if torch.equal(nested._nested_tensor_strides(), strides) and torch.equal(
        nested._nested_tensor_storage_offsets(), offsets
    ):
        numel = int(sizes.prod(-1).sum()) if sizes.numel() else 0
        return torch.empty(0, dtype=nested.dtype).set_(nested.untyped_storage(), 0, (numel,), (1,))
    parts = [t.reshape(-1) for t in nested.unbind(0)]
    return torch.cat(parts) if parts else torch.empty(0, dtype=nested.dtype)


def _kept_stats(
    ckpt: Checkpoint,
    key: tuple,
    tensor: torch.Tensor,
    compute: bool,
    check: Callable[[], None],
    read: Read,
) -> tuple[dict[str, Any] | None, dict | None]:
    """The statistics of a leaf: kept ones, else computed (``compute``) and kept."""
    kept = _KEPT.setdefault(ckpt, OrderedDict())
    found = kept.get(key)
    if found is not None:
        kept.move_to_end(key)
        return found
    if not compute:
        return None, None
    found = statistics(tensor, check, read)
    kept[key] = found
    while len(kept) > MAX_KEPT_STATS:
        kept.popitem(last=False)
    return found


def _selection(
    parts: tuple[Part, ...] | None, offset: int | None, tensor: torch.Tensor
) -> tuple[torch.Tensor, list[Dim]]:
    """The selected view of ``tensor`` and what it shows per dim."""
    if parts is None:
        parts = ((offset, None, None),) if offset and tensor.dim() else ()
    key, dims = select(parts, tuple(tensor.shape))
    return tensor[key] if key else tensor, dims


def preview(
    ckpt: Checkpoint,
    path: tuple[str, ...],
    rows: int,
    check: Callable[[], None] = lambda: None,
    *,
    rows_scope: str = "written",
    index: tuple[Part, ...] | None = None,
    offset: int | None = None,
    stats: bool = True,
    heatmap: tuple[int, int] | None = None,
) -> tuple[dict[str, Any], list[bytes]]:
    """``PreviewResult`` of the leaf at ``path`` and its buffers: ``[slice, edges, counts,
    values?, heatmap?]`` (the reply's ``BufferRef`` objects say which is which).

    Parameters
    ----------
    ckpt : Checkpoint
        Must provide ``load_leaf(path, mode="r")`` (tdview's loader), unless its store
        reads the leaf by ranges (``read_ranges``).
    path : tuple of str
    rows : int
        Rows of the table (the caller caps it).
    check : callable, optional
        Called between chunks; raise from it to cancel.
    rows_scope : {"written", "all"}
        Below a torchrl storage: only its written rows, or all of them.
    index : tuple of parts, optional
        The selection (:func:`~._selection.parse_index`); None: the whole leaf.
    offset : int, optional
        Without ``index``: the first row shown.
    stats : bool
        False: statistics and histogram only when they are known already.
    heatmap : (rows, cols), optional
        Also send the selection downsampled to at most that many cells.

    Raises
    ------
    SubpathError
        No node at ``path``.
    PreviewUnsupportedError
        The node is not a tensor leaf, or its dtype has no display form.
    PreviewIndexError
        ``index`` does not fit the leaf (more parts than dims, an integer past a dim).

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
    ranged = ranged_leaf(ckpt, node)
    read: Read = as_is
    if ranged is not None:  # remote: a meta tensor, its views read by byte ranges
        tensor, read = ranged.meta, ranged.read
    else:
        _check_room(ckpt, node)
        tensor = ckpt.load_leaf(path, mode="r")
    check = _checked_intact(ckpt, check)
    if tensor.is_nested:
        tensor = _packed(tensor)
    shape = list(tensor.shape)
    written = rows_of_leaf(ckpt, path)
    if written is not None and rows_scope == "written" and tensor.dim():
        tensor = tensor[: written.written]
    chosen, dims = _selection(index, offset, tensor)
    check()
    shown, display_dtype = _display(_table(chosen, rows, read))
    covered = tensor.shape[0] if tensor.dim() else None
    found, histogram = _kept_stats(ckpt, (tuple(path), covered), tensor, stats, check, read)
    cells = heatmap_of(chosen, *heatmap, check, read) if heatmap is not None else None
    buffers: list[bytes] = []
    result = {
        "path": list(path),
        "dtype": dtype_name(node.record.dtype.name),
        "shape": shape,
        "display_dtype": display_dtype,
        "slice": _ref(shown, display_dtype, buffers),
        "selection": {
            "index": index_text(dims),
            "dims": [d.as_json() for d in dims],
            "shape": list(chosen.shape),
        },
        "stats": found,
        "histogram": None
        if histogram is None
        else {
            "edges": _ref(histogram["edges"], "float64", buffers),
            "counts": _ref(histogram["counts"], "int64", buffers),
            "values": None
            if histogram["values"] is None
            else _ref(histogram["values"], "float64", buffers),
        },
        "heatmap": None
        if cells is None
        else {
            "cells": _ref(cells["cells"], "float32", buffers),
            "of": cells["of"],
            "min": cells["min"],
            "max": cells["max"],
        },
        "rows": None
        if written is None
        else {"written": written.written, "capacity": written.capacity, "scope": rows_scope},
    }
    return result, buffers
