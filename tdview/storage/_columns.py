"""A large central directory as arrays (numpy): found, checked and kept without making
anything per record (see :class:`Columns`)."""

from __future__ import annotations

from typing import Any

from ._zip import _FFFF, CENTRAL, CENTRAL_SIG, LOCAL, LOCAL_SIG, CentralEntry

__all__ = ["Columns", "payload_offsets", "read_columns"]

# Room after the copied central directory for the widest row of names (65,535 bytes, a
# NUL before and after, whole words), so that every row is cut from it without a check.
_ROOM = 65_544
# Word masks keeping the first k bytes (little-endian words), k = 0..8.
_MASKS = [(1 << 8 * k) - 1 for k in range(9)]


class Columns:
    """The central records of a large archive as arrays, one row per record.

    Nothing is made per record: every raw name lies in a row of ``width`` bytes (a NUL,
    the name, NUL padding up to a whole number of 8-byte words; the fast parse only keeps
    archives whose names hold no NUL and are all UTF-8), so the rows whose names start
    with some bytes are found by comparing a few 8-byte words of every row at once
    (:meth:`rows_with_prefix`). :meth:`entry` builds the record of one row.

    Attributes
    ----------
    width : int
        The bytes of each row.
    plain : bool
        Whether every name is plain (see :func:`_plain_names`).
    name_len : numpy array
        The length of each name.
    flags, method, crc32, stored_size, size, header_offset : numpy arrays
        The record fields (offsets shifted for prepended bytes).
    """

    def __init__(self, block: Any, fields: dict[str, Any]) -> None:
        self.width = block.shape[1]
        self.plain = _plain_names(block)
        self._block = block
        self._words = block.view("<u8")  # the same rows as 8-byte words
        self.name_len = fields["name_len"]
        self.flags = fields["flags"]
        self.method = fields["method"]
        self.crc32 = fields["crc32"]
        self.stored_size = fields["stored_size"]
        self.size = fields["size"]
        self.header_offset = fields["header_offset"]
        self._rows: list[tuple[int, ...]] | None = None

    def rows_with_prefix(self, prefix: bytes) -> Any:
        """The rows (ascending) whose names start with ``prefix``: ``name + b"\\0"``
        finds the rows of exactly that name, ``folder + b"/"`` those below a folder."""
        import numpy as np

        framed = b"\0" + prefix
        if len(framed) > self.width:
            return np.empty(0, dtype=np.intp)  # longer than every name
        whole, part = divmod(len(framed), 8)
        wanted = np.frombuffer(framed + bytes(-len(framed) % 8), dtype="<u8")
        rows = None
        # the last word first: the end of a prefix tells names apart sooner than its start
        for j in range(len(wanted) - 1, -1, -1):
            column = self._words[:, j] if rows is None else self._words[rows, j]
            if j == whole:  # the prefix ends inside this word: compare its first bytes
                column = column & np.uint64(_MASKS[part])
            hit = column == wanted[j]
            rows = np.flatnonzero(hit) if rows is None else rows[hit]
            if not rows.size:
                break
        return rows

    def _row(self, row: int) -> bytes:
        """The bytes of one row: a NUL, the name, NUL padding."""
        return self._block[row].tobytes()

    def names_after(self, rows: Any, skip: int) -> list[str]:
        """The names of ``rows`` without their first ``skip`` bytes."""
        width = self.width
        raw = self._block[rows].tobytes()  # the rows one after the other
        return [
            raw[at + 1 + skip : at + 1 + length].decode()
            for at, length in zip(
                range(0, len(raw), width), self.name_len[rows].tolist(), strict=True
            )
        ]

    def name_bytes(self, rows: Any, at: Any) -> Any:
        """Byte ``at[i]`` (or ``at``) of the name of row ``rows[i]``; 0 past its end."""
        return self._block[rows, at + 1]

    def _columns(self) -> tuple[Any, ...]:
        return (
            self.name_len,
            self.flags,
            self.method,
            self.crc32,
            self.stored_size,
            self.size,
            self.header_offset,
        )

    def rows(self) -> list[tuple[int, ...]]:
        """The fields of every row as a tuple of ints (made once: building many records
        is then cheap)."""
        if self._rows is None:
            self._rows = list(zip(*(column.tolist() for column in self._columns()), strict=True))
        return self._rows

    def entry(self, row: int, name: str, *, lists: bool = False) -> CentralEntry:
        """The record of one row, whose decoded name the caller already has (``lists``:
        read the fields from :meth:`rows`, cheaper once many records are built)."""
        if lists:
            length, flags, method, crc, csize, usize, offset = self.rows()[row]
        else:
            length, flags, method, crc, csize, usize, offset = (
                int(column[row]) for column in self._columns()
            )
        raw = self._row(row)[1 : 1 + length]
        return tuple.__new__(CentralEntry, (name, raw, flags, method, crc, csize, usize, offset))

    def names(self) -> list[str]:
        """Every name, in central-directory order."""
        block = self._block
        keep = block != 0  # each name, and the NUL that opens its row
        keep[:, 0] = True
        return block[keep].tobytes()[1:].decode().split("\0")

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

    size = end - start
    if size < CENTRAL.size:
        return None
    # one copy of the directory, with zeroed room after it (see _ROOM)
    arr = np.empty(size + _ROOM, dtype=np.uint8)
    arr[:size] = np.frombuffer(buf, dtype=np.uint8, count=size, offset=start)
    arr[size:] = 0
    # signature candidates: every "P", then the three bytes after it
    hits = np.flatnonzero(arr[: size - 3] == CENTRAL_SIG & 0xFF)
    hits = hits[
        (arr[hits + 1] == (CENTRAL_SIG >> 8) & 0xFF)
        & (arr[hits + 2] == (CENTRAL_SIG >> 16) & 0xFF)
        & (arr[hits + 3] == CENTRAL_SIG >> 24)
    ]
    if not hits.size or hits[0] != 0 or int(hits[-1]) + CENTRAL.size > size:
        return None
    rec = _fields(arr, hits, _CENTRAL_FIELDS)  # the fields of every candidate record
    name_len = rec["name_len"]
    name_start = hits + CENTRAL.size
    nxt = name_start + name_len + rec["extra_len"] + rec["comment_len"]
    if (nxt[:-1] != hits[1:]).any() or int(nxt[-1]) != size:
        return None
    csize, usize, offset = rec["stored_size"], rec["size"], rec["offset"]
    if ((csize == _FFFF) | (usize == _FFFF) | (offset == _FFFF)).any():
        return None  # zip64 sizes or offsets: read from each record's extra field
    block = _name_rows(arr, name_start, name_len)
    if block is None:
        return None  # a name with NUL, not UTF-8, or far longer than most: record by record
    return Columns(
        block,
        {
            "name_len": name_len,
            "flags": rec["flags"],
            "method": rec["method"],
            "crc32": rec["crc32"],
            "stored_size": csize,
            "size": usize,
            "header_offset": offset + shift,
        },
    )


