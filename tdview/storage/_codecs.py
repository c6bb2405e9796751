"""Decompress one zip entry, bounded by its declared size and checked by CRC-32.

Deflate is inflated by ISA-L (``isal``) where its wheel is installed, else by zlib: the
same bytes, about twice as fast here (``INFLATE_LIBRARY`` says which runs). The heavy
work runs in ISA-L or zlib, bz2 and lzma, which release the GIL, so several entries
can be inflated by a thread pool, and the CRC-32 of a large entry's finished chunks is
checked on that pool while the rest is still inflating. Output goes in fixed-size
chunks straight into one preallocated array (no growing buffer, no final copy). Input
is fed in slices and the calls together produce at most one byte more than the declared
size: a "zip bomb" whose declared size is small stops after that many bytes instead of
filling memory, and one whose declared size is huge allocates only what its stored bytes
can expand to.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, cast

import numpy as np

from ..errors import ArchiveError, LeafDataError
from ._crc import crc32, crc32_combine

__all__ = [
    "DECODE_ERRORS",
    "INFLATE_LIBRARY",
    "METHODS",
    "STORED",
    "decode",
    "decompressor",
    "method_name",
]

STORED, DEFLATE, BZIP2, LZMA = 0, 8, 12, 14
METHODS = {STORED: "stored", DEFLATE: "deflate", BZIP2: "bzip2", LZMA: "lzma"}

# Input slice and output limit per call: big enough that the Python loop is
# negligible, small enough that zlib's copy of an unconsumed tail stays cheap and each
# output chunk is still in the cache when it is copied and checked.
_IN_CHUNK = 1 << 20
_OUT_CHUNK = 4 << 20
# Entries at least this large have their chunks checked on the pool, when there is one.
_PARALLEL_CRC_MIN = 3 * _OUT_CHUNK
_EMPTY = np.empty(0, dtype=np.uint8)
_LZMA_HEADER = struct.Struct("<BBH")  # version major, version minor, properties size
_FLAG_LZMA_EOS = 0x2  # general-purpose bit 1: the LZMA stream has an end marker


def _raw_inflate() -> tuple[str, Callable[[], Any], type[Exception]]:
    """``(library, a raw deflate decompressor's factory, its error)``: ISA-L's, else
    zlib's (both take ``decompress(data, max_length)`` and keep ``unconsumed_tail``)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return "zlib", lambda: zlib.decompressobj(-15), zlib.error
    error = cast("type[Exception]", isal_zlib.IsalError)  # its stub calls it an instance
    return "isal", lambda: isal_zlib.decompressobj(-15), error


#: ``"isal"`` or ``"zlib"``: the library that inflates deflated entries.
INFLATE_LIBRARY, _INFLATER, _INFLATE_ERROR = _raw_inflate()
#: What a decompressor raises on corrupt input (each caller makes it a LeafDataError).
DECODE_ERRORS: tuple[type[Exception], ...] = (
    zlib.error,
    _INFLATE_ERROR,
    lzma.LZMAError,
    OSError,
    EOFError,
    ValueError,
)
_DECODE_ERRORS = DECODE_ERRORS


def method_name(method: int) -> str:
    """Return ``"stored"``, ``"deflate"``, ``"bzip2"``, ``"lzma"`` or ``"unknown(<n>)"``.

    Examples
    --------
    >>> method_name(8), method_name(93)
    ('deflate', 'unknown(93)')
    """
    return METHODS.get(method, f"unknown({method})")


def decode(
    method: int,
    flags: int,
    src: memoryview,
    size: int,
    crc: int,
    what: str,
    pool: Executor | None = None,
) -> np.ndarray:
    """Return the uncompressed content of an entry, fully checked.

    Parameters
    ----------
    method : int
        The zip compression method (0, 8, 12 or 14).
    flags : int
        The entry's general-purpose flags (bit 1 tells whether LZMA has an end marker).
    src : memoryview
        The stored (compressed) bytes of the entry.
    size : int
        The declared uncompressed size; the output must have exactly this length.
    crc : int
        The recorded CRC-32 of the uncompressed bytes.
    what : str
        ``"entry 'a.memmap' in /x.tdz"``, used in messages.
    pool : Executor, optional
        Threads that may check the CRC of finished chunks of a large entry while the
        rest is still being decompressed (the load's ``num_threads`` pool).

    Returns
    -------
    numpy.ndarray
        A fresh, writable uint8 array of ``size`` bytes.

    Raises
    ------
    ArchiveError
        For an unsupported method.
    LeafDataError
        When the stream is corrupt, ends early, has trailing bytes, expands beyond or
        falls short of ``size``, or fails its CRC-32.

    Examples
    --------
    >>> import zlib
    >>> c = zlib.compressobj(wbits=-15)
    >>> raw = c.compress(b"abc") + c.flush()
    >>> decode(8, 0, memoryview(raw), 3, zlib.crc32(b"abc"), "entry 'x'").tobytes()
    b'abc'
    """
    if method == STORED:
        if len(src) != size:
            raise LeafDataError(
                f"{what}: stored entry has {len(src)} stored bytes but a declared size of "
                f"{size} bytes."
            )
        out = np.frombuffer(src, dtype=np.uint8).copy()
        actual = crc32(out.data)
    elif size == 0 and len(src) == 0:
        out = np.empty(0, dtype=np.uint8)  # some writers store an empty file with no stream
        actual = 0
    else:
        decomp, start = decompressor(method, flags, src, what)
        sink = _Sink(size, _capacity(method, len(src) - start, size), pool)
        try:
            pos = _inflate(decomp, src, start, size, sink, what)
            _check_end(decomp, flags, len(src) - pos, sink.pos, size, what)
            actual = sink.crc32()
        finally:
            sink.cancel()
        out = sink.buf
    if actual != crc:
        raise LeafDataError(
            f"{what}: CRC-32 mismatch, computed {actual:#010x} but the archive records {crc:#010x}."
        )
    return out


def _capacity(method: int, stored: int, size: int) -> int:
    """How much output to allocate up front: the declared size, unless the stored bytes
    cannot expand that far (deflate stays under 1032:1), so that a false declared size
    does not allocate memory the data will never fill; the buffer grows past it."""
    bound = stored * 1032 + (64 << 10) if method == DEFLATE else max(stored * 64, 64 << 20)
    return min(size, bound)


class _Sink:
    """The output buffer of one entry, filled chunk after chunk, and its running CRC-32
    (computed inline, or on ``pool`` threads and combined at the end)."""

    def __init__(self, size: int, capacity: int, pool: Executor | None) -> None:
        self.size = size
        self._capacity = capacity
        self.buf = _EMPTY  # allocated at the first write (after zlib's own buffer: faster)
        self._view = self.buf.data
        self.pos = 0
        self._crc = 0
        self._pool = pool if size >= _PARALLEL_CRC_MIN else None
        self._parts: list[tuple[Future[int], memoryview]] = []

    def write(self, piece: bytes) -> None:
        end = self.pos + len(piece)
        if end > len(self.buf):
            self._grow(end)
        if self._pool is None:
            # checked before the copy, while zlib's output is still in the cache
            self._crc = crc32(piece, self._combined())
        # numpy copies without the GIL (a memoryview copy holds it): pool threads and
        # the loader go on meanwhile
        self.buf[self.pos : end] = np.frombuffer(piece, dtype=np.uint8)
        chunk = self._view[self.pos : end]
        self.pos = end
        if self._pool is not None:
            try:
                self._parts.append((self._pool.submit(crc32, chunk), chunk))
            except RuntimeError:  # the pool is shutting down: check it here
                self._pool = None
                self._crc = crc32(chunk, self._combined())

    def _grow(self, end: int) -> None:
        """A bigger buffer, not zeroed (every byte will be written): ``capacity`` at the
        first write, then doubling, never past the declared size."""
        want = max(end, self._capacity, 2 * len(self.buf))
        bigger = np.empty(min(self.size, want), dtype=np.uint8)
        bigger[: self.pos] = self.buf[: self.pos]
        self.buf, self._view = bigger, bigger.data

    def _combined(self) -> int:
        """Fold the CRCs of the chunks checked on the pool into the running CRC."""
        crc = self._crc
        for future, chunk in self._parts:
            # a chunk no thread has taken yet is checked here: waiting for it could
            # deadlock when every pool thread is itself an entry waiting like this one
            part = crc32(chunk) if future.cancel() else future.result()
            crc = crc32_combine(crc, part, len(chunk))
        self._parts.clear()
        return crc

    def crc32(self) -> int:
        """The CRC-32 of everything written."""
        self._crc = self._combined()
        if self.pos != len(self.buf):
            self.buf = self.buf[: self.pos] if self.pos else np.empty(0, dtype=np.uint8)
        return self._crc

    def cancel(self) -> None:
        for future, _ in self._parts:
            future.cancel()
        self._parts.clear()


def decompressor(method: int, flags: int, src: memoryview, what: str):
    """Return ``(decompressor, start of the stream in src)`` for ``method``."""
    if method == DEFLATE:
        return _INFLATER(), 0
    if method == BZIP2:
        return bz2.BZ2Decompressor(), 0
    if method == LZMA:
        return _lzma_decompressor(src, what)
    raise ArchiveError(
        f"{what}: unsupported compression method {method} ({method_name(method)}); tdview "
        "reads stored, deflate, bzip2 and lzma entries."
    )


def _lzma_decompressor(src: memoryview, what: str):
    """Parse the zip LZMA header (version, properties) and build a raw LZMA1 decoder."""
    if len(src) < _LZMA_HEADER.size:
        raise LeafDataError(f"{what}: lzma data of {len(src)} bytes has no header.")
    _major, _minor, props_size = _LZMA_HEADER.unpack_from(src, 0)
    start = _LZMA_HEADER.size + props_size
    if start > len(src):
        raise LeafDataError(
            f"{what}: lzma properties of {props_size} bytes run past the {len(src)} stored bytes."
        )
    props = bytes(src[_LZMA_HEADER.size : start])
    try:
        # The same private helper Python's zipfile uses to read zip LZMA properties.
        filt = lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)  # type: ignore[attr-defined]
        return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[filt]), start
    except _DECODE_ERRORS as exc:
        raise LeafDataError(f"{what}: invalid lzma properties {props.hex()}: {exc}") from None


