"""Decompress one zip entry, bounded by its declared size and checked by CRC-32.

The heavy work runs in zlib, bz2 and lzma, which release the GIL, so several entries
can be inflated by a thread pool. Input is fed in slices and each call may produce at
most one byte more than the declared size: a "zip bomb" whose declared size is small
stops after that many bytes instead of filling memory.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import sys
import zlib

from ..errors import ArchiveError, LeafDataError

__all__ = ["METHODS", "STORED", "decode", "method_name"]

STORED, DEFLATE, BZIP2, LZMA = 0, 8, 12, 14
METHODS = {STORED: "stored", DEFLATE: "deflate", BZIP2: "bzip2", LZMA: "lzma"}

# Input slice per call: big enough that the Python loop is negligible, small enough
# that zlib's copy of an unconsumed tail stays cheap.
_IN_CHUNK = 8 << 20
_LZMA_HEADER = struct.Struct("<BBH")  # version major, version minor, properties size
_FLAG_LZMA_EOS = 0x2  # general-purpose bit 1: the LZMA stream has an end marker
_DECODE_ERRORS = (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError)


def method_name(method: int) -> str:
    """Return ``"stored"``, ``"deflate"``, ``"bzip2"``, ``"lzma"`` or ``"unknown(<n>)"``.

    Examples
    --------
    >>> method_name(8), method_name(93)
    ('deflate', 'unknown(93)')
    """
    return METHODS.get(method, f"unknown({method})")


def decode(method: int, flags: int, src: memoryview, size: int, crc: int,
           what: str) -> bytearray:
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

    Returns
    -------
    bytearray
        A fresh, writable buffer of ``size`` bytes.

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
    >>> bytes(decode(8, 0, memoryview(raw), 3, zlib.crc32(b"abc"), "entry 'x'"))
    b'abc'
    """
    if method == STORED:
        if len(src) != size:
            raise LeafDataError(
                f"{what}: stored entry has {len(src)} stored bytes but a declared size of "
                f"{size} bytes."
            )
        out = bytearray(src)
    elif size == 0 and len(src) == 0:
        out = bytearray()  # some writers store an empty file with no stream at all
    else:
        out = _decompress(_decompressor(method, flags, src, what), src, size, flags, what)
    actual = zlib.crc32(out)
    if actual != crc:
        raise LeafDataError(
            f"{what}: CRC-32 mismatch, computed {actual:#010x} but the archive records "
            f"{crc:#010x}."
        )
    return out


def _decompressor(method: int, flags: int, src: memoryview, what: str):
    """Return ``(decompressor, start of the stream in src)`` for ``method``."""
    if method == DEFLATE:
        return zlib.decompressobj(-15), 0
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
            f"{what}: lzma properties of {props_size} bytes run past the {len(src)} "
            "stored bytes."
        )
    props = bytes(src[_LZMA_HEADER.size : start])
    try:
        # The same private helper Python's zipfile uses to read zip LZMA properties.
        filt = lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)  # type: ignore[attr-defined]
        return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[filt]), start
    except _DECODE_ERRORS as exc:
        raise LeafDataError(f"{what}: invalid lzma properties {props.hex()}: {exc}") from None


def _decompress(made, src: memoryview, size: int, flags: int, what: str) -> bytearray:
    """Feed ``src`` to the decompressor in slices, never producing more than size + 1."""
    decomp, start = made
    out = bytearray()
    total = len(src)
    pos = start
    try:
        while pos < total and not decomp.eof:
            piece = src[pos : pos + _IN_CHUNK]
            pos += len(piece)
            # zip64 sizes reach 2**64; the C decoders take at most sys.maxsize.
            out += decomp.decompress(piece, min(size + 1 - len(out), sys.maxsize))
            if len(out) > size:
                raise LeafDataError(
                    f"{what}: the data expands beyond its declared size of {size} bytes "
                    f"(from {total} stored bytes)."
                )
    except _DECODE_ERRORS as exc:
        raise LeafDataError(f"{what}: corrupt compressed data: {exc}") from None
    _check_end(decomp, flags, total - pos, len(out), size, what)
    return out


def _check_end(decomp, flags: int, unfed: int, produced: int, size: int, what: str) -> None:
    """Check that the stream ended exactly at the end of the stored bytes, at ``size``."""
    lzma_without_marker = isinstance(decomp, lzma.LZMADecompressor) and not (
        flags & _FLAG_LZMA_EOS
    )
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
