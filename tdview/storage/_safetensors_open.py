"""Opening a safetensors checkpoint: a local file, a shard set (its index, or the folder
holding it), or a remote file or shard set over fsspec."""

from __future__ import annotations

import os
import stat

from ._base import not_found
from ._mapfile import READ_FLAGS
from ._safetensors_files import LocalShard
from ._safetensors_store import SafetensorsStore

__all__ = ["open_safetensors"]


def open_safetensors(path: str) -> SafetensorsStore:
    """Open the local safetensors file ``path`` (followed if it is a link: the user named
    it) as a store.

    Examples
    --------
    >>> open_safetensors("/models/model.safetensors").kind           # doctest: +SKIP
    'safetensors'
    """
    root = os.path.abspath(path)

    def reopen(write: bool) -> int:
        return os.open(root, READ_FLAGS | (os.O_RDWR if write else 0))

    fd = reopen(False)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise not_found(root)
    shard = LocalShard(root, fd, st, reopen)
    return SafetensorsStore(root, [shard], metadata=shard.header.metadata)
