"""A leaf of a remote checkpoint read by the byte ranges that a view of it needs.

A remote leaf cannot be mapped, and loading it reads it whole (:mod:`._remote`). A
preview needs a few rows of it, or its chunks one at a time: :class:`RangedLeaf` gives
the leaf as a ``meta`` tensor (shape and strides, no bytes) that the preview slices as
it would slice a mapped leaf, and :meth:`RangedLeaf.read` reads the values of such a
view. The elements of a view lie in runs (its innermost contiguous dims); runs closer
than :data:`GAP` bytes are read as one range, and ranges go to the store's
``read_ranges`` (concurrent reads of at most 8 MiB). So the rows ``[50000:50020]`` of a
leaf are one read of 20 rows, and a chunk of statistics one read of that chunk.

Only plain leaves whose bytes lie as they are in the store are read so (a folder's
``.memmap`` file, a STORED archive entry); a nested or compressed leaf, or one whose file
does not fit its shape, is loaded whole as before (which raises the loader's errors).
"""

from __future__ import annotations

import torch

from ..format import torch_dtype
from ..index import Checkpoint, Node
from ..index._facts import leaf_entry, size_problems
from ..storage import Store

__all__ = ["GAP", "RangedLeaf", "ranged_leaf"]

GAP = 64 << 10  # runs of a view closer than this are read as one range


class RangedLeaf:
    """A plain leaf of a store that is read by byte ranges (see the module docstring).

    Attributes
    ----------
    meta : torch.Tensor
        The leaf on the ``meta`` device, C-contiguous: slice it, then :meth:`read`.
    """

    def __init__(self, store: Store, key: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
        self.store, self.key, self.dtype = store, key, dtype
        self.meta = torch.empty(shape, dtype=dtype, device="meta")
        self._last: tuple[tuple, torch.Tensor] | None = None  # the last view read

    def read(self, view: torch.Tensor) -> torch.Tensor:
        """The values of ``view`` (a view of :attr:`meta`) as a CPU tensor of its shape,
        read now in coalesced ranges."""
        if view.device.type != "meta":
            return view  # already in memory
        if view.numel() == 0:
            return torch.empty(view.shape, dtype=self.dtype)
        shown = (view.storage_offset(), tuple(view.shape), view.stride())
        if self._last is not None and self._last[0] == shown:
            return self._last[1]  # statistics, then the histogram: one chunk read once
        self._last = (shown, self._read(view))
        return self._last[1]

    def _read(self, view: torch.Tensor) -> torch.Tensor:
        starts, run = _runs(view)
        order = None
        if starts.numel() > 1 and bool((starts[1:] < starts[:-1]).any()):
            starts, order = starts.sort()
        size = self.dtype.itemsize
        # a new range where the gap since the run before is more than GAP bytes
        cut = torch.ones(starts.numel(), dtype=torch.bool)
        cut[1:] = (starts[1:] - starts[:-1] - run) * size > GAP
        first = starts[cut]
        group = cut.cumsum(0) - 1
        ends = torch.ones_like(cut)  # a range ends where the next one starts, and at the end
        ends[:-1] = cut[1:]
        last = starts[ends] + run
        lengths = last - first
        at = lengths.cumsum(0) - lengths  # where each range's elements go in the buffer
        buffer = torch.empty(int(lengths.sum()), dtype=self.dtype)
        spans = [(a * size, b * size) for a, b in zip(first.tolist(), last.tolist(), strict=True)]
        self.store.read_ranges(self.key, spans, buffer.view(torch.uint8).numpy().data)
        if starts.numel() == 1 and first.numel() == 1:
            return buffer.view(view.shape)
        where = at[group] + starts - first[group]  # each run's place in the buffer
        if order is not None:
            where = torch.empty_like(where).scatter_(0, order, where)
        index = (where[:, None] + torch.arange(run)).reshape(-1)
        return buffer[index].view(view.shape)


def _runs(view: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The element offsets where the runs of ``view`` start (in C order) and the length
    of a run: its innermost dims that are contiguous make one run."""
    dims = [(n, s) for n, s in zip(view.shape, view.stride(), strict=True) if n != 1]
    run = 1
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    starts = torch.tensor([view.storage_offset()], dtype=torch.int64)
    for n, s in dims:
        starts = (starts[:, None] + torch.arange(n, dtype=torch.int64) * s).reshape(-1)
    return starts, run


def ranged_leaf(ckpt: Checkpoint, node: Node) -> RangedLeaf | None:
    """The leaf at ``node`` read by ranges, when its store cannot be mapped and its bytes
    lie as they are in the store; else None (load it)."""
    store, record = ckpt.store, node.record
    if (
        store.mappable
        or record is None
        or record.is_nested
        or node.file is None
        or not record.numel
        or not record.dtype.loadable
    ):
        return None
    entry = leaf_entry(store, node)
    if (
        entry is None
        or entry.compression != "stored"
        or entry.stored_size != entry.size
        or size_problems(store, node)
    ):
        return None
    return RangedLeaf(store, node.file, torch_dtype(record.dtype), tuple(record.shape))
