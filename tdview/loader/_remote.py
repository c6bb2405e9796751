"""Loading from a store that cannot be memory-mapped (a remote one): read first, then build.

Before the tree is built, every file the subtree's leaves need (data and nested sizes)
is read with the store's ``fetch``: the store coalesces them into ranged reads issued
concurrently (see :mod:`tdview.storage._remote_archive` and ``_remote_dir``). The loader
then takes each leaf's bytes from :class:`Fetched` where it would have mapped them: the
leaf is a tensor over the bytes read (sharing the buffer of its read with its
neighbours), of the same type as a local load gives (a ``MemoryMappedTensor`` with no
file for a folder, a plain tensor for an archive, an HDF5 file or a zarr store: see
``Store.leaves_in_memory``), or copied when its offset in the
buffer does not suit its dtype. ``progress`` is called with each leaf's path as its bytes
arrive (the build then reports nothing more), and an exception raised by it cancels the
reads still in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch

from ..errors import LeafDataError, RemoteModeError
from ..index import Node, Tree, walk

__all__ = ["Fetched", "check_remote_mode", "fetch_subtree", "remote_flat"]


def check_remote_mode(ckpt: Tree, mode: str | None) -> None:
    """Refuse ``mode="r+"`` for a store that cannot be mapped."""
    if mode == "r+" and not ckpt.store.mappable:
        foreign = ckpt.store.foreign_format  # an HDF5 file, a zarr store: read, not mapped
        what = "a remote checkpoint" if foreign is None else foreign
        change = "copy it to a local disk" if foreign is None else "write it with its library"
        raise RemoteModeError(
            f"Cannot open {ckpt.path} with mode='r+': it is {what}, whose leaves are read "
            "into memory, so writes to them cannot reach its files. Load it with mode='r' "
            f"or the default mode, or {change} to change it."
        )


class Fetched:
    """The bytes read for a load, by store key (see the module docstring)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def has(self, key: str) -> bool:
        return key in self._data

    def update(self, data: dict[str, Any]) -> None:
        """Add bytes read elsewhere (an indexed load's rows: :mod:`._index`)."""
        self._data.update(data)

    def flat(
        self, key: str, dtype: torch.dtype, need: int, *, exact: bool, display: str
    ) -> torch.Tensor:
        """The first ``need`` bytes of ``key`` as a flat tensor of ``dtype``.

        Raises
        ------
        LeafDataError
            The file holds fewer bytes (or, with ``exact``, another number).
        """
        found = self._data.pop(key)
        if isinstance(found, Exception):
            raise found
        have = len(found)
        if have < need or (exact and have != need):
            raise LeafDataError(
                f"{display} holds {have} bytes, but the leaf needs "
                f"{'exactly ' if exact else ''}{need} bytes ({dtype} elements). tdview does "
                "not grow files: the file was truncated, or does not belong to this "
                "checkpoint."
            )
        flat = torch.from_numpy(found[:need])
        if flat.data_ptr() % dtype.itemsize:
            flat = flat.clone()
        return flat.view(dtype)


def remote_flat(ctx: Any, key: str, dtype: torch.dtype, need: int, *, exact: bool) -> torch.Tensor:
    """What the loader maps for a local store, from the bytes read for this load (or read
    now: a leaf loaded on its own, such as a preview's). ``ctx``: the LoadContext."""
    if need == 0:
        return torch.empty(0, dtype=dtype)
    fetched = ctx.fetched
    if fetched is None or not fetched.has(key):
        fetched = Fetched(ctx.store.fetch({key: None if exact else need}))
    return fetched.flat(key, dtype, need, exact=exact, display=ctx.store.display(key))


def fetch_subtree(
    ckpt: Tree,
    node: Node,
    progress: Callable[[tuple[str, ...]], object] | None,
    skip: Collection[str] = (),
) -> Fetched:
    """Read the bytes of every leaf file below ``node`` (see the module docstring) but
    those of ``skip`` (read by an indexed load's rows)."""
    wanted: dict[str, int | None] = {}
    paths: dict[str, tuple[str, ...]] = {}
    for child in walk(ckpt, node):
        record = child.record
        if not child.is_leaf or record is None:
            continue
        if child.file is not None and child.file not in skip:
            if record.is_nested:
                wanted[child.file] = None
            elif record.nbytes:  # no bytes to read for a leaf without elements
                wanted[child.file] = record.nbytes
            if child.file in wanted:
                paths[child.file] = child.path
        if child.sizes_file is not None:
            wanted[child.sizes_file] = None

    def done(key: str) -> None:
        path = paths.get(key)
        if path is not None and progress is not None:
            progress(path)

    data = ckpt.store.fetch(wanted, done=done)
    return Fetched(data)
