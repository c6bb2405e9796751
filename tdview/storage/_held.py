"""The folders a directory store opens files in, held open for the store's life.

On Linux a folder is opened once (``O_PATH``: nothing is read) and its files are then
looked at and opened through that descriptor (``fstatat``, ``openat``, the last name
not followed): no folder on the way, swapped for a symlink after it was checked, can
lead elsewhere. A folder below the root is opened in its parent's descriptor, name by
name from the root, none followed. One elsewhere (a content store's ``blobs/``) is
opened by its path and kept only when that is its real path: its own name is opened
without following, and the folders above it are the root's real path or its
ancestors (real already), or ``/proc/self/fd`` says so. Where
no folder can be held (no ``O_PATH``, no ``/proc/self/fd``), every call answers -1 or
None and the store takes its per-key path.

A bounded number is held (all closed at once beyond it, but for the folders above the
one being held, then opened again on demand);
:meth:`HeldFolders.close` closes them, as the store's ``close`` (and its finalizer)
does.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ._checked import proc_name

__all__ = ["HeldFolders"]

_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_PATH_FLAGS = _O_PATH | _O_DIRECTORY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# Folders held per store: a checkpoint's leaf folders are met one after another, and a
# content store's blobs/ is one (git-annex keeps a folder per object).
_HELD = 64


class HeldFolders:
    """Descriptors of real folders, by real path (see the module).

    Parameters
    ----------
    prefix : str
        The root's real path with a trailing separator.
    usable : callable
        Whether ``/proc/self/fd`` names what is opened (asked once, on first use).
    root_fd : int, optional
        The root, already open ``O_PATH`` by its real path (held from now on).
    """

    def __init__(self, prefix: str, usable: Callable[[], bool], root_fd: int = -1) -> None:
        self.prefix = prefix
        self._usable: Callable[[], bool] | None = usable
        self.fds: dict[str, int] = {}  # real folder -> descriptor, or -1: cannot be held
        if root_fd >= 0:  # the root, opened by its real path already (it is held now)
            self.fds[prefix[:-1] or os.sep] = root_fd

    def fd(self, where: str) -> int:
        """The descriptor of the real folder ``where``, opened on first use; -1 where it
        cannot be held as that very folder."""
        fd = self.fds.get(where)
        if fd is not None:
            return fd
        usable = self._usable
        if usable is not None and not usable():
            self._usable = None  # no /proc/self/fd: never held
        if self._usable is None or not _O_PATH:
            return self._hold(where, -1)
        if where.startswith(self.prefix):
            return self._inside(where)
        try:
            fd = os.open(where, _PATH_FLAGS)
        except OSError:
            return self._hold(where, -1)
        above = where.rpartition(os.sep)[0] + os.sep
        if not self.prefix.startswith(above) and proc_name(fd) != where:
            os.close(fd)  # a symlink on the way: the per-key path decides
            fd = -1
        return self._hold(where, fd)

    def _inside(self, where: str) -> int:
        """:meth:`fd` of a folder below the root: opened in its parent's descriptor (and
        each folder above it not held yet, from the nearest one held, or the root), so
        no name on the way is followed and no path is looked up in ``/proc``."""
        chain = [where]
        parent = where.rpartition(os.sep)[0]
        while parent + os.sep != self.prefix and parent not in self.fds:
            chain.append(parent)
            parent = parent.rpartition(os.sep)[0]
        fd = self.fd(parent)  # held, or the root (its real path: opened by it)
        for folder in reversed(chain):
            if fd >= 0:
                try:
                    fd = os.open(folder.rpartition(os.sep)[2], _PATH_FLAGS, dir_fd=fd)
                except OSError:
                    fd = -1  # gone, or a symlink now: the per-key path decides
            fd = self._hold(folder, fd)
        return fd

    def _hold(self, where: str, fd: int) -> int:
        fds = self.fds
        if len(fds) >= _HELD:
            # all closed at once, but for the folders above this one: a walk goes on in
            # them (and opens the next folders in their descriptors)
            kept = {}
            up = where.rpartition(os.sep)[0]
            while up and (held := fds.pop(up, None)) is not None:
                kept[up] = held
                up = up.rpartition(os.sep)[0]
            self.close()
            fds.update(kept)
        fds[where] = fd
        return fd

    def split(self, real: str) -> tuple[int, str]:
        """``(descriptor of its folder or -1, its name)`` of the real path ``real``."""
        where, _, name = real.rpartition(os.sep)
        return self.fd(where or os.sep), name

    def close(self) -> None:
        """Close every folder held, and forget them."""
        fds = self.fds
        for fd in fds.values():
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        fds.clear()