# The fields read of a record: name -> (offset in the record, little-endian type).
Fields = dict[str, tuple[int, str]]
# Of the central file header (CENTRAL), those kept.
_CENTRAL_FIELDS: Fields = {
    "flags": (8, "<u2"),
    "method": (10, "<u2"),
    "crc32": (16, "<u4"),
    "stored_size": (20, "<u4"),
    "size": (24, "<u4"),
    "name_len": (28, "<u2"),
    "extra_len": (30, "<u2"),
    "comment_len": (32, "<u2"),
    "offset": (42, "<u4"),
}
# Of the local file header (LOCAL), those that locate the payload.
_LOCAL_FIELDS: Fields = {"sig": (0, "<u4"), "name_len": (26, "<u2"), "extra_len": (28, "<u2")}


def _fields(data: Any, at: Any, fields: Fields) -> dict[str, Any]:
    """The ``fields`` of the records starting at byte offsets ``at`` of ``data``, as int64.

    A view of ``data`` with a stride of one byte holds a record at every byte offset, so
    the records are gathered in one step (they need no alignment) and each field is read
    from them."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    layout = np.dtype(
        {
            "names": list(fields),
            "formats": [k for _, k in fields.values()],
            "offsets": [o for o, _ in fields.values()],
            "itemsize": max(o + np.dtype(k).itemsize for o, k in fields.values()),
        }
    )
    raw = np.frombuffer(data, dtype=np.uint8)
    every = as_strided(raw, (raw.size - layout.itemsize + 1, layout.itemsize), (1, 1))
    records = every[at].view(layout)[:, 0]
    return {name: records[name].astype(np.int64) for name in fields}


def _name_rows(arr: Any, start: Any, length: Any) -> Any:
    """Every name cut out of the central directory ``arr`` into a row of its own (see
    :class:`Columns`); None when a name holds a NUL byte, the names are not UTF-8, or a
    few names are so much longer than the rest that the rows would take far more room
    than the names."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    total, longest = int(length.sum()), int(length.max())
    width = (longest + 9) // 8 * 8  # a NUL, the name, a NUL at least: whole words
    if len(start) * width > 4 * (total + 8 * len(start)):
        return None
    windows = as_strided(arr, (len(arr) - width + 1, width), (1, 1))
    block = windows[start - 1]  # the byte before each name, the name, what follows it
    # keep in each word the bytes of "the NUL before the name, the name": the masks of
    # the words of a row depend on its name's length only, so they are made once per
    # length, unless there are fewer rows than lengths (the table would outgrow the rows)
    words = np.arange(0, width, 8)
    masks = np.array(_MASKS, dtype=np.uint64)
    if longest < len(start):
        block.view("<u8")[...] &= masks[np.clip(np.arange(longest + 1)[:, None] + 1 - words, 0, 8)][
            length
        ]
    else:
        block.view("<u8")[...] &= masks[np.clip(length[:, None] + 1 - words, 0, 8)]
    block[:, 0] = 0
    if np.count_nonzero(block) != total:
        return None  # a NUL inside a name
    try:
        str(block.data, "utf-8")
    except UnicodeDecodeError:
        return None
    return block


def _plain_names(block: Any) -> bool:
    """Whether every name of these rows (see :class:`Columns`) is plain: not empty, no "/"
    or "." first, and no "/" followed by "/", "." or the name's end (so no empty, "." or
    ".." component and no explicit directory entry)."""
    first = block[:, 1]
    if ((first == 0) | (first == 0x2F) | (first == 0x2E)).any():
        return False
    # the last byte of every row is a NUL: one pass over the rows end to end is exact
    flat = block.ravel()
    after = flat[1:]
    return not ((flat[:-1] == 0x2F) & ((after == 0x2F) | (after == 0x2E) | (after == 0))).any()


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
        central = columns.name_bytes(np.repeat(index[kept], lengths), step)
        same = np.minimum.reduceat((local == central).view(np.uint8), first)
        good[kept[same == 0]] = False
    return [int(p) if ok else None for p, ok in zip(payload.tolist(), good.tolist(), strict=True)]
