"""Opening a resolved path and checking, on the descriptor opened, that it is that file.

A key reached through a symlink is resolved (``os.path.realpath``) and checked against
the root and the link policy before it is opened; a checkpoint can change in between
(another process saving, a shared file system, an attacker swapping a folder for a
symlink). So the real path is opened with ``O_NOFOLLOW`` (no symlink swapped in at its
end) and the descriptor is checked to be the file at that path: the path Linux gives
for it in ``/proc/self/fd``, or elsewhere the same device and inode as the path has now.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from functools import lru_cache

from ..errors import UnsafeCheckpointError

__all__ = ["map_path", "open_checked", "proc_name", "proc_names", "readlink_or"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_checked(opener: Callable[[str, int], int], real: str, display: str, real_root: str) -> int:
    """Open ``real`` read-only with ``opener(path, extra flags)`` and return the descriptor.

    Parameters
    ----------
    opener : callable
        Opens a path read-only with the extra flags given (the store's ``_open``).
    real : str
        A real path (no symlink in it when it was resolved).
    display : str
        The key's name in messages.
    real_root : str
        The checkpoint root's real path (tells whether ``/proc/self/fd`` can be trusted).

    Raises
    ------
    UnsafeCheckpointError
        ``real`` became a symlink, or the file opened is not the one at ``real``.

    Examples
    --------
    >>> fd = open_checked(lambda p, f: os.open(p, os.O_RDONLY | f), "/ck/a.memmap",
    ...                   "/ck/a.memmap", "/ck")               # doctest: +SKIP
    """
    try:
        fd = opener(real, _NOFOLLOW)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise UnsafeCheckpointError(
            f"refusing {display}: {real} became a symlink after it was checked."
        ) from None
    if not _is_at(fd, real, real_root):
        os.close(fd)
        raise UnsafeCheckpointError(
            f"refusing {display}: the file opened is not {real} (a folder on its path "
            "changed after it was checked)."
        )
    return fd


def map_path(fd: int, real: str, real_root: str) -> str:
    """A path that opens the very file of descriptor ``fd``, for an API that takes a path
    (``torch.from_file``): ``/proc/self/fd/<fd>`` on Linux, ``real`` elsewhere."""
    return f"/proc/self/fd/{fd}" if proc_names(real_root) else real


def _is_at(fd: int, real: str, real_root: str) -> bool:
    """Whether the descriptor ``fd`` is the file at ``real`` (see the module)."""
    if proc_names(real_root):
        return proc_name(fd) == real
    try:
        opened, now = os.fstat(fd), os.stat(real)
    except OSError:
        return False
    return (opened.st_dev, opened.st_ino) == (now.st_dev, now.st_ino)


@lru_cache(maxsize=256)
def proc_names(real_root: str) -> bool:
    """Whether ``/proc/self/fd`` gives real paths below ``real_root`` (Linux, where no
    bind mount or namespace makes them differ)."""
    return proc_name(real_root) == real_root


def readlink_or(path: str) -> str:
    """What the symlink ``path`` says (its own path when it is none, or unreadable)."""
    try:
        return os.readlink(path)
    except OSError:
        return path


def proc_name(fd_or_path: int | str) -> str | None:
    """The path Linux gives for an open descriptor (or for a folder, opened for this),
    or None where ``/proc/self/fd`` does not tell."""
    try:
        fd = (
            fd_or_path
            if isinstance(fd_or_path, int)
            else os.open(fd_or_path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        )
    except OSError:
        return None
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    finally:
        if not isinstance(fd_or_path, int):
            os.close(fd)
