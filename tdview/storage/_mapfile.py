"""Map an archive file read-only, refusing what cannot be a checkpoint archive."""

from __future__ import annotations

import mmap
import os
import stat

from ..errors import NotACheckpointError
from ._zip import EOCD

__all__ = ["map_file", "not_a_checkpoint"]


def not_a_checkpoint(path: str, why: str) -> NotACheckpointError:
    """The error for a path that is neither a checkpoint directory nor an archive.

    Examples
    --------
    The message keeps the reference loader's phrase "is a file but not a memory-mapped
    tensordict archive", so code that matches tensordict's message keeps working.

    >>> "is a file but not a memory-mapped tensordict" in str(not_a_checkpoint("/x", "empty"))
    True
    """
    return NotACheckpointError(
        f"{path} is a file but not a memory-mapped tensordict archive (expected a zip file "
        f"with a top-level meta.json entry): {why}."
    )


def map_file(path: str) -> mmap.mmap:
    """Map the regular file ``path`` read-only, once, for the life of a store.

    Raises
    ------
    NotACheckpointError
        If ``path`` is not a regular file, or is shorter than a zip end record.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_a_checkpoint(path, "not a regular file")
        if st.st_size < EOCD.size:
            raise not_a_checkpoint(path, f"the file is only {st.st_size} bytes long")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)  # the mapping keeps its own reference to the file
