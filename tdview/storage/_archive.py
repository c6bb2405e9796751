"""A checkpoint saved as a zip archive (``.tdz``), mapped once and read lazily.

Opening parses only the central directory (see :mod:`._zip`) and checks the names and
the layout of all entries (see :mod:`._catalog`: a large archive is kept as arrays and
its names are found by search, nothing is made per entry); a local header is read the
first time its entry is used, so opening a 20,000-entry archive touches 20,000 central
records and nothing else. A walk or a load that goes on past 64 entries of a subtree reads
the rest of that subtree's local headers in one pass (:meth:`ArchiveStore.prepare`).
STORED payloads are zero-copy views of the single read-only mapping.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING

import numpy as np

from ..errors import (
    ArchiveError,
    LeafDataError,
    LimitExceededError,
    TDViewError,
    UnsafeCheckpointError,
)
from ._base import EntryInfo, Mapped, Payload, Store
from ._catalog import EagerCatalog, LazyCatalog, lazy_catalog, local_payload
from ._codecs import STORED, decode, method_name
from ._columns import payload_offsets
from ._crc import crc32
from ._inflate_ranges import inflate_ranges
from ._key_safety import check_key, not_found
from ._mapfile import READ_FLAGS, map_file_stat, not_a_checkpoint
from ._zip import FLAG_ENCRYPTED, LOCAL, LOCAL_SIG, CentralDirectory, CentralEntry
from ._zip import parse_central_directory as _parse

if TYPE_CHECKING:
    from typing_extensions import Buffer  # what read_into fills: any writable buffer

__all__ = ["ArchiveStore"]

META = "meta.json"
# Local headers read one by one in a walk before the rest are read in one pass (prepare).
_BULK = 64
_PAGE = mmap.PAGESIZE
# General-purpose flag bit 3: the CRC and sizes follow the data, not in the local header.
_DATA_DESCRIPTOR = 0x8
# How far behind a read of read_into its pages are dropped from the process.
_BEHIND = 2 << 20


def _holds_checkpoints(names: list[str]) -> bool:
    """Whether a zip without a top-level ``meta.json`` holds checkpoints, as the folder it
    was zipped from would (torchrl's archive checkpoints): a folder with a ``meta.json``,
    or a ``.tdz``/``.zip`` entry. It is then opened, as a folder of them."""
    return any(
        name.endswith("/" + META) or name.lower().endswith((".tdz", ".zip")) for name in names
    )


class ArchiveStore(Store):
    """Read the entries of a checkpoint archive (any zip with a top-level meta.json), or
    of a zip that holds checkpoints without one (a folder of checkpoints, zipped).

    Parameters
    ----------
    path : str or os.PathLike
        The archive file. It is opened read-only and mapped once.

    Attributes
    ----------
    mapping : mmap.mmap
        The read-only mapping of the whole file.
    file_size : int
        Size of the archive file in bytes.

    Raises
    ------
    NotACheckpointError
        If the file is short, has no zip end record, or has no top-level ``meta.json``.
    ArchiveError
        If the central directory is corrupt or an entry runs past it.
    UnsafeCheckpointError
        For unsafe or duplicate names, and entries that overlap each other.

    Examples
    --------
    >>> store = ArchiveStore("/ckpt.tdz")                   # doctest: +SKIP
    >>> store.list_dir("")                                   # doctest: +SKIP
    ['a.memmap', 'meta.json', 'nested']
    """

    kind = "archive"
    packed = True
    crc_recorded = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(path))
        self.mapping, st = map_file_stat(self.root)
        self.file_size = len(self.mapping)
        self._identity = st.st_dev, st.st_ino  # the file the index reads (open_mapped)
        try:
            self._load(_parse(self.mapping, self.file_size, self.root))
        except BaseException:
            self.mapping.close()
            raise
        self._view = memoryview(self.mapping)
        self._offsets: dict[str, int] = {}
        # see prepare: the walk expected, the headers read one by one since, the folders
        # whose headers were read in one pass
        self._expected: tuple[str, bool] | None = None
        self._single = 0
        self._prepared: set[tuple[str, bool]] = set()
        self._spans: dict[str, tuple[int, int]] = {}  # stored spans found in one pass

    # -- opening ---------------------------------------------------------------------

    def _load(self, cd: CentralDirectory | None) -> None:
        if cd is None:
            raise not_a_checkpoint(self.root, "no zip end-of-central-directory record found")
        self.comment = cd.comment
        catalog: EagerCatalog | LazyCatalog | None = None
        if cd.columns is not None:
            catalog = lazy_catalog(self.root, cd.columns, cd.start)
        if catalog is None:
            catalog = EagerCatalog(self.root, cd.records(), cd.start, self.file_size)
        if not catalog.has_meta() and not _holds_checkpoints(catalog.keys()):
            raise not_a_checkpoint(self.root, "the zip has no top-level meta.json entry")
        self._catalog = catalog
        self._file = catalog.file
        self._has_file = catalog.has_file

    # -- the Store interface -----------------------------------------------------------

    def display(self, key: str) -> str:
        return f"{self.root}::{key}" if key else self.root

    def is_file(self, key: str) -> bool:
        if self._has_file(key):
            return True
        check_key(key, self.root)  # an unsafe key is an error, not just "absent"
        return False

    def is_dir(self, key: str) -> bool:
        if self._catalog.is_dir(key):
            return True
        check_key(key, self.root)
        return False

    def list_dir(self, key: str) -> list[str]:
        if not self.is_dir(key):
            if self._file(key) is not None:
                raise NotADirectoryError(f"{self.display(key)} is not a directory")
            raise not_found(self.display(key))
        return self._catalog.children(key)

    def keys(self) -> list[str]:
        """Return every file key, in central-directory order."""
        return self._catalog.keys()

    def _central(self, key: str) -> CentralEntry:
        e = self._file(key)
        if e is None:
            check_key(key, self.root)
            if self._catalog.is_dir(key):
                raise IsADirectoryError(f"{self.display(key)} is a directory, not a file")
            raise not_found(self.display(key))
        return e

    def entry(self, key: str) -> EntryInfo:
        e = self._central(key)
        return EntryInfo(
            key=key,
            display=self.display(key),
            size=e.size,
            stored_size=e.stored_size,
            compression=method_name(e.method),
            crc32=e.crc32,
            file=None,
            encrypted=bool(e.flags & FLAG_ENCRYPTED),
        )

    def locate(self, key: str) -> Payload:
        """The entry's :class:`~._base.Payload`: its offset in the archive file, read from
        its local header the first time (see :meth:`payload_offset`; a wrong header is
        the payload's ``error``, its offset None), and the central directory's facts.
        Mappable when it is STORED whole, unencrypted, and the store maps the file (a
        remote archive does not)."""
        e = self._central(key)
        encrypted = bool(e.flags & FLAG_ENCRYPTED)
        offset: int | None
        error: BaseException | None = None
        try:
            offset = self.payload_offset(key)
        except (TDViewError, OSError) as found:
            offset, error = None, found
        as_stored = e.method == STORED and e.stored_size == e.size and not encrypted
        return Payload(
            key=key,
            display=self.display(key),
            file=None,
            in_archive=True,
            offset=offset,
            size=e.size,
            stored_size=e.stored_size,
            compression=method_name(e.method),
            crc32=e.crc32,
            encrypted=encrypted,
            as_stored=as_stored,
            mappable=self.mappable and as_stored and offset is not None,
            error=error,
        )

    def read_bytes(self, key: str, limit: int) -> bytes:
        e = self._file(key)
        if (
            e is not None
            and e.method == STORED
            and e.size <= limit
            and e.size == e.stored_size
            and not e.flags & FLAG_ENCRYPTED
        ):
            # a stored file (every meta.json): one copy out of the mapping, CRC-checked
            start = self._offsets.get(key)
            if start is None:
                start = self.payload_offset(key)
            self.check_intact()
            data = self.mapping[start : start + e.size]
            if crc32(data) == e.crc32:
                return data
        e = self._central(key)
        if e.size > limit:
            raise LimitExceededError(
                f"{self.display(key)} is {e.size} bytes, above the limit of {limit} bytes."
            )
        return self.decompress(key).tobytes()

    def writable(self, key: str | None = None) -> bool:
        """Whether the archive file is writable: every entry lives in that one file."""
        if key is not None:
            check_key(key, self.root)
        return os.access(self.root, os.W_OK)

    def check_intact(self) -> None:
        """Raise ``ArchiveError`` when the file is now shorter than when it was opened.

        Pages of the mapping past the file's new end cannot be read: the process would
        be killed (SIGBUS), so every read of the mapping asks first (one ``fstat``). A
        file copied over the archive in place is the usual cause; tensordict's own
        writers replace the file instead, which leaves this mapping whole.
        """
        try:
            size = self.mapping.size()
        except (OSError, ValueError):  # closed, or the descriptor is gone
            return
        if size < self.file_size:
            raise ArchiveError(
                f"{self.root} changed since it was opened: it is now {size} bytes, it was "
                f"{self.file_size} bytes. Open it again."
            )

    def local_crc32(self, key: str) -> int | None:
        e = self._central(key)
        at = e.header_offset
        if not self.mappable or e.flags & _DATA_DESCRIPTOR or at + LOCAL.size > self.file_size:
            return None
        self.check_intact()
        fields = LOCAL.unpack_from(self.mapping, at)  # signature, ..., flags, ..., crc
        if fields[0] != LOCAL_SIG or fields[2] & _DATA_DESCRIPTOR:
            return None
        return int(fields[6])

    def open_mapped(self, *, write: bool = False) -> int:
        """Open the archive file again, for another mapping of it (the loader's), and
        return the descriptor (the caller closes it): checked on that descriptor to be
        the very file this store mapped (same device and inode, not one renamed over its
        path since), of the size it had. ``write``: for reading and writing.

        Raises
        ------
        ArchiveError
            The path names another file now, or the file's size changed.
        """
        return self._open_checked(write)[0]

    def _open_checked(self, write: bool) -> tuple[int, os.stat_result]:
        """:meth:`open_mapped`, with the ``fstat`` of the descriptor it checked."""
        fd = os.open(self.root, READ_FLAGS | (os.O_RDWR if write else 0))
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._identity or not stat.S_ISREG(st.st_mode):
                raise ArchiveError(
                    f"{self.root} changed since it was opened: the path names another "
                    "file now (one saved or copied over it). Open it again."
                )
            if st.st_size != self.file_size:
                raise ArchiveError(
                    f"{self.root} changed since it was opened: it is now {st.st_size} "
                    f"bytes, it was {self.file_size} bytes. Open it again."
                )
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def map(self, key: str, *, write: bool | None = False) -> Mapped:
        """The archive file, for the one mapping every STORED entry is a view of (see
        :meth:`open_mapped`); ``key``'s content lies at :meth:`stored_span`. ``write``:
        True for a shared mapping (``mode="r+"``); None is read-only, as False is (a
        private mapping: writes stay in memory)."""
        if key:
            self._central(key)  # a file of the archive, else its error
        fd, st = self._open_checked(bool(write))
        return fd, st, bool(write)

    def opened_path(self, fd: int, key: str) -> str:
        """The archive's path (its file was checked on ``fd`` to be the one it read)."""
        return self.root

    def read_into(self, key: str, offset: int, buf: Buffer) -> None:
        """Copy the stored bytes out of the one read-only mapping (after
        :meth:`check_intact`), then drop the pages read (and those up to 2 MiB behind,
        within the entry) from the process: they stay in the page cache, so reading a
        1 GB archive through here does not leave 1 GB resident."""
        e = self._readable(key)
        out = memoryview(buf).cast("B")
        n = len(out)
        if offset < 0 or offset + n > e.stored_size:
            raise ValueError(
                f"{self.display(key)}: bytes {offset}..{offset + n} lie outside its "
                f"{e.stored_size} stored bytes."
            )
        start = self._offsets.get(key)
        if start is None:
            start = self.payload_offset(key)
        begin = start + offset
        self.check_intact()
        out[:] = self._view[begin : begin + n]
        # a page fault maps the cached pages around it, behind it too (a 64 KiB window,
        # whole large folios): drop what lies behind as well, down to the entry's start
        low = max(start, begin - _BEHIND)
        low -= low % _PAGE
        try:
            self.mapping.madvise(mmap.MADV_DONTNEED, low, begin + n - low)
        except (AttributeError, OSError, ValueError):
            pass  # not on this system: the pages stay until the mapping is released

    def close(self) -> None:
        """Release the mapping; views handed out keep it alive until they are dropped."""
        self._view.release()
        try:
            self.mapping.close()
        except BufferError:
            pass  # payload views still exist: the mapping is freed with the last of them

    # -- payloads ----------------------------------------------------------------------

    def _readable(self, key: str) -> CentralEntry:
        """Return the central record of ``key``, refusing encrypted entries."""
        e = self._central(key)
        if e.flags & FLAG_ENCRYPTED:
            raise UnsafeCheckpointError(
                f"refusing to read encrypted archive entry {key!r} in {self.root}: tdview "
                "does not decrypt zip entries."
            )
        return e

    def payload_offset(self, key: str) -> int:
        """Return the file offset of the entry's stored bytes, reading its local header.

        The header is read once and checked: signature, the name equal to the central
        directory's, and the stored bytes ending before the next entry.

        Raises
        ------
        ArchiveError
            For a bad signature, a different name, or data past the central directory.
        UnsafeCheckpointError
            When the data runs into the next entry.
        """
        offset = self._offsets.get(key)
        if offset is None:
            offset = self._local_payload(key, self._central(key))
        return offset

    def _read_local_header(self, e: CentralEntry) -> int:
        at = e.header_offset
        if at + LOCAL.size > self.file_size:
            raise ArchiveError(
                f"corrupt entry {e.name!r} in {self.root}: its local header at offset {at} "
                f"runs past the end of the file ({self.file_size} bytes)."
            )
        self.check_intact()
        return local_payload(self.root, e, self.mapping, at, at, self._catalog, self.file_size)

    def prepare(self, dirkey: str, *, payloads: bool) -> None:
        """Expect a walk below ``dirkey`` that uses every ``meta.json`` there, and every
        entry when ``payloads``: once it has read ``_BULK`` local headers one by one, the
        rest of them are read in one pass (a small walk reads only its own)."""
        self._expected = (dirkey, payloads)
        self._single = 0
        if isinstance(self._catalog, LazyCatalog):
            self._catalog.prepare(dirkey)  # its names, looked up without the whole catalog

    def _local_payload(self, key: str, e: CentralEntry) -> int:
        """The payload offset of ``key`` from its local header (see :meth:`prepare`)."""
        expected = self._expected
        if expected is not None:
            self._single += 1
            if self._single >= _BULK:
                self._expected = None
                self._read_headers_below(*expected)
                found = self._offsets.get(key)
                if found is not None:
                    return found
        offset = self._offsets[key] = self._read_local_header(e)
        return offset

    def _read_headers_below(self, dirkey: str, payloads: bool) -> None:
        """Read in one pass the local headers below ``dirkey`` (of every ``meta.json``, or
        of every entry when ``payloads``) not read yet. Only for large archives kept as
        arrays; a header that is not right is left to the one-by-one path, which raises
        its error if the entry is used."""
        catalog = self._catalog
        if not isinstance(catalog, LazyCatalog) or self._prepared_above(dirkey, payloads):
            return
        self._prepared.add((dirkey, payloads))
        names, rows = catalog.rows_below(dirkey, "" if payloads else META)
        offsets = self._offsets
        fresh = [(name, row) for name, row in zip(names, rows, strict=True) if name not in offsets]
        if not fresh:
            return
        columns = catalog.columns
        self.check_intact()
        found = payload_offsets(self.mapping, columns, [row for _, row in fresh], catalog.starts)
        fields = columns.rows()
        spans = self._spans
        for (name, row), offset in zip(fresh, found, strict=True):
            if offset is not None:
                offsets[name] = offset
                _, flags, method, _, stored, size, _ = fields[row]
                if method == STORED and stored == size and not flags & FLAG_ENCRYPTED:
                    spans[name] = offset, size  # what stored_span answers

    def _prepared_above(self, dirkey: str, payloads: bool) -> bool:
        """Whether :meth:`prepare` already ran for ``dirkey`` or a folder above it."""
        prepared = self._prepared
        while True:
            if (dirkey, True) in prepared or (dirkey, payloads) in prepared:
                return True
            if not dirkey:
                return False
            dirkey = dirkey.rpartition("/")[0]

    def stored_span(self, key: str) -> tuple[int, int] | None:
        """``(payload offset, size)`` of a readable STORED entry, or None.

        None for anything else (compressed, encrypted, stored and declared sizes that
        disagree, not a file): the caller then takes the checked path of
        :meth:`entry` and :meth:`payload`, which says what is wrong. Reads the local
        header the first time (see :meth:`payload_offset`).
        """
        span = self._spans.get(key)
        if span is not None:
            return span
        e = self._file(key)
        if e is None or e.method != STORED or e.flags & FLAG_ENCRYPTED or e.stored_size != e.size:
            return None
        offset = self._offsets.get(key)
        if offset is None:
            offset = self._local_payload(key, e)
        return offset, e.size

    def raw_payload(self, key: str) -> memoryview:
        """Return the stored (possibly compressed) bytes of an entry, without copying."""
        e = self._readable(key)
        start = self.payload_offset(key)
        self.check_intact()
        return self._view[start : start + e.stored_size]

    def payload(self, key: str) -> memoryview:
        """Return a zero-copy, read-only view of a STORED entry's bytes.

        The CRC-32 is not checked (that would read every page); see :meth:`verify`.

        Raises
        ------
        ArchiveError
            If the entry is compressed (use :meth:`decompress`) or its sizes disagree.
        """
        e = self._readable(key)
        if e.method != STORED:
            raise ArchiveError(
                f"entry {key!r} in {self.root} is {method_name(e.method)}-compressed; it "
                "has no uncompressed payload to map (decompress it instead)."
            )
        if e.stored_size != e.size:
            raise LeafDataError(
                f"entry {key!r} in {self.root}: stored entry has {e.stored_size} stored bytes "
                f"but a declared size of {e.size} bytes."
            )
        return self.raw_payload(key)

    def decompress(
        self, key: str, max_size: int | None = None, pool: Executor | None = None
    ) -> np.ndarray:
        """Return a fresh, writable uint8 array of the entry's uncompressed bytes,
        CRC-checked.

        Parameters
        ----------
        key : str
            A file key.
        max_size : int, optional
            Refuse (``LimitExceededError``) an entry whose declared size is larger.
        pool : Executor, optional
            Threads that may check the CRC of a large entry's chunks in parallel.

        Raises
        ------
        LeafDataError
            If the data is corrupt, is not exactly the declared size, or fails its CRC.
        """
        e = self._readable(key)
        if max_size is not None and e.size > max_size:
            raise LimitExceededError(
                f"{self.display(key)} declares {e.size} uncompressed bytes, above the limit "
                f"of {max_size} bytes."
            )
        src = self.raw_payload(key)
        try:
            return decode(
                e.method, e.flags, src, e.size, e.crc32, f"entry {key!r} in {self.root}", pool
            )
        finally:
            src.release()

    def read_ranges(self, key: str, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        """Read the bytes ``[start, end)`` of the entry's content for each span into
        ``dest``: by range from a STORED entry; a compressed one inflated from its start
        up to the last byte asked for (:mod:`._inflate_ranges`)."""
        e = self._readable(key)
        if e.method == STORED:
            Store.read_ranges(self, key, spans, dest)
        else:
            self._inflated_ranges(key, e, spans, dest)

    def _inflated_ranges(
        self, key: str, e: CentralEntry, spans: Sequence[tuple[int, int]], dest: memoryview
    ) -> None:
        """:meth:`read_ranges` of a compressed entry, its stored bytes by :meth:`read_into`."""
        if any(not 0 <= start <= end <= e.size for start, end in spans):
            raise ValueError(f"{self.display(key)}: a byte range outside its {e.size} bytes.")
        entry = (e.method, e.flags, e.stored_size, e.size, e.crc32)
        where = f"entry {key!r} in {self.root}"
        inflate_ranges(entry, lambda at, buf: self.read_into(key, at, buf), spans, dest, where)

    def verify(self, key: str) -> None:
        """Check the CRC-32 of an entry (for STORED entries this reads every byte)."""
        e = self._readable(key)
        if e.method != STORED:
            self.decompress(key)
            return
        view = self.payload(key)
        try:
            actual = crc32(view)
        finally:
            view.release()
        if actual != e.crc32:
            raise LeafDataError(
                f"entry {key!r} in {self.root}: CRC-32 mismatch, computed {actual:#010x} but "
                f"the archive records {e.crc32:#010x}."
            )
