"""A leaf of a remote checkpoint read by the byte ranges that a view of it needs.

A remote leaf cannot be mapped, and loading it reads it whole. A preview needs a few rows
of it, or its chunks one at a time: :class:`RangedView` is the leaf (or a view of it) as
an offset, a shape and strides, with no bytes, that the preview indexes as it would a
mapped array (integers, slices, a swap of two dims), and :func:`read` reads the values of
such a view. The elements of a view lie in runs (its innermost contiguous dims); runs
closer than :data:`GAP` bytes are read as one range, and ranges go to the store's
``read_ranges`` (concurrent reads of at most 8 MiB). So the rows ``[50000:50020]`` of a
leaf are one read of 20 rows, and a chunk of statistics one read of that chunk.

Only plain leaves whose bytes lie as they are in the store are read so (a folder's
``.memmap`` file, a STORED archive entry): :mod:`._preview_source` decides.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..storage import Store

__all__ = ["GAP", "RangedView", "read"]

GAP = 64 << 10  # runs of a view closer than this are read as one range


class _Leaf:
    """The file a view reads from, and the last view read (statistics, then the
    histogram: one chunk read once)."""

    def __init__(self, store: Store, key: str, dtype: np.dtype) -> None:
        self.store, self.key, self.dtype = store, key, dtype
        self.last: tuple[tuple, np.ndarray] | None = None


class RangedView:
    """Elements ``offset + sum(i_k * strides[k])`` of a leaf's file, in items (see the
    module docstring). Made for a whole leaf by :meth:`of_leaf`."""

    def __init__(
        self, leaf: _Leaf, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]
    ) -> None:
        self.leaf, self.offset, self.shape, self.strides = leaf, offset, shape, strides

    @classmethod
    def of_leaf(cls, store: Store, key: str, dtype: np.dtype, shape: tuple[int, ...]) -> RangedView:
        strides = tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))
        return cls(_Leaf(store, key, np.dtype(dtype)), 0, tuple(shape), strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.leaf.dtype

    def __getitem__(self, key: Any) -> RangedView:
        parts = key if isinstance(key, tuple) else (key,)
        parts = tuple(p for p in parts if p is not ...)  # only ever a trailing one
        offset, shape, strides = self.offset, [], []
        for d, (n, s) in enumerate(zip(self.shape, self.strides, strict=True)):
            part = parts[d] if d < len(parts) else slice(None)
            if isinstance(part, slice):
                start, stop, step = part.indices(n)
                offset += start * s
                shape.append(len(range(start, stop, step)))
                strides.append(s * step)
            else:
                at = int(part) + n if int(part) < 0 else int(part)
                if not 0 <= at < n:
                    raise IndexError(f"index {part} out of range for a dim of size {n}")
                offset += at * s
        return RangedView(self.leaf, offset, tuple(shape), tuple(strides))

    @property
    def T(self) -> RangedView:  # noqa: N802 (numpy's name)
        return RangedView(self.leaf, self.offset, self.shape[::-1], self.strides[::-1])


def read(view: Any) -> np.ndarray:
    """The values of ``view`` as an array of its shape: read now in coalesced ranges for
    a :class:`RangedView`, itself for an array in memory (or mapped)."""
    if not isinstance(view, RangedView):
        return np.asarray(view)
    leaf = view.leaf
    if view.size == 0:
        return np.empty(view.shape, dtype=leaf.dtype)
    shown = (view.offset, view.shape, view.strides)
    if leaf.last is not None and leaf.last[0] == shown:
        return leaf.last[1]
    leaf.last = (shown, _read(view))
    return leaf.last[1]


def _read(view: RangedView) -> np.ndarray:
    leaf = view.leaf
    starts, run = _runs(view)
    order = None
    if starts.size > 1 and bool((starts[1:] < starts[:-1]).any()):
        order = np.argsort(starts, kind="stable")
        starts = starts[order]
    size = leaf.dtype.itemsize
    # a new range where the gap since the run before is more than GAP bytes
    cut = np.ones(starts.size, dtype=bool)
    cut[1:] = (starts[1:] - starts[:-1] - run) * size > GAP
    first = starts[cut]
    group = np.cumsum(cut) - 1
    ends = np.ones_like(cut)  # a range ends where the next one starts, and at the end
    ends[:-1] = cut[1:]
    last = starts[ends] + run
    lengths = last - first
    at = np.cumsum(lengths) - lengths  # where each range's elements go in the buffer
    buffer = np.empty(int(lengths.sum()), dtype=leaf.dtype)
    spans = [(a * size, b * size) for a, b in zip(first.tolist(), last.tolist(), strict=True)]
    leaf.store.read_ranges(leaf.key, spans, buffer.view(np.uint8).data)
    if starts.size == 1 and first.size == 1:
        return buffer.reshape(view.shape)
    where = at[group] + starts - first[group]  # each run's place in the buffer
    if order is not None:
        unsorted = np.empty_like(where)
        unsorted[order] = where
        where = unsorted
    index = (where[:, None] + np.arange(run)).reshape(-1)
    return buffer[index].reshape(view.shape)


def _runs(view: RangedView) -> tuple[np.ndarray, int]:
    """The element offsets where the runs of ``view`` start (in C order) and the length
    of a run: its innermost dims that are contiguous make one run."""
    dims = [(n, s) for n, s in zip(view.shape, view.strides, strict=True) if n != 1]
    run = 1
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    starts = np.array([view.offset], dtype=np.int64)
    for n, s in dims:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    return starts, run
