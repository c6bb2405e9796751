"""Reading a local checkpoint folder by folder, through descriptors (Linux).

A load of a whole tree (a model saved with one folder per module) opens every folder's
``meta.json`` and every leaf file. By key, each open walks the path from the root again
and each folder is first probed with an ``lstat``. Here a walk holds each folder open
(``O_PATH``, nothing read) while it is in it, opens the next one by name in it, and its
``meta.json`` and leaves too: one system call per file or folder, no path walked twice,
and nothing on the way can be a symlink (every name is opened with ``O_NOFOLLOW``; a
folder with ``O_DIRECTORY`` as well). Every file is checked on the descriptor opened
(``fstat``: a regular file, within the size limit).

These calls answer None (or -1) for anything but the plain case: an absent name, a
symlink, a FIFO, an odd name, a file too large, an error. The caller then asks the
store by key, whose general path tells what it is (an error naming the file, a link
the policy allows, a missing leaf left out with its warning).
"""

from __future__ import annotations

import errno
import os

__all__ = ["FolderWalk"]

_O_PATH = getattr(os, "O_PATH", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_FOLDER = _O_PATH | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
_S_IFMT, _S_IFREG = 0o170000, 0o100000
# errors that say "not for writing" (the file, its file system, or O_NOATIME refused)
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY)
# a file opened by a walk: a FIFO swapped in never blocks, a symlink is refused
_READ = os.O_RDONLY | _NONBLOCK | _NOFOLLOW
_WRITE = os.O_RDWR | _NONBLOCK | _NOFOLLOW


def _plain(name: str) -> bool:
    """A name that opens one entry of the folder itself: not empty, no ``/``, no leading
    dot (``.``, ``..``, hidden names take the store's checks)."""
    return bool(name) and name[0] != "." and "/" not in name


class FolderWalk:
    """Descriptor-relative reads of one directory store's folders (see the module).

    Parameters
    ----------
    noatime : int
        ``O_NOATIME`` where the store may use it (dropped at its first refusal), else 0.

    Examples
    --------
    >>> walk, fd = store.folder_walk("model")                         # doctest: +SKIP
    >>> walk.read_meta(fd, 1 << 20)[:1]                               # doctest: +SKIP
    b'{'
    >>> os.close(fd)                                                  # doctest: +SKIP
    """

    __slots__ = ("_write_refused", "noatime")

    def __init__(self, noatime: int) -> None:
        self.noatime = noatime
        # a file refused opening for writing: mode=None asks os.access from now on
        self._write_refused = False

    def _open(self, name: str, flags: int, fd: int) -> int:
        """``openat`` with the walk's flags; O_NOATIME dropped when it is refused."""
        try:
            return os.open(name, flags | self.noatime, dir_fd=fd)
        except PermissionError:
            if not self.noatime:
                raise
            self.noatime = 0  # not the owner: never again for this walk
            return os.open(name, flags, dir_fd=fd)

    def folder(self, fd: int, name: str) -> int:
        """The descriptor (``O_PATH``) of the sub-folder ``name`` of folder ``fd``, or -1
        (absent, a file, a symlink, an odd name). The caller closes it."""
        if not _plain(name):
            return -1
        try:
            return os.open(name, _FOLDER, dir_fd=fd)
        except (OSError, ValueError):
            return -1

    def read_meta(self, fd: int, limit: int) -> bytes | None:
        """The bytes of folder ``fd``'s ``meta.json``: a regular file of at most ``limit``
        bytes (None otherwise: the store's read tells why)."""
        try:
            file = self._open("meta.json", _READ, fd)
        except OSError:
            return None
        try:
            st = os.fstat(file)
            size = st.st_size
            if st.st_mode & _S_IFMT != _S_IFREG or size > limit:
                return None
            data = os.read(file, size + 1)
        except OSError:
            return None
        finally:
            os.close(file)
        return data if len(data) <= size else None  # it grew: the store's read decides

    def file_size(self, fd: int, name: str) -> int:
        """The size of the regular file ``name`` in folder ``fd`` (``fstatat``, nothing
        followed), or -1."""
        if not _plain(name):
            return -1
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (OSError, ValueError):
            return -1
        return st.st_size if st.st_mode & _S_IFMT == _S_IFREG else -1

    def open_leaf(self, fd: int, name: str, mode: str | None) -> tuple[int, int, bool] | None:
        """Open the regular file ``name`` of folder ``fd`` to map it: ``(descriptor, size,
        whether it is open for writing)``, or None. ``mode``: ``"r"`` reads, ``"r+"``
        writes, None writes where the process may (a read-only file is opened for
        reading). The caller closes the descriptor."""
        if not _plain(name):
            return None
        write = mode != "r"
        try:
            if write and mode is None and self._write_refused:
                write = os.access(name, os.W_OK, dir_fd=fd)
            try:
                file = self._open(name, _WRITE if write else _READ, fd)
            except OSError as error:
                if not (write and mode is None and error.errno in _READ_ONLY):
                    return None
                self._write_refused, write = True, False
                file = self._open(name, _READ, fd)
        except (OSError, ValueError):
            return None
        try:
            st = os.fstat(file)
        except OSError:
            os.close(file)
            return None
        if st.st_mode & _S_IFMT != _S_IFREG:
            os.close(file)
            return None
        return file, st.st_size, write
