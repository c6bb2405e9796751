"""A checkpoint saved as a directory tree (``td.memmap(path)``)."""

from __future__ import annotations

import os
import stat

from ..errors import LimitExceededError, UnsafeCheckpointError
from ._base import EntryInfo, Store, check_key, not_found

__all__ = ["DirectoryStore"]

# O_NOATIME avoids updating access times, but only the file's owner may use it.
_NOATIME = getattr(os, "O_NOATIME", 0)
# O_NONBLOCK keeps a FIFO swapped in after the stat from blocking the open.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


class DirectoryStore(Store):
    """Read the files of a checkpoint directory, confined to that directory.

    Every key is checked (no ``..``, no absolute key) and resolved with
    :func:`os.path.realpath`; a key or a symlink that resolves outside the root's
    real path raises :class:`~tdview.errors.UnsafeCheckpointError`. The store never
    creates, writes or opens for writing; sizes come from ``os.stat``.

    Parameters
    ----------
    path : str or os.PathLike
        An existing directory.

    Examples
    --------
    >>> store = DirectoryStore("/ckpt")                      # doctest: +SKIP
    >>> store.read_bytes("meta.json", limit=1 << 20)[:1]     # doctest: +SKIP
    b'{'
    """

    kind = "directory"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(path))
        if not os.path.isdir(self.root):
            raise NotADirectoryError(f"{self.root} is not a directory")
        self._real_root = os.path.realpath(self.root)
        self._prefix = self._real_root.rstrip(os.sep) + os.sep

    def display(self, key: str) -> str:
        return os.path.join(self.root, key) if key else self.root

    def file_path(self, key: str) -> str:
        """Return the absolute real path of ``key``, after checking it stays inside.

        Parameters
        ----------
        key : str
            A relative key; the path need not exist.

        Raises
        ------
        UnsafeCheckpointError
            If the key is unsafe or resolves (through symlinks) outside the root.
        """
        check_key(key, self.root)
        if not key:
            return self._real_root
        real = os.path.realpath(os.path.join(self._real_root, *key.split("/")))
        if real != self._real_root and not real.startswith(self._prefix):
            raise UnsafeCheckpointError(
                f"refusing key {key!r} in {self.root}: it resolves to {real}, "
                f"outside the checkpoint root {self._real_root}."
            )
        return real

    def _stat(self, key: str) -> tuple[str, os.stat_result]:
        """Return ``(real path, stat)`` of an existing key, or raise FileNotFoundError."""
        real = self.file_path(key)
        try:
            return real, os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            raise not_found(self.display(key)) from None

    def is_file(self, key: str) -> bool:
        return os.path.isfile(self.file_path(key))

    def is_dir(self, key: str) -> bool:
        return os.path.isdir(self.file_path(key))

    def list_dir(self, key: str) -> list[str]:
        real, st = self._stat(key)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(f"{self.display(key)} is not a directory")
        return sorted(os.listdir(real))

    def entry(self, key: str) -> EntryInfo:
        real, st = self._stat(key)
        self._require_regular(key, st)
        return EntryInfo(
            key=key,
            display=self.display(key),
            size=st.st_size,
            stored_size=st.st_size,
            compression="stored",
            crc32=None,
            file=real,
        )

    def _require_regular(self, key: str, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            # FIFOs and devices could block or never end: refuse them outright.
            raise UnsafeCheckpointError(
                f"refusing {self.display(key)}: not a regular file (mode {st.st_mode:#o})."
            )

    def read_bytes(self, key: str, limit: int) -> bytes:
        real, st = self._stat(key)
        self._require_regular(key, st)
        self._check_limit(key, st.st_size, limit)
        fd = _open_read(real)
        try:
            st = os.fstat(fd)  # the file may have been swapped since the stat
            self._require_regular(key, st)
            self._check_limit(key, st.st_size, limit)
            chunks = []
            left = limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        self._check_limit(key, len(data), limit)  # it grew while we read it
        return data

    def _check_limit(self, key: str, size: int, limit: int) -> None:
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {size} bytes, above the limit of {limit} bytes."
            )

    def writable(self, key: str | None = None) -> bool:
        target = self._real_root if key is None else self.file_path(key)
        return os.access(target, os.W_OK)


def _open_read(path: str) -> int:
    """Open ``path`` read-only, without updating its access time when allowed."""
    if _NOATIME:
        try:
            return os.open(path, _READ_FLAGS | _NOATIME)
        except PermissionError:
            pass  # not the owner: O_NOATIME is refused, open normally
    return os.open(path, _READ_FLAGS)
