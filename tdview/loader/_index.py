"""Indexed loads: ``load(..., index=...)`` is ``load(...)[index]``, reading only the rows
the index selects.

The subtree is built as a load builds it, then indexed by tensordict's own
``__getitem__``: the result is ``load(...)[index]`` by construction (class, batch size,
non-tensor data, tensorclasses, stacks). What is read:

* a local leaf is a mapping, which reads nothing until a page is touched: the index makes
  views of it (a tensor index copies the rows it selects);
* a remote leaf below TensorDicts and tensorclasses (whose leading dims are the batch
  dims the index applies to) is read by ranged reads of its selected rows only
  (:func:`leaf_spans`, ``Store.read_ranges``), into a buffer the size of the leaf
  (anonymous zero pages: the rows not read take no memory and the index never
  selects them); a leaf below a lazy stack or a view, and a nested leaf, are read
  whole, as a load without ``index`` reads them;
* a compressed archive entry (local or remote) of such a leaf is read by the same
  ``Store.read_ranges``, which inflates it from its start only up to the last byte
  selected, reading its stored bytes as far as that needs
  (:mod:`tdview.storage._inflate_ranges`): rows near the start of a large entry cost a
  small part of its inflation and of its stored bytes; rows at its end, all of it
  (CRC-32 checked then). A prefix is not covered by the entry's CRC-32: its
  decompression is checked, not its checksum (``tdview check`` checks it).

Before a payload byte is read, the index is tried on a probe of the subtree's batch size
(:func:`check_fits`: a zero-stride tensor, no memory), so an index the batch cannot take
raises what ``td[index]`` raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from math import prod
from typing import Any

import numpy as np
import torch

from ..errors import ArchiveError, TDViewError
from ..index import LEAF, TENSORCLASS, TENSORDICT, Node, Tree
from ._remote import Fetched, fetch_subtree

__all__ = ["apply_index", "check_fits", "check_index", "fetch_rows", "leaf_spans"]

#: Blocks of rows one leaf's read is planned with, at most: past it the planning reads
#: whole the last dims the index selects in (a coarser plan, never a wrong one).
MAX_BLOCKS = 1 << 22
#: Ranges of one leaf closer than this are read as one (a request costs more).
GAP = 4096
_INDEX_TYPES = (int, slice, type(Ellipsis), type(None), torch.Tensor, list)


def check_index(index: object) -> None:
    """Raise ``TypeError`` unless ``index`` is of a kind ``td[index]`` takes on the batch
    dims (an int, a slice, ``...``, ``None``, a bool or integer tensor or list, or a
    tuple of those); whether the batch can take it is :func:`check_fits`'s.

    Examples
    --------
    >>> check_index((0, slice(None, None, 2)))
    >>> check_index("a")
    Traceback (most recent call last):
    ...
    TypeError: index selects rows of the batch dims, as td[index] does (an int, a slice, ...
    """
    parts = index if type(index) is tuple else (index,)
    for part in parts:
        bad = not isinstance(part, _INDEX_TYPES) or (
            isinstance(part, torch.Tensor)
            and not (part.dtype == torch.bool or not part.is_floating_point())
        )
        if bad or (isinstance(part, torch.Tensor) and part.is_complex()):
            raise TypeError(
                "index selects rows of the batch dims, as td[index] does (an int, a slice, "
                "..., None, a bool or integer tensor, or a tuple of those), got "
                f"{part!r} ({type(part).__name__}) in {index!r}; a key is a subpath=."
            )


def check_fits(ckpt: Tree, node: Node, index: Any) -> None:
    """Raise what ``td[index]`` raises (an ``IndexError`` naming the dimension and its
    size) when the batch of ``node`` cannot take ``index``, from metadata alone.

    A batch size the index does not know (a ragged stack) is left to the load."""
    batch = ckpt.batch_size(node)
    if batch is None or -1 in batch:
        return
    from tensordict import TensorDict

    probe = torch.zeros((), dtype=torch.uint8).expand(batch)
    TensorDict({"probe": probe}, batch_size=batch)[index]


def apply_index(result: Any, index: Any, device: torch.device | None, non_blocking: bool) -> Any:
    """``result[index]``, then moved to ``device`` (built on the CPU: only the rows
    selected are copied there)."""
    result = result[index]
    if device is not None and device.type not in ("cpu", "meta"):
        result = result.to(device, non_blocking=non_blocking)
    return result


def _parts(index: Any, ndim: int | None) -> list[Any] | None:
    """The index as one part per batch dim it consumes (``None`` parts dropped,
    ``...`` expanded over the batch dims, a bool tensor of ``m`` dims as ``m`` parts);
    None when it cannot be planned (the leaf is then read whole)."""
    given = list(index) if type(index) is tuple else [index]
    if any(isinstance(part, bool) for part in given):
        return None  # a Python bool adds a dim of one or none: read whole
    masks = [p for p in given if isinstance(p, torch.Tensor) and p.dtype == torch.bool]
    if any(mask.ndim == 0 for mask in masks):
        return None
    consumed = sum(mask.ndim for mask in masks) + sum(
        1 for p in given if p is not None and p is not Ellipsis and not any(p is m for m in masks)
    )
    parts: list[Any] = []
    for part in given:
        if part is None:
            continue
        if part is Ellipsis:
            if ndim is None or ndim < consumed:
                return None
            parts.extend([slice(None)] * (ndim - consumed))
        elif any(part is mask for mask in masks):
            parts.extend(part.nonzero().unbind(1))
        else:
            parts.append(part)
    return parts


def _selected(part: Any, size: int) -> range | np.ndarray:
    """The sorted positions along a dim of ``size`` that ``part`` selects (raises
    ``IndexError``/``ValueError`` for one that does not fit: the leaf is read whole)."""
    if isinstance(part, slice):
        start, stop, step = part.indices(size)
        if step <= 0:
            raise ValueError("step must be greater than zero")
        return range(start, max(start, stop), step)
    values = np.asarray(part.cpu() if isinstance(part, torch.Tensor) else part)
    if values.dtype.kind not in "iu":
        raise TypeError("not integers")  # a list of bools is a mask: read whole
    values = values.astype(np.int64).reshape(-1)
    if values.size and (values.min() < -size or values.max() >= size):
        raise IndexError("out of range")
    return np.unique(np.where(values < 0, values + size, values))


def leaf_spans(
    shape: tuple[int, ...], itemsize: int, index: Any, ndim: int | None
) -> list[tuple[int, int]] | None:
    """The byte ranges of a C-contiguous leaf of ``shape`` that ``index`` (on its first
    ``ndim`` dims, the batch dims) selects, coalesced; None when it cannot say (read
    the leaf whole).

    Examples
    --------
    >>> leaf_spans((10, 4), 4, slice(2, 5), 1)
    [(32, 80)]
    >>> leaf_spans((10, 4), 4, (slice(None, 4, 2), 1), 2)  # items 1 and 9: one range
    [(4, 40)]
    >>> leaf_spans((100_000, 1024), 1, slice(0, 30_000, 10_000), 1)
    [(0, 1024), (10240000, 10241024), (20480000, 20481024)]
    """
    parts = _parts(index, ndim)
    if parts is None or len(parts) > len(shape):
        return None
    try:
        picks = [_selected(part, size) for part, size in zip(parts, shape, strict=False)]
    except (IndexError, ValueError, TypeError, OverflowError):
        return None
    while len(picks) > 1 and prod(len(p) for p in picks) > MAX_BLOCKS:
        picks.pop()  # read the last dim whole: a coarser plan
    k = len(picks)
    block = prod(shape[k:]) * itemsize
    if k == 0 or not block:
        return [(0, prod(shape) * itemsize)] if block else []
    if k == 1 and isinstance(picks[0], range) and picks[0].step == 1:
        rows = picks[0]
        return [(rows.start * block, rows.stop * block)] if len(rows) else []
    if prod(len(p) for p in picks) > MAX_BLOCKS:
        return None
    ids = np.zeros((), dtype=np.int64)
    for pick, size in zip(picks, shape[:k], strict=True):
        ids = ids[..., None] * size + np.asarray(pick, dtype=np.int64)
    return _runs(np.sort(ids.reshape(-1)), block)


def _runs(ids: np.ndarray, block: int) -> list[tuple[int, int]]:
    """Sorted block ids as byte ranges; runs less than :data:`GAP` bytes apart merged."""
    if not ids.size:
        return []
    cut = np.nonzero((np.diff(ids) - 1) * block >= GAP)[0]
    starts = np.concatenate(([ids[0]], ids[cut + 1]))
    ends = np.concatenate((ids[cut], [ids[-1]])) + 1
    return [(int(s) * block, int(e) * block) for s, e in zip(starts, ends, strict=True)]


def _by_rows(ckpt: Tree, node: Node) -> Iterator[Node]:
    """The plain leaves below ``node`` reached through TensorDicts and tensorclasses only,
    ``node`` included: their leading dims are the batch dims ``index`` applies to (a lazy
    stack's members have not its stack dim, a view's source not its dims: read whole)."""
    if node.kind not in (TENSORDICT, TENSORCLASS):
        return
    for child in ckpt.children(node):
        if child.kind in (TENSORDICT, TENSORCLASS):
            yield from _by_rows(ckpt, child)
        elif child.kind == LEAF and child.file is not None and child.record is not None:
            if not child.record.is_nested:
                yield child


#: A leaf read by rows: its nested key, its size in bytes, the byte ranges to read.
_Plan = tuple[tuple[str, ...], int, list[tuple[int, int]]]


def fetch_rows(
    ckpt: Tree,
    node: Node,
    index: Any,
    progress: Callable[[tuple[str, ...]], object] | None,
) -> Fetched:
    """The prefetch of an indexed load (see the module docstring): the selected rows of
    the leaves read by rows; from a store that cannot be mapped, the rest as
    :func:`fetch_subtree` reads it; from one that can, only its compressed entries'
    rows (the rest is mapped by the build)."""
    store = ckpt.store
    batch = ckpt.batch_size(node)
    ndim = None if batch is None else len(batch)
    planned: dict[str, _Plan] = {}
    for leaf in _by_rows(ckpt, node):
        record = leaf.record
        assert record is not None and leaf.file is not None
        if not record.nbytes or not _by_range(store, leaf.file, record.nbytes):
            continue
        spans = leaf_spans(record.shape, record.dtype.itemsize, index, ndim)
        if spans is not None:
            planned[leaf.file] = (leaf.path, record.nbytes, spans)
    fetched = (
        Fetched({}) if store.mappable else fetch_subtree(ckpt, node, progress, skip=planned.keys())
    )
    failed = _read_rows(ckpt, planned, fetched, progress)
    if failed:  # a short file, an entry whose sizes differ: read whole, which says why
        fetched.update(store.fetch({key: planned[key][1] for key in failed}))
    return fetched


def _by_range(store: Any, key: str, nbytes: int) -> bool:
    """Whether the rows of file ``key`` are read ahead by range: not for a stored entry
    of a store that is mapped (its rows are views), nor for a file whose size does not
    fit its leaf (a buffer of the size ``meta.json`` claims is not made: the load
    without ``index`` reads it and says what is wrong)."""
    try:
        entry = store.entry(key)
    except (OSError, TDViewError):
        return False  # absent, refused: the load says so
    if store.mappable and entry.compression == "stored":
        return False
    return entry.size == nbytes or (entry.size > nbytes and not store.packed)


def _read_rows(
    ckpt: Tree,
    planned: dict[str, _Plan],
    fetched: Fetched,
    progress: Callable[[tuple[str, ...]], object] | None,
) -> list[str]:
    """Read the planned rows of each leaf into a buffer of its size; the keys that cannot
    be read by range. One leaf after the other: each ``read_ranges`` call is already
    concurrent (its pieces), and a store's reads are not all safe from several threads
    at once (fsspec's caches keep their metadata unlocked)."""
    store = ckpt.store
    failed = []
    for key, (path, nbytes, spans) in planned.items():
        full = np.zeros(nbytes, dtype=np.uint8)  # zero pages until a row lands
        one_run = len(spans) == 1
        packed = (
            full[slice(*spans[0])]
            if one_run
            else np.empty(sum(end - start for start, end in spans), dtype=np.uint8)
        )
        try:
            store.read_ranges(key, spans, packed.data)
        except (ArchiveError, ValueError, FileNotFoundError):
            failed.append(key)
            continue
        at = 0
        for start, end in [] if one_run else spans:
            full[start:end] = packed[at : at + end - start]
            at += end - start
        fetched.update({key: full})
        if progress is not None:
            progress(path)
    return failed