def _inflate(decomp, src: memoryview, pos: int, size: int, sink: _Sink, what: str) -> int:
    """Feed ``src`` from ``pos`` to the decompressor in slices, taking at most
    ``_OUT_CHUNK`` bytes of output per call and never more than ``size + 1`` in all.
    Returns how far ``src`` was fed."""
    total = len(src)
    is_zlib = not hasattr(decomp, "needs_input")  # zlib keeps its unused input apart
    full = False  # the last call filled its output limit: more may be pending
    try:
        while not decomp.eof:
            if is_zlib:
                data = decomp.unconsumed_tail
                hungry = not data and not full
            else:
                data = b""
                hungry = decomp.needs_input
            if hungry:
                if pos >= total:
                    break  # input exhausted before the end marker: _check_end says so
                data = src[pos : pos + _IN_CHUNK]
                pos += len(data)
            limit = min(_OUT_CHUNK, size + 1 - sink.pos)
            piece = decomp.decompress(data, limit)
            if len(piece) + sink.pos > size:
                raise LeafDataError(
                    f"{what}: the data expands beyond its declared size of {size} bytes "
                    f"(from {total} stored bytes)."
                )
            full = len(piece) == limit
            if piece:
                sink.write(piece)
            elif not data and not hungry:
                break  # no input and no output: nothing more will come
    except _DECODE_ERRORS as exc:
        raise LeafDataError(f"{what}: corrupt compressed data: {exc}") from None
    return pos


def _check_end(decomp, flags: int, unfed: int, produced: int, size: int, what: str) -> None:
    """Check that the stream ended exactly at the end of the stored bytes, at ``size``."""
    lzma_without_marker = isinstance(decomp, lzma.LZMADecompressor) and not (flags & _FLAG_LZMA_EOS)
    if not decomp.eof and not (lzma_without_marker and produced == size):
        raise LeafDataError(
            f"{what}: the compressed stream is truncated: it ended after {produced} of "
            f"{size} bytes without its end marker."
        )
    trailing = unfed + (len(decomp.unused_data) if decomp.eof else 0)
    if trailing:
        raise LeafDataError(f"{what}: {trailing} stray bytes follow the compressed stream.")
    if produced != size:
        raise LeafDataError(
            f"{what}: the data decompresses to {produced} bytes, but its declared size is "
            f"{size} bytes."
        )
