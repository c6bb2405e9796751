"""A tensordict consolidated file (``td.consolidate(filename=...)``) as a store.

The file is presented as the folders a memory-mapped save writes (see
:mod:`._consolidated_layout`): each level a folder with a ``meta.json`` made from the
file's JSON footer, each leaf a ``<key>.memmap`` file that is the span of the payload
holding its bytes. The store is *packed* as an archive is: every file lies in the one
file, stored as it is (never compressed), exactly its leaf's size, and a mapped load
makes each leaf a view of one read-only mapping of the file (:meth:`map`,
:meth:`stored_span`). Opening reads the last 8 bytes and the footer, nothing else.
No CRC-32 is recorded (``crc32`` is None).

tensordict's ``load_memmap`` does not read such a file (``TensorDict.from_consolidated``
does): :attr:`foreign_format` says so.
"""

from __future__ import annotations

import mmap
import os
import stat
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArchiveError, LeafDataError, LimitExceededError, NotACheckpointError
from ._base import EntryInfo, Mapped, Payload, Store
from ._consolidated_layout import FOOTER, Folder, Layout, footer_length, looks_consolidated
from ._key_safety import check_key, not_found
from ._mapfile import READ_FLAGS

if TYPE_CHECKING:
    from typing_extensions import Buffer  # what read_into fills: any writable buffer

__all__ = ["CONSOLIDATED", "ConsolidatedFile", "ConsolidatedStore", "is_consolidated"]

#: what :attr:`Store.foreign_format` says of a consolidated file
CONSOLIDATED = "a tensordict consolidated file (TensorDict.from_consolidated reads it)"


class ConsolidatedFile(Store):
    """What a consolidated file's store answers from its footer alone (the folders, the
    files and where each lies): the local :class:`ConsolidatedStore` and the remote
    :class:`~._consolidated_remote.RemoteConsolidatedStore` differ only in how they
    read bytes (:meth:`_read_span`)."""

    kind = "archive"
    packed = True
    foreign_format = CONSOLIDATED
    layout: Layout

    def _read_span(self, start: int, out: memoryview) -> None:
        """Fill ``out`` with the file's bytes from ``start``."""
        raise NotImplementedError

    # -- the Store interface -----------------------------------------------------------

    def display(self, key: str) -> str:
        return f"{self.root}::{key}" if key else self.root

    def _folder(self, dirkey: str) -> Folder | None:
        check_key(dirkey, self.root)
        return self.layout.folder(dirkey)

    def is_file(self, key: str) -> bool:
        check_key(key, self.root)
        folder, name = self.layout.split(key)
        return folder is not None and (
            name == "meta.json" or name in folder.files or name in folder.sizes
        )

    def is_dir(self, key: str) -> bool:
        return self._folder(key) is not None

    def list_dir(self, key: str) -> list[str]:
        folder = self._folder(key)
        if folder is None:
            if key and self.is_file(key):
                raise NotADirectoryError(f"{self.display(key)} is not a directory")
            raise not_found(self.display(key))
        return folder.names()

    def plain_entries(
        self, key: str, wanted: int | None = None
    ) -> tuple[frozenset[str] | None, frozenset[str] | None]:
        folder = self.layout.folder(key)
        if folder is None:
            return None, None
        return frozenset([*folder.files, *folder.sizes]), frozenset(folder.dirs)

    def plain_files(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return self.plain_entries(key, wanted)[0]

    def plain_dirs(self, key: str, wanted: int | None = None) -> frozenset[str] | None:
        return self.plain_entries(key, wanted)[1]

    def _file(self, key: str) -> tuple[int, int] | bytes:
        """A leaf's ``(offset, size)`` in the file, or the bytes of a file made from the
        footer (a ``meta.json``) or from a jagged leaf's offsets (its sizes)."""
        check_key(key, self.root)
        folder, name = self.layout.split(key)
        if folder is not None:
            if name == "meta.json":
                return folder.meta
            span = folder.files.get(name)
            if span is not None:
                return span
            sizes = folder.sizes.get(name)
            if sizes is not None:
                return self._sizes(key, *sizes)
        if self.layout.folder(key) is not None:
            raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
        raise not_found(self.display(key))

    def _sizes(self, key: str, start: int, size: int, rest: tuple[int, ...]) -> bytes:
        """The ``[N, D]`` int64 sizes of a jagged leaf's elements (``.shape.memmap``, as a
        memmap save writes a nested leaf's), from its ``N + 1`` offsets in the file."""
        raw = bytearray(size)
        self._read_span(start, memoryview(raw))
        offsets = np.frombuffer(raw, dtype="<i8")
        lengths = np.diff(offsets)
        if not len(offsets) or offsets[0] != 0 or (lengths < 0).any():
            raise LeafDataError(
                f"{self.display(key)}: a jagged tensor's offsets must start at 0 and never "
                f"decrease, got {offsets[:8].tolist()}{'...' if len(offsets) > 8 else ''}."
            )
        rows = np.empty((len(lengths), 1 + len(rest)), dtype="<i8")
        rows[:, 0] = lengths
        rows[:, 1:] = rest
        return rows.tobytes()

    def _span(self, key: str) -> tuple[int | None, int]:
        found = self._file(key)
        return (None, len(found)) if isinstance(found, bytes) else found

    def _how(self, key: str) -> str:
        """``"stored"``, or ``"derived"`` for a jagged leaf's sizes, made from its offsets
        (read whole: ``decompress``, never mapped or read by range)."""
        folder, name = self.layout.split(key)
        return "derived" if folder is not None and name in folder.sizes else "stored"

    def entry(self, key: str) -> EntryInfo:
        size = self._span(key)[1]
        return EntryInfo(key, self.display(key), size, size, self._how(key), None, None)

    def locate(self, key: str) -> Payload:
        """A leaf's span in the file (mappable in place where the store maps), or a file
        made from the footer or from offsets (no offset: it is read, never mapped)."""
        offset, size = self._span(key)
        how = self._how(key)
        return Payload(
            key=key,
            display=self.display(key),
            file=None,
            in_archive=True,
            offset=offset,
            size=size,
            stored_size=size,
            compression=how,
            crc32=None,
            encrypted=False,
            as_stored=how == "stored",
            mappable=self.mappable and offset is not None,
            error=None
            if offset is not None
            else ArchiveError(
                f"{self.display(key)} is made from the consolidated footer: it has no bytes "
                "of its own in the file."
            ),
        )

    def read_bytes(self, key: str, limit: int) -> bytes:
        found = self._file(key)
        size = len(found) if isinstance(found, bytes) else found[1]
        if size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {size} bytes, above the limit of {limit} bytes."
            )
        if isinstance(found, bytes):
            return found
        out = bytearray(size)
        self._read_span(found[0], memoryview(out))
        return bytes(out)

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        found = self._file(key)
        out = memoryview(buf).cast("B")
        size = len(found) if isinstance(found, bytes) else found[1]
        if offset < 0 or offset + len(out) > size:
            raise ValueError(
                f"{self.display(key)}: bytes {offset}..{offset + len(out)} lie outside its "
                f"{size} bytes."
            )
        if isinstance(found, bytes):
            out[:] = found[offset : offset + len(out)]
        elif len(out):
            self._read_span(found[0] + offset, out)


