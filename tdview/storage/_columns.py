"""A large central directory as arrays (numpy): found, checked and kept without making
anything per record (see :class:`Columns`)."""

from __future__ import annotations

from typing import Any

from ._zip import _FFFF, CENTRAL, CENTRAL_SIG, LOCAL, LOCAL_SIG, CentralEntry

__all__ = ["Columns", "payload_offsets", "read_columns"]


class Columns:
    """The central records of a large archive as arrays, one row per record.

    Nothing is made per record: ``text`` holds every raw name, each framed by NUL bytes
    (``b"\0a\0b/c\0"``; the fast parse only keeps archives whose names hold no NUL and
    are all UTF-8), so a name is found with one substring search and its row with one
    bisection of ``name_pos``. :meth:`entry` builds the record of one row.

    Attributes
    ----------
    text : bytes
    name_pos, name_len : numpy arrays
        Where each name lies in ``text``.
    flags, method, crc32, stored_size, size, header_offset : numpy arrays
        The record fields (offsets shifted for prepended bytes).
    """

    def __init__(self, text: bytes, fields: dict[str, Any]) -> None:
        self.text = text
        self.name_pos = fields["name_pos"]
        self.name_len = fields["name_len"]
        self.flags = fields["flags"]
        self.method = fields["method"]
        self.crc32 = fields["crc32"]
        self.stored_size = fields["stored_size"]
        self.size = fields["size"]
        self.header_offset = fields["header_offset"]
        self.count = len(self.name_pos)
        self._rows: list[tuple[int, ...]] | None = None

    def row_at(self, pos: int) -> int:
        """The row whose name starts at ``pos`` in :attr:`text`."""
        return int(self.name_pos.searchsorted(pos))

    def _columns(self) -> tuple[Any, ...]:
        return (self.name_pos, self.name_len, self.flags, self.method, self.crc32,
                self.stored_size, self.size, self.header_offset)

    def rows(self) -> list[tuple[int, ...]]:
        """The fields of every row as a tuple of ints (made once: building many records
        is then cheap)."""
        if self._rows is None:
            self._rows = list(zip(*(column.tolist() for column in self._columns()),
                                  strict=True))
        return self._rows

    def entry(self, row: int, name: str, *, lists: bool = False) -> CentralEntry:
        """The record of one row, whose decoded name the caller already has (``lists``:
        read the fields from :meth:`rows`, cheaper once many records are built)."""
        if lists:
            pos, length, flags, method, crc, csize, usize, offset = self.rows()[row]
        else:
            pos, length, flags, method, crc, csize, usize, offset = (
                int(column[row]) for column in self._columns())
        raw = self.text[pos : pos + length]
        return tuple.__new__(CentralEntry, (name, raw, flags, method, crc, csize, usize,
                                            offset))

    def names(self) -> list[str]:
        """Every name, in central-directory order."""
        return self.text[1:-1].decode().split("\0")

    def entries(self) -> list[CentralEntry]:
        """Every record, in central-directory order."""
        return [self.entry(row, name, lists=True) for row, name in enumerate(self.names())]

    def layout(self, cd_start: int) -> Any:
        """The sorted local header offsets, then ``cd_start``, when every entry's minimal
        region (30 bytes + name + stored bytes) ends before the next one begins; None
        when one does not (the record-by-record check then names it)."""
        import numpy as np

        order = np.argsort(self.header_offset, kind="stable")
        starts = np.append(self.header_offset[order], cd_start)
        ends = (self.header_offset + LOCAL.size + self.name_len + self.stored_size)[order]
        if (ends > starts[1:]).any():
            return None
        return starts


def read_columns(buf, start: int, end: int, shift: int) -> Columns | None:
    """Parse a large central directory with whole-array operations, or return None.

    The records are found by their signature, then checked to chain exactly (each one
    ends where the next begins, the last at ``end``): a name that happens to hold the
    signature, a zip64 record or anything unusual breaks the chain or is refused here,
    and the record-by-record parse (:func:`_read_entries`) takes over, with its checks
    and messages. So does a name with a NUL byte or one that is not UTF-8.
    """
    import numpy as np  # only here: small archives and the metadata layers stay light

    data = bytes(buf[start:end])
    size = len(data)
    if size < CENTRAL.size:
        return None
    arr = np.frombuffer(data, dtype=np.uint8)
    # signature candidates: every "P", then the three bytes after it
    hits = np.flatnonzero(arr[: size - 3] == CENTRAL_SIG & 0xFF)
    hits = hits[(arr[hits + 1] == (CENTRAL_SIG >> 8) & 0xFF)
                & (arr[hits + 2] == (CENTRAL_SIG >> 16) & 0xFF)
                & (arr[hits + 3] == CENTRAL_SIG >> 24)]
    if not hits.size or hits[0] != 0 or int(hits[-1]) + CENTRAL.size > size:
        return None
    rec = _fields(data, hits, _CENTRAL_FIELDS)  # the fields of every candidate record
    name_len = rec["name_len"]
    name_start = hits + CENTRAL.size
    nxt = name_start + name_len + rec["extra_len"] + rec["comment_len"]
    if (nxt[:-1] != hits[1:]).any() or int(nxt[-1]) != size:
        return None
    csize, usize, offset = rec["stored_size"], rec["size"], rec["offset"]
    if ((csize == _FFFF) | (usize == _FFFF) | (offset == _FFFF)).any():
        return None  # zip64 sizes or offsets: read from each record's extra field
    found = _name_text(arr, name_start, name_len)
    if found is None:
        return None  # a name with NUL, or not UTF-8: decoded record by record
    text, name_pos = found
    return Columns(text, {
        "name_pos": name_pos, "name_len": name_len, "flags": rec["flags"],
        "method": rec["method"], "crc32": rec["crc32"], "stored_size": csize, "size": usize,
        "header_offset": offset + shift})


