"""A leaf's bytes, read in chunks into the caller's buffer, in bounded memory.

* A directory file: opened and checked by the store (:meth:`DirectoryStore.open_file`),
  read with ``preadv``; nothing is mapped.
* A STORED archive entry: copied out of the store's one read-only mapping, whose pages
  are then dropped from the process (``MADV_DONTNEED``: they stay in the page cache), so
  reading a 1 GB archive does not leave 1 GB resident. The file's size is checked before
  every chunk (:meth:`ArchiveStore.check_intact`), as every other read of the mapping is.
* A compressed entry: decompressed as a stream (output in chunks, never the whole entry)
  and its CRC-32 checked at the end.

Both random-access kinds read any range, so a large leaf can be split among threads;
a compressed entry is read front to back.

The store interface has no "read a range" seam yet; this module is where one would be
used (it tests the store's kind instead, and uses two private helpers of the archive
store's codecs).
"""

from __future__ import annotations

import mmap
import os
import zlib
from typing import Any

from ..errors import LeafDataError
from ..storage import Store
from ..storage._codecs import METHODS, _decompressor  # noqa: PLC2701 - the codec's own parser

_METHOD_NUMBERS = {name: number for number, name in METHODS.items()}
_PAGE = mmap.PAGESIZE
# How far behind a read its pages are dropped (see MappedSource.readinto).
_BEHIND = 2 << 20
# Compressed input fed to the decompressor per call.
_IN_CHUNK = 1 << 20


class Source:
    """The first ``size`` bytes of one file or entry."""

    size: int
    random_access: bool = True

    def readinto(self, offset: int, out: memoryview) -> None:
        """Fill ``out`` with the bytes at ``offset`` (a sequential source only reads on)."""
        raise NotImplementedError

    def close(self) -> None:
        return None


class FileSource(Source):
    def __init__(self, store: Any, key: str, size: int) -> None:
        self.display = store.display(key)
        self.fd = store.open_file(key)
        have = os.fstat(self.fd).st_size
        if have < size:
            os.close(self.fd)
            raise LeafDataError(f"{self.display} has {have} bytes, but the leaf needs {size}.")
        self.size = size

    def readinto(self, offset: int, out: memoryview) -> None:
        done, want = 0, len(out)
        while done < want:
            got = os.preadv(self.fd, [out[done:]], offset + done)
            if got <= 0:
                raise LeafDataError(
                    f"{self.display} ended at {offset + done} bytes while "
                    "being read: it was truncated."
                )
            done += got

    def close(self) -> None:
        os.close(self.fd)


class MappedSource(Source):
    def __init__(self, store: Any, key: str, start: int, size: int) -> None:
        self.store, self.start, self.size = store, start, size
        self.view = memoryview(store.mapping)
        self.floor: int | None = None

    def readinto(self, offset: int, out: memoryview) -> None:
        begin = self.start + offset
        end = begin + len(out)
        if self.floor is None:
            self.floor = begin
        self.store.check_intact()
        out[:] = self.view[begin:end]
        # a page fault maps the cached pages around it, behind it too (a 64 KiB window,
        # whole large folios): drop what lies behind as well, down to where this source
        # started reading (another thread may be reading before that)
        _drop(self.store.mapping, max(self.floor, begin - _BEHIND), end)

    def close(self) -> None:
        self.view.release()


