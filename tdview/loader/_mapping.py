"""The one memory map of an archive that every STORED leaf is a view of.

An archive is mapped once per :class:`~tdview.index.Checkpoint` and per kind of mapping:
private (copy-on-write: writes stay in memory) for ``mode="r"``/``None``, shared (writes
reach the file) for ``mode="r+"``. The mapping is a flat ``uint8`` CPU tensor of the whole
file; a leaf is a slice of it viewed as its dtype and shape, so all leaves share one
storage and only the pages a leaf touches are read.
"""

from __future__ import annotations

import os
import weakref

import torch

from ..index import Tree
from ._fdmap import AVAILABLE, map_descriptor

__all__ = ["archive_mapping", "check_writable"]

# Checkpoint -> {shared: mapping}. Weak keys: a mapping lives as long as its Checkpoint
# (and as long as any leaf viewing it, through the tensor's storage).
_MAPPINGS: weakref.WeakKeyDictionary[Tree, dict[tuple[bool, str], torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def check_writable(path: str) -> None:
    """Raise ``PermissionError`` unless the process may write ``path`` (for ``mode="r+"``).

    Examples
    --------
    >>> check_writable("/proc/version")                   # doctest: +SKIP
    Traceback (most recent call last):
    PermissionError: Cannot open /proc/version with mode='r+': the file is not writable.
    """
    if not os.access(path, os.W_OK):
        raise PermissionError(f"Cannot open {path} with mode='r+': the file is not writable.")


def archive_mapping(ckpt: Tree, *, shared: bool, file: str = "") -> torch.Tensor:
    """The flat ``uint8`` mapping of the checkpoint's archive file (made once, then reused).

    Parameters
    ----------
    ckpt : Checkpoint
        A checkpoint whose store is a local archive (``Store.packed`` and ``mappable``).
    shared : bool
        True maps the file shared (``mode="r+"``), False copy-on-write.
    file : str
        Which file of a store of several (:meth:`Store.map_key`); ``""``: the one file.

    Raises
    ------
    ArchiveError
        The file's size changed since the checkpoint was opened (a shared mapping of a
        shorter file would grow it, and the offsets the index read would be stale), or
        its path names another file now.

    Examples
    --------
    >>> m = archive_mapping(Checkpoint("ckpt.tdz"), shared=False)      # doctest: +SKIP
    >>> m.dtype, m.untyped_storage().nbytes() == os.path.getsize("ckpt.tdz")  # doctest: +SKIP
    (torch.uint8, True)
    """
    maps = _MAPPINGS.setdefault(ckpt, {})
    mapping = maps.get((shared, file))
    if mapping is None:
        store = ckpt.store
        # the very file the index read, of its size: checked on the descriptor opened,
        # and mapped from it (the path is not opened again)
        fd, st, _ = store.map(file, write=shared)
        try:
            size = st.st_size
            if AVAILABLE:
                mapping = map_descriptor(fd, torch.uint8, size, shared=shared)
            else:  # device="cpu": an active torch.device context must not move it
                mapping = torch.from_file(
                    store.opened_path(fd, file),
                    shared=shared,
                    size=size,
                    dtype=torch.uint8,
                    device="cpu",
                )
        finally:
            os.close(fd)
        maps[shared, file] = mapping
    return mapping
