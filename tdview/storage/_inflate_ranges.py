"""Byte ranges of a compressed zip entry: inflated from its start, only as far as the
last byte asked for.

A deflate (bzip2, lzma) stream cannot be entered in the middle: the bytes ``[a, b)`` of
an entry's content are those its decompressor produces after ``a`` others. So
:func:`inflate_ranges` streams the entry from its first stored byte and stops once it
has produced ``max(b)`` bytes: rows near the start of a large entry cost a small
fraction of its inflation, and of its stored bytes, which it reads by ranges
(``read(offset, buffer)``: a copy out of the archive's mapping, ranged requests for a
remote one). Each read is sized on the ratio seen so far (the entry's own ratio at
first), a little more than the rest needs, and at most 1 MiB or as much as was read
before it (a stream that compresses unevenly over-reads at most that); so a remote
prefix costs few requests (their sizes doubling) and a few percent more stored bytes
than it needs; a read of the whole entry reads all of it at once. Output is
taken in chunks of at most 4 MiB, copied into ``dest`` where the ranges ask for it and
dropped: the memory used is a read (at most 64 MiB) and a chunk, whatever the entry's
size.

A prefix cannot be checked by the entry's CRC-32, which covers all of it: a read that
reaches the entry's end checks the CRC-32 and the end of the stream, as a whole read
does (``tdview check`` checks every entry). Corrupt data met on the way is a
:class:`~tdview.errors.LeafDataError` naming the archive and the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import LeafDataError
from ._codecs import DECODE_ERRORS, _check_end, decompressor
from ._crc import crc32

__all__ = ["inflate_ranges"]

_OUT_CHUNK = 4 << 20  # the most output taken from the decompressor at once
_IN_CHUNK = 1 << 20  # the most input given to it at once
_MIN_READ = 4 << 10  # the smallest read of stored bytes
_MAX_READ = 64 << 20  # the largest (a remote store cuts it into concurrent pieces)
_FLOOR = 1 << 20  # a read may always be this large, whatever was read before it
_SLACK = 2 << 10  # read past the estimate: the rest of a deflate symbol, bit buffers

#: ``read(offset, buffer)``: fill ``buffer`` with the entry's stored bytes at ``offset``.
Reader = Callable[[int, memoryview], None]


def inflate_ranges(
    entry: tuple[int, int, int, int, int],
    read: Reader,
    spans: Sequence[tuple[int, int]],
    dest: memoryview,
    what: str,
) -> int:
    """Fill ``dest`` with the bytes ``[start, end)`` of a compressed entry's content for
    each span, one span after the other, inflating only up to the largest ``end``.

    Parameters
    ----------
    entry : tuple
        ``(method, flags, stored_size, size, crc32)`` of the entry, as its central
        directory records them.
    read : callable
        ``read(offset, buffer)`` fills ``buffer`` with the stored bytes at ``offset``.
    spans : sequence of (int, int)
        Byte ranges of the content, each inside ``[0, size]``.
    dest : memoryview
        Writable, as long as the spans together.
    what : str
        ``"entry 'a.memmap' in /x.tdz"``, used in messages.

    Returns
    -------
    int
        The stored bytes read.

    Raises
    ------
    LeafDataError
        The stream is corrupt or ends before the last byte asked for; when the whole
        entry is read: it expands beyond its size, has trailing bytes or fails its CRC.

    Examples
    --------
    >>> import zlib
    >>> c = zlib.compressobj(wbits=-15)
    >>> raw = c.compress(b"abcdefgh" * 1000) + c.flush()
    >>> out = bytearray(3)
    >>> read = lambda at, buf: buf.__setitem__(slice(None), raw[at : at + len(buf)])
    >>> entry = (8, 0, len(raw), 8000, zlib.crc32(b"abcdefgh" * 1000))
    >>> inflate_ranges(entry, read, [(1, 3), (9, 10)], memoryview(out), "entry 'x'") > 0
    True
    >>> bytes(out)
    b'bcb'
    """
    method, flags, stored_size, size, crc = entry
    need = max((end for _, end in spans), default=0)
    if need == 0:
        return 0
    copier = _Copier(spans, dest)
    stream = _Stream(read, stored_size, size, need)
    head = stream.next_input(0)
    decomp, start = decompressor(method, flags, head, what)
    whole = need == size
    produced, running = 0, 0
    try:
        data: bytes | memoryview = head[start:]
        full = False
        while produced < need:
            if not data and not full:  # the decompressor took all it was given
                if stream.exhausted:
                    break
                data = stream.next_input(produced)
            limit = min(_OUT_CHUNK, need - produced)
            piece = decomp.decompress(data, limit)
            data = getattr(decomp, "unconsumed_tail", b"")  # zlib keeps it apart
            full = len(piece) == limit
            copier.take(produced, piece)
            produced += len(piece)
            if whole:
                running = crc32(piece, running)
            if decomp.eof or (not piece and not data and stream.exhausted):
                break
        if produced < need:
            raise LeafDataError(
                f"{what}: the compressed stream ended after {produced} bytes, before byte "
                f"{need} that was asked for (its declared size is {size} bytes)."
            )
        if whole:
            _check_whole(decomp, flags, stream, data, size, what)
    except DECODE_ERRORS as exc:
        raise LeafDataError(f"{what}: corrupt compressed data: {exc}") from None
    if whole and running != crc:
        raise LeafDataError(
            f"{what}: CRC-32 mismatch, computed {running:#010x} but the archive records "
            f"{crc:#010x}."
        )
    return stream.fed


def _check_whole(
    decomp, flags: int, stream: _Stream, data: bytes | memoryview, size: int, what: str
) -> None:
    """After ``size`` bytes: the stream must end there, with no byte after its end."""
    while not decomp.eof:
        more = not data and not stream.exhausted
        if more:
            data = stream.next_input(size)
        given = len(data)
        if decomp.decompress(data, 1):  # output still pending, or more input that expands
            raise LeafDataError(
                f"{what}: the data expands beyond its declared size of {size} bytes "
                f"(from {stream.stored_size} stored bytes)."
            )
        data = getattr(decomp, "unconsumed_tail", b"")
        if not given and not more:
            break  # nothing left to feed, nothing came out: _check_end says what is wrong
    _check_end(decomp, flags, stream.unfed + len(data), size, size, what)


class _Stream:
    """The stored bytes, read in chunks sized by what the rest of the output needs, and
    fed to the decompressor in slices of at most 1 MiB (zlib copies the unconsumed tail
    of what it is given at each call: a slice keeps that copy small)."""

    def __init__(self, read: Reader, stored_size: int, size: int, need: int) -> None:
        self._read, self.stored_size, self._size, self._need = read, stored_size, size, need
        self.fed = 0  # stored bytes read
        self._chunk, self._at = memoryview(b""), 0

    @property
    def exhausted(self) -> bool:
        """Every stored byte was fed."""
        return self._at >= len(self._chunk) and self.fed >= self.stored_size

    @property
    def unfed(self) -> int:
        """Stored bytes not fed yet (read or not)."""
        return self.stored_size - self.fed + len(self._chunk) - self._at

    def next_input(self, produced: int) -> memoryview:
        """The next slice of stored bytes, reading the next chunk when this one is fed
        (``produced``: the output so far, which sizes that read)."""
        if self._at >= len(self._chunk):
            self._chunk, self._at = self._next_chunk(produced), 0
        piece = self._chunk[self._at : self._at + _IN_CHUNK]
        self._at += len(piece)
        return piece

    def _next_chunk(self, produced: int) -> memoryview:
        """The next stored bytes: the estimate of what the output still needs (the ratio
        so far; the entry's own before any output), bounded (see the module docstring)."""
        if produced:
            ratio = self.fed / produced
        else:
            ratio = self.stored_size / max(self._size, 1)
        estimate = int((self._need - produced) * ratio * 1.02) + _SLACK
        if self._need == self._size:  # the whole entry: every stored byte is needed
            estimate = self.stored_size
        bound = min(_MAX_READ, max(_FLOOR, self.fed))
        n = min(max(_MIN_READ, min(estimate, bound)), self.stored_size - self.fed)
        chunk = memoryview(bytearray(n))
        self._read(self.fed, chunk)
        self.fed += n
        return chunk


class _Copier:
    """Copies each output chunk's bytes that the spans ask for into their place in
    ``dest`` (spans in any order, overlapping or not)."""

    def __init__(self, spans: Sequence[tuple[int, int]], dest: memoryview) -> None:
        places, at = [], 0
        for start, end in spans:
            places.append((start, end, at))
            at += end - start
        self._order = sorted(places)  # by start: the chunks come in order
        self._next = 0
        self._open: list[tuple[int, int, int]] = []
        self._dest = dest.cast("B") if dest.format != "B" else dest

    def take(self, at: int, piece: bytes) -> None:
        """Copy what the spans need of ``piece``, the output bytes ``[at, at + len)``."""
        stop = at + len(piece)
        order = self._order
        while self._next < len(order) and order[self._next][0] < stop:
            self._open.append(order[self._next])
            self._next += 1
        view = memoryview(piece)
        for start, end, place in self._open:
            lo, hi = max(start, at), min(end, stop)
            if lo < hi:
                self._dest[place + lo - start : place + hi - start] = view[lo - at : hi - at]
        self._open = [span for span in self._open if span[1] > stop]
