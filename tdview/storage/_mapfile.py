"""Map an archive file read-only, refusing what cannot be a checkpoint archive."""

from __future__ import annotations

import mmap
import os
import stat

from ..errors import NotACheckpointError
from ._zip import EOCD

__all__ = ["READ_FLAGS", "map_file", "map_file_stat", "not_a_checkpoint"]


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
    return map_file_stat(path)[0]


def map_file_stat(path: str) -> tuple[mmap.mmap, os.stat_result]:
    """:func:`map_file`, with the ``fstat`` of the file mapped (which file it is: a file
    opened later by its path is checked to be that one). Opened without blocking (a FIFO
    swapped in after a ``stat`` is refused, not waited on)."""
    fd = os.open(path, READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_a_checkpoint(path, "not a regular file")
        if st.st_size < EOCD.size:
            raise not_a_checkpoint(path, f"the file is only {st.st_size} bytes long")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), st
    finally:
        os.close(fd)  # the mapping keeps its own reference to the file


#: ``os.open`` flags of a file tdview reads: never blocking (a FIFO), binary (Windows).
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