# The fields read of a record: name -> (offset in the record, little-endian type).
Fields = dict[str, tuple[int, str]]
# Of the central file header (CENTRAL), those kept.
_CENTRAL_FIELDS: Fields = {
    "flags": (8, "<u2"), "method": (10, "<u2"), "crc32": (16, "<u4"),
    "stored_size": (20, "<u4"), "size": (24, "<u4"), "name_len": (28, "<u2"),
    "extra_len": (30, "<u2"), "comment_len": (32, "<u2"), "offset": (42, "<u4")}
# Of the local file header (LOCAL), those that locate the payload.
_LOCAL_FIELDS: Fields = {"sig": (0, "<u4"), "name_len": (26, "<u2"), "extra_len": (28, "<u2")}


def _fields(data: Any, at: Any, fields: Fields) -> dict[str, Any]:
    """The ``fields`` of the records starting at byte offsets ``at`` of ``data``, as int64.

    A view of ``data`` with a stride of one byte holds the little-endian integer that
    starts at every byte offset, so each field is one gather (records need no
    alignment)."""
    import numpy as np

    size = len(data)
    out = {}
    for name, (offset, kind) in fields.items():
        width = np.dtype(kind).itemsize
        every = np.ndarray((size - width + 1,), dtype=kind, buffer=data, strides=(1,))
        out[name] = every[at + offset].astype(np.int64)
    return out


def _name_text(arr: Any, start: Any, length: Any) -> tuple[bytes, Any] | None:
    """Every name cut out of the central directory into one buffer, each framed by NUL
    bytes, and where each begins there; None when a name holds a NUL byte or the names
    are not UTF-8 (UTF-8 never puts a NUL inside a character, so the framing is exact)."""
    import numpy as np

    slots = length + 1  # each name and the NUL before it
    out_start = np.cumsum(slots) - length  # where each name begins in the text
    # keep the byte before each name (its NUL to be) and the name: runs of bytes to drop
    # and to keep, alternately
    runs = np.empty(2 * len(start), dtype=np.int64)
    runs[0::2] = start - 1 - np.append(0, (start + length)[:-1])
    runs[1::2] = slots
    keep = np.repeat(np.tile(np.array([False, True]), len(start)), runs)
    gathered = np.empty(int(slots.sum()) + 1, dtype=np.uint8)
    gathered[:-1] = arr[: keep.size][keep]
    gathered[out_start - 1] = 0
    gathered[-1] = 0  # the closing NUL
    if np.count_nonzero(gathered == 0) != len(length) + 1:
        return None
    text = gathered.tobytes()
    try:
        text.decode()
    except UnicodeDecodeError:
        return None
    return text, out_start



def payload_offsets(buf, columns: Columns, rows: list[int], starts: Any) -> list[int | None]:
    """The payload offset of each of ``rows``, from their local headers read in one pass
    (what :meth:`~._archive.ArchiveStore.payload_offset` finds one entry at a time), or
    None for a row whose header is not exactly right (signature, name as in the central
    directory, data ending before the next entry): the one-by-one path then says why.

    ``buf`` is the whole archive; ``starts`` the sorted header offsets, then the central
    directory start (see :meth:`Columns.layout`).
    """
    import numpy as np

    arr = np.frombuffer(buf, dtype=np.uint8)
    index = np.asarray(rows, dtype=np.int64)
    at = columns.header_offset[index]
    inside = at + LOCAL.size <= arr.size
    at = np.where(inside, at, 0)
    head = _fields(buf, at, _LOCAL_FIELDS)
    name_len = columns.name_len[index]
    good = inside & (head["sig"] == LOCAL_SIG) & (head["name_len"] == name_len)
    payload = at + LOCAL.size + name_len + head["extra_len"]
    limit = starts[np.searchsorted(starts, at, side="right")]
    good &= payload + columns.stored_size[index] <= limit
    # the local names, byte for byte against the central ones (rows still good)
    kept = np.flatnonzero(good)
    if kept.size:
        lengths = name_len[kept]
        first = np.cumsum(lengths) - lengths  # where each name begins in the gathered run
        step = np.arange(int(lengths.sum())) - np.repeat(first, lengths)
        local = arr[np.repeat(at[kept] + LOCAL.size, lengths) + step]
        text = np.frombuffer(columns.text, dtype=np.uint8)
        central = text[np.repeat(columns.name_pos[index[kept]], lengths) + step]
        same = np.minimum.reduceat((local == central).view(np.uint8), first)
        good[kept[same == 0]] = False
    return [int(p) if ok else None for p, ok in zip(payload.tolist(), good.tolist(),
                                                     strict=True)]
