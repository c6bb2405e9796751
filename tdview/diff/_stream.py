"""A leaf's bytes, read in chunks into the caller's buffer, in bounded memory.

* A file of its own that can be mapped (a local directory's): opened and checked by the
  store (:meth:`Store.map`, read-only), read with ``preadv``; nothing is mapped.
* Other bytes stored as they are (a STORED archive entry, a remote file): read by range
  with :meth:`Store.read_into`. A local archive copies them out of its one read-only
  mapping, checking the file's size first, and drops the pages read from the process
  (they stay in the page cache), so reading a 1 GB archive does not leave 1 GB resident.
* A compressed entry: its stored stream read by range (:meth:`Store.read_into`),
  decompressed as a stream (output in chunks, never the whole entry) and its CRC-32
  checked at the end.

The first two read any range, so a large leaf can be split among threads; a compressed
entry is read front to back. Which source a key gets is asked of the store
(:meth:`Store.locate`), never its kind. The codecs' stream parser is the storage
layer's (``decompressor``).
"""

from __future__ import annotations

import os

from ..errors import LeafDataError
from ..storage import DECODE_ERRORS, METHODS, Payload, Store, crc32, decompressor

_METHOD_NUMBERS = {name: number for number, name in METHODS.items()}
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
    """A local file read with ``preadv`` from the descriptor the store opened and checked
    (``Store.map``): a file of its own, or the archive file where a STORED entry's bytes
    start at ``base`` (read, not faulted in through a mapping: nothing stays resident)."""

    def __init__(self, store: Store, key: str, size: int, base: int = 0) -> None:
        self.display = store.display(key)
        self.fd, st, _ = store.map(key, write=False)
        if st.st_size < base + size:
            os.close(self.fd)
            raise LeafDataError(
                f"{self.display} has {st.st_size - base} bytes, but the leaf needs {size}."
            )
        self.size, self.base = size, base

    def readinto(self, offset: int, out: memoryview) -> None:
        done, want = 0, len(out)
        while done < want:
            got = os.preadv(self.fd, [out[done:]], self.base + offset + done)
            if got <= 0:
                raise LeafDataError(
                    f"{self.display} ended at {offset + done} bytes while "
                    "being read: it was truncated."
                )
            done += got

    def close(self) -> None:
        os.close(self.fd)


class RangeSource(Source):
    """Bytes stored as they are, read by range through the store (see the module)."""

    def __init__(self, store: Store, key: str, size: int) -> None:
        self.store, self.key, self.size = store, key, size

    def readinto(self, offset: int, out: memoryview) -> None:
        self.store.read_into(self.key, offset, out)


class InflateSource(Source):
    """A compressed entry, decompressed front to back, CRC-checked at its end."""

    random_access = False

    def __init__(self, store: Store, payload: Payload, size: int) -> None:
        key = payload.key
        self.what = f"entry {key!r} in {store.root}"
        if payload.size < size:
            raise LeafDataError(
                f"{store.display(key)} holds {payload.size} bytes, but the leaf needs {size}."
            )
        self.store, self.key, self.size = store, key, size
        self.entry_size, self.crc_expected = payload.size, payload.crc32
        self.stored_size = payload.stored_size
        head = self._read(0)  # the first chunk: what the decompressor's header parse needs
        method = _METHOD_NUMBERS[payload.compression]
        self.decomp, start = decompressor(method, 0, memoryview(head), self.what)
        self.head = head[start:]
        self.pos = len(head)  # where the next chunk of the stored stream starts
        self.produced = 0
        self.crc = 0
        self.pending = b""
        self.is_zlib = not hasattr(self.decomp, "needs_input")

    def _read(self, pos: int) -> bytearray:
        buf = bytearray(min(_IN_CHUNK, self.stored_size - pos))
        if buf:
            self.store.read_into(self.key, pos, buf)
        return buf

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
                    self.crc = crc32(piece, self.crc)
                    return piece
                if not data:
                    break
        except DECODE_ERRORS as error:
            if isinstance(error, LeafDataError):
                raise
            raise LeafDataError(f"{self.what}: corrupt compressed data: {error}") from None
        return b""

    def _feed(self) -> bytes | bytearray:
        if self.head:
            data, self.head = self.head, bytearray()
            return data
        if self.pos >= self.stored_size:
            return b""
        data = self._read(self.pos)
        self.pos += len(data)
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


def open_source(store: Store, key: str, size: int) -> Source:
    """A source of the first ``size`` bytes of ``key``.

    Raises
    ------
    LeafDataError
        The file or entry is shorter than ``size``, or (read later) corrupt.
    UnsafeCheckpointError, OSError
        What the store raises for the key (refused, encrypted, missing).
    """
    payload = store.locate(key)
    if payload.encrypted:
        store.read_into(key, 0, bytearray(0))  # raises the store's refusal
    if payload.error is not None:
        raise payload.error  # what the entry's local header is wrong with
    if payload.compression == "stored":
        if payload.stored_size != payload.size or payload.size < size:
            raise LeafDataError(
                f"{payload.display} holds {payload.size} bytes ({payload.stored_size} "
                f"stored), but the leaf needs {size}."
            )
        if payload.mappable and payload.offset is not None:
            return FileSource(store, key, size, payload.offset)
        return RangeSource(store, key, size)
    if payload.compression not in _METHOD_NUMBERS:
        store.decompress(key, max_size=0)  # raises its error
    return InflateSource(store, payload, size)