class InflateSource(Source):
    """A compressed entry, decompressed front to back, CRC-checked at its end."""

    random_access = False

    def __init__(self, store: Any, key: str, size: int) -> None:
        central = store._central(key)  # the method and flags are not in EntryInfo
        self.what = f"entry {key!r} in {store.root}"
        if central.size < size:
            raise LeafDataError(
                f"{store.display(key)} holds {central.size} bytes, but the leaf needs {size}."
            )
        self.store, self.key, self.size = store, key, size
        self.entry_size, self.crc_expected = central.size, central.crc32
        self.raw = store.raw_payload(key)
        self.raw_start = store.payload_offset(key)
        self.decomp, self.pos = _decompressor(central.method, central.flags, self.raw, self.what)
        self.produced = 0
        self.crc = 0
        self.pending = b""
        self.is_zlib = not hasattr(self.decomp, "needs_input")

    def readinto(self, offset: int, out: memoryview) -> None:
        if offset != self.produced - len(self.pending):
            raise ValueError("a compressed entry is read front to back")
        filled = 0
        want = len(out)
        while filled < want:
            if not self.pending:
                self.pending = self._more(want - filled)
                if not self.pending:
                    raise LeafDataError(
                        f"{self.what}: the compressed stream ended after "
                        f"{self.produced} of {self.entry_size} bytes."
                    )
            take = min(len(self.pending), want - filled)
            out[filled : filled + take] = self.pending[:take]
            self.pending = self.pending[take:]
            filled += take
        if self.produced - len(self.pending) >= self.size:
            self._finish()

    def _more(self, limit: int) -> bytes:
        decomp = self.decomp
        try:
            while not decomp.eof:
                if self.is_zlib:
                    data = decomp.unconsumed_tail
                    if not data:
                        data = self._feed()
                else:
                    data = self._feed() if decomp.needs_input else b""
                piece = decomp.decompress(data, max(limit, 1 << 16))
                if piece:
                    self.produced += len(piece)
                    if self.produced > self.entry_size:
                        raise LeafDataError(
                            f"{self.what}: the data expands beyond its "
                            f"declared size of {self.entry_size} bytes."
                        )
                    self.crc = zlib.crc32(piece, self.crc)
                    return piece
                if not data:
                    break
        except (zlib.error, OSError, EOFError, ValueError) as error:
            if isinstance(error, LeafDataError):
                raise
            raise LeafDataError(f"{self.what}: corrupt compressed data: {error}") from None
        return b""

    def _feed(self) -> bytes:
        if self.pos >= len(self.raw):
            return b""
        self.store.check_intact()
        data = bytes(self.raw[self.pos : self.pos + _IN_CHUNK])
        low = self.raw_start + self.pos
        self.pos += len(data)
        _drop(self.store.mapping, low, low + len(data))
        return data

    def _finish(self) -> None:
        """Read what is left of the entry (past the leaf's bytes) and check its CRC."""
        while self.produced < self.entry_size:
            if not self._more(1 << 20):
                break
        if self.produced != self.entry_size:
            raise LeafDataError(
                f"{self.what}: the data decompresses to {self.produced} "
                f"bytes, but its declared size is {self.entry_size} bytes."
            )
        if self.crc != self.crc_expected:
            raise LeafDataError(
                f"{self.what}: CRC-32 mismatch, computed {self.crc:#010x} but "
                f"the archive records {self.crc_expected:#010x}."
            )

    def close(self) -> None:
        self.raw.release()


def _drop(mapping: mmap.mmap, begin: int, end: int) -> None:
    """Drop the pages of ``[begin, end)`` from the process (they stay in the page cache:
    a read-only shared mapping reads them again from the file if touched)."""
    low = begin - begin % _PAGE
    try:
        mapping.madvise(mmap.MADV_DONTNEED, low, end - low)
    except (AttributeError, OSError, ValueError):
        pass  # not on this system: the pages stay until the mapping is released


def open_source(store: Store, key: str, size: int) -> Source:
    """A source of the first ``size`` bytes of ``key``.

    Raises
    ------
    LeafDataError
        The file or entry is shorter than ``size``, or (read later) corrupt.
    UnsafeCheckpointError, OSError
        What the store raises for the key (refused, encrypted, missing).
    """
    if store.kind != "archive":
        return FileSource(store, key, size)
    entry = store.entry(key)
    if entry.encrypted:
        store.raw_payload(key)  # type: ignore[attr-defined]  # raises the store's refusal
    if entry.compression == "stored":
        if entry.stored_size != entry.size or entry.size < size:
            raise LeafDataError(
                f"{entry.display} holds {entry.size} bytes ({entry.stored_size} "
                f"stored), but the leaf needs {size}."
            )
        return MappedSource(store, key, store.payload_offset(key), size)  # type: ignore[attr-defined]
    if entry.compression not in _METHOD_NUMBERS:
        store.decompress(key, max_size=0)  # type: ignore[attr-defined]  # raises its error
    return InflateSource(store, key, size)
