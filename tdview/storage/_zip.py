"""Parse a zip file's central directory from a buffer (no I/O, no ``zipfile``).

Only the end records and the central directory are read here: local headers are read
one at a time by the archive store when an entry is used. Offsets returned are
positions in the buffer, already corrected for bytes prepended to the archive
(self-extracting style), the way Python's ``zipfile`` corrects them.

Name decoding: with flag 0x800 a name is UTF-8. Without it, a name that is valid UTF-8
is decoded as UTF-8 and anything else as cp437. Info-ZIP's ``zip`` stores raw UTF-8
names without the flag, so this finds ``ключ.memmap`` by its real name where the
reference (cp437 only) silently loses the key; a true cp437 name is rarely valid UTF-8.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..errors import ArchiveError

if TYPE_CHECKING:
    from ._columns import Columns

__all__ = ["CentralDirectory", "CentralEntry", "LOCAL", "parse_central_directory"]

EOCD = struct.Struct("<IHHHHIIH")  # end of central directory, 22 bytes
ZIP64_LOCATOR = struct.Struct("<IIQI")  # 20 bytes
ZIP64_EOCD = struct.Struct("<IQHHIIQQQQ")  # 56 bytes without extensible data
CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # central file header, 46 bytes
# The same record, skipping the fields tdview does not use (fewer objects per record).
_CENTRAL_USED = struct.Struct("<I4xHH4xIIIHHH8xI")
LOCAL = struct.Struct("<IHHHHHIIIHH")  # local file header, 30 bytes
EXTRA = struct.Struct("<HH")
U64 = struct.Struct("<Q")

EOCD_SIG = b"PK\x05\x06"
ZIP64_LOCATOR_SIG = 0x07064B50
ZIP64_EOCD_SIG = 0x06064B50
CENTRAL_SIG = 0x02014B50
LOCAL_SIG = 0x04034B50

MAX_COMMENT = 0xFFFF
FLAG_ENCRYPTED = 0x1
FLAG_UTF8 = 0x800
_FFFF = 0xFFFFFFFF


class CentralEntry(NamedTuple):
    """One central directory record, with zip64 sizes and the prepended shift applied."""

    name: str
    raw_name: bytes
    flags: int
    method: int
    crc32: int
    stored_size: int
    size: int
    header_offset: int


@dataclass
class CentralDirectory:
    """The parsed central directory of an archive.

    Attributes
    ----------
    entries : list of CentralEntry or None
        The records in central-directory order (directory entries included); None when
        the parse kept them as :attr:`columns` (large archives).
    start : int
        Position of the first central record in the buffer.
    shift : int
        Bytes found before the archive's own offset 0 (prepended data).
    comment : bytes
        The archive comment.
    columns : Columns or None
        The records as arrays, when the fast parse made them.
    """

    entries: list[CentralEntry] | None
    start: int
    shift: int
    comment: bytes
    columns: Columns | None = None

    def records(self) -> list[CentralEntry]:
        """Every record, built now if the parse kept them as columns."""
        if self.entries is None:
            assert self.columns is not None
            self.entries = self.columns.entries()
        return self.entries

    def has_name(self, name: str) -> bool:
        """Whether some record is named ``name`` (checks no other name)."""
        if self.entries is None:
            assert self.columns is not None
            return len(self.columns.rows_with_prefix(name.encode() + b"\0")) > 0
        return any(e.name == name for e in self.entries)


def parse_central_directory(buf, size: int, where: str) -> CentralDirectory | None:
    """Parse the central directory of the zip archive held in ``buf``.

    Parameters
    ----------
    buf : mmap.mmap or bytes
        The whole archive file.
    size : int
        ``len(buf)``.
    where : str
        The archive path, used in messages.

    Returns
    -------
    CentralDirectory or None
        ``None`` when no end-of-central-directory record exists (not a zip file).

    Raises
    ------
    ArchiveError
        If the end records or the central directory are inconsistent or truncated.

    Examples
    --------
    >>> import io, zipfile
    >>> out = io.BytesIO()
    >>> with zipfile.ZipFile(out, "w") as zf:
    ...     zf.writestr("meta.json", b"{}")
    >>> data = out.getvalue()
    >>> [e.name for e in parse_central_directory(data, len(data), "x.zip").records()]
    ['meta.json']
    """
    found = _find_eocd(buf, size)
    if found is None:
        return None
    eocd_pos, cd_size, cd_offset, comment = found
    record_pos = eocd_pos
    zip64 = _read_zip64(buf, size, eocd_pos, where)
    if zip64 is not None:
        record_pos, cd_size, cd_offset = zip64
    start = record_pos - cd_size
    shift = start - cd_offset
    if start < 0 or shift < 0:
        raise ArchiveError(
            f"corrupt zip archive {where}: a central directory of {cd_size} bytes at offset "
            f"{cd_offset} does not fit before its end record at offset {record_pos}."
        )
    from ._columns import read_columns  # numpy, for large archives only

    fast = (
        read_columns(buf, start, record_pos, shift) if (record_pos - start >= _FAST_BYTES) else None
    )
    if fast is not None:
        return CentralDirectory(None, start, shift, comment, fast)
    entries = _read_entries(buf, start, record_pos, shift, where)
    return CentralDirectory(entries, start, shift, comment)


def _find_eocd(buf, size: int) -> tuple[int, int, int, bytes] | None:
    """Locate the end record, scanning back over at most a maximal comment.

    A record whose comment ends exactly at the end of the file wins; otherwise the
    last record whose comment fits (trailing junk, as ``zipfile`` tolerates).
    """
    lowest = max(0, size - EOCD.size - MAX_COMMENT)
    end = size - EOCD.size + len(EOCD_SIG)
    fallback = None
    while end > lowest:
        pos = buf.rfind(EOCD_SIG, lowest, end)
        if pos < 0:
            break
        fields = EOCD.unpack_from(buf, pos)
        cd_size, cd_offset, comment_len = fields[5], fields[6], fields[7]
        comment_end = pos + EOCD.size + comment_len
        if comment_end == size:
            return pos, cd_size, cd_offset, bytes(buf[pos + EOCD.size : comment_end])
        if comment_end < size and fallback is None:
            fallback = pos, cd_size, cd_offset, bytes(buf[pos + EOCD.size : comment_end])
        end = pos + len(EOCD_SIG) - 1
    return fallback


def _read_zip64(buf, size: int, eocd_pos: int, where: str) -> tuple[int, int, int] | None:
    """Return ``(record position, cd size, cd offset)`` from the zip64 end record, if any."""
    loc_pos = eocd_pos - ZIP64_LOCATOR.size
    if loc_pos < 0:
        return None
    sig, _disk, rec_offset, disks = ZIP64_LOCATOR.unpack_from(buf, loc_pos)
    if sig != ZIP64_LOCATOR_SIG:
        return None
    if disks > 1:
        raise ArchiveError(f"zip archive {where} spans {disks} disks; tdview reads one file.")
    # The record normally sits right before the locator (this also survives prepended
    # bytes); with extensible data it is only found through the recorded offset.
    for pos in (loc_pos - ZIP64_EOCD.size, rec_offset):
        if 0 <= pos <= size - ZIP64_EOCD.size:
            fields = ZIP64_EOCD.unpack_from(buf, pos)
            if fields[0] == ZIP64_EOCD_SIG:
                return pos, fields[8], fields[9]
    raise ArchiveError(
        f"corrupt zip archive {where}: the zip64 locator at offset {loc_pos} points to "
        f"offset {rec_offset}, where there is no zip64 end record."
    )


def _read_entries(buf, start: int, end: int, shift: int, where: str) -> list[CentralEntry]:
    """Read the central records between ``start`` and ``end``."""
    entries: list[CentralEntry] = []
    append = entries.append
    unpack = _CENTRAL_USED.unpack_from
    make = tuple.__new__  # skips NamedTuple's keyword-handling __new__ (20,000 records)
    pos = start
    while pos < end:
        if pos + CENTRAL.size > end:
            raise ArchiveError(
                f"corrupt zip archive {where}: truncated central directory record at "
                f"offset {pos} (the directory ends at {end})."
            )
        (sig, flags, method, crc, csize, usize, name_len, extra_len, comment_len, offset) = unpack(
            buf, pos
        )
        if sig != CENTRAL_SIG:
            raise ArchiveError(
                f"corrupt zip archive {where}: bad central directory signature {sig:#010x} "
                f"at offset {pos}."
            )
        name_end = pos + CENTRAL.size + name_len
        extra_end = name_end + extra_len
        record_end = extra_end + comment_len
        if record_end > end:
            raise ArchiveError(
                f"corrupt zip archive {where}: the central record at offset {pos} ends at "
                f"{record_end}, past the end of the central directory at {end}."
            )
        raw = bytes(buf[pos + CENTRAL.size : name_end])
        try:
            name = raw.decode()
        except UnicodeDecodeError:
            name = _decode_name(raw, flags, where)
        if csize == _FFFF or usize == _FFFF or offset == _FFFF:
            usize, csize, offset = _zip64_extra(
                buf, name_end, extra_end, usize, csize, offset, name, where
            )
        append(make(CentralEntry, (name, raw, flags, method, crc, csize, usize, offset + shift)))
        pos = record_end
    return entries


# Central directories from this size on (about 1,000 records) are parsed with numpy.
_FAST_BYTES = 64 << 10


def _decode_name(raw: bytes, flags: int, where: str) -> str:
    """Decode a name that is not valid UTF-8: cp437, unless flag 0x800 says UTF-8."""
    if flags & FLAG_UTF8:
        raise ArchiveError(
            f"corrupt zip archive {where}: entry name {raw!r} is flagged UTF-8 but is "
            "not valid UTF-8."
        )
    return raw.decode("cp437")


def _zip64_extra(
    buf, pos: int, end: int, usize: int, csize: int, offset: int, name: str, where: str
) -> tuple[int, int, int]:
    """Replace the 0xFFFFFFFF fields by the 64-bit values of the zip64 extra block."""
    while pos + EXTRA.size <= end:
        tag, length = EXTRA.unpack_from(buf, pos)
        block_end = pos + EXTRA.size + length
        if block_end > end:
            raise ArchiveError(
                f"corrupt zip archive {where}: extra field {tag:#06x} of entry {name!r} "
                f"claims {length} bytes, past the end of its extra data."
            )
        if tag == 0x0001:
            values = [usize, csize, offset]
            field = pos + EXTRA.size
            for i in range(3):
                if values[i] != _FFFF:
                    continue
                if field + U64.size > block_end:
                    raise ArchiveError(
                        f"corrupt zip archive {where}: the zip64 extra field of entry "
                        f"{name!r} is {length} bytes, too short for its 64-bit fields."
                    )
                values[i] = U64.unpack_from(buf, field)[0]
                field += U64.size
            return values[0], values[1], values[2]
        pos = block_end
    return usize, csize, offset