class ConsolidatedStore(ConsolidatedFile):
    """Read a consolidated file as the folders of a memory-mapped save.

    Parameters
    ----------
    path : str or os.PathLike
        The file. It is opened read-only and mapped once.

    Raises
    ------
    NotACheckpointError
        The file does not end with a consolidated footer.
    CheckpointFormatError, LimitExceededError, UnsafeCheckpointError
        The footer is not what tensordict writes, too large, or a leaf lies outside the
        payload or over another.

    Examples
    --------
    >>> store = ConsolidatedStore("/run/td.bin")                   # doctest: +SKIP
    >>> store.list_dir("")                                          # doctest: +SKIP
    ['a.memmap', 'b', 'meta.json']
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(path))
        fd = os.open(self.root, READ_FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size < FOOTER + 2:
                raise NotACheckpointError(f"{self.root} is not a tensordict consolidated file.")
            self.mapping = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.file_size = len(self.mapping)
        self._identity = st.st_dev, st.st_ino
        try:
            n = footer_length(self.mapping[-FOOTER:], self.file_size, self.root)
            payload = self.file_size - FOOTER - n
            self.layout = Layout(self.mapping[payload : payload + n], payload, self.root)
        except BaseException:
            self.mapping.close()
            raise
        self._view = memoryview(self.mapping)

    def writable(self, key: str | None = None) -> bool:
        """Whether the file is writable: every leaf lives in that one file."""
        if key is not None:
            check_key(key, self.root)
        return os.access(self.root, os.W_OK)

    # -- payloads ----------------------------------------------------------------------

    def stored_span(self, key: str) -> tuple[int, int] | None:
        try:
            found = self._file(key)
        except OSError:
            return None
        return None if isinstance(found, bytes) else found

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        """The consolidated file, for the one mapping every leaf is a view of (checked to
        be the file this store read, of the size it had); ``key``'s bytes lie at
        :meth:`stored_span`. ``write``: True for a shared mapping (``mode="r+"``)."""
        if key:
            self._file(key)  # a file of the layout, else its error
        fd = os.open(self.root, READ_FLAGS | (os.O_RDWR if write else 0))
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._identity or st.st_size != self.file_size:
                raise ArchiveError(
                    f"{self.root} changed since it was opened (another file, or another "
                    f"size: {st.st_size} bytes, it was {self.file_size}). Open it again."
                )
        except BaseException:
            os.close(fd)
            raise
        return fd, st, bool(write)

    def opened_path(self, fd: int, key: str) -> str:
        return self.root

    def _read_span(self, start: int, out: memoryview) -> None:
        self.check_intact()
        out[:] = self._view[start : start + len(out)]

    def check_intact(self) -> None:
        """Raise ``ArchiveError`` when the file is now shorter than when it was opened (a
        page of the mapping past its end would kill the process: SIGBUS)."""
        try:
            size = self.mapping.size()
        except (OSError, ValueError):
            return
        if size < self.file_size:
            raise ArchiveError(
                f"{self.root} changed since it was opened: it is now {size} bytes, it was "
                f"{self.file_size} bytes. Open it again."
            )

    def close(self) -> None:
        self._view.release()
        try:
            self.mapping.close()
        except BufferError:
            pass  # views handed out keep it: freed with the last of them


def is_consolidated(path: str) -> bool:
    """Whether the regular file ``path`` ends with a consolidated footer (its last bytes
    read; the footer is checked in full when it is opened).

    Examples
    --------
    >>> is_consolidated("/nonexistent.td")
    False
    """
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 4096))
            tail = f.read()
    except OSError:
        return False
    return looks_consolidated(tail, size)
