"""Helpers that write and patch zip files byte by byte, for the storage tests.

These are independent of tdview's own parser (their own struct layouts), and the tests
at the bottom check that Python's ``zipfile`` reads what they write.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

LOCAL = struct.Struct("<IHHHHHIIIHH")
CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
EOCD = struct.Struct("<IHHHHIIH")
ZIP64_EOCD = struct.Struct("<IQHHIIQQQQ")
ZIP64_LOCATOR = struct.Struct("<IIQI")

# Field offsets inside the headers, for patching.
LOCAL_FLAGS, LOCAL_NAME_LEN, LOCAL_EXTRA_LEN = 6, 26, 28
CENTRAL_FLAGS, CENTRAL_METHOD, CENTRAL_CRC = 8, 10, 16
CENTRAL_CSIZE, CENTRAL_USIZE, CENTRAL_OFFSET = 20, 24, 42


def compress(data: bytes, method: int) -> bytes:
    """Compress ``data`` the way a zip writer does for ``method``."""
    if method == 0:
        return data
    if method == 8:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if method == 12:
        return bz2.compress(data)
    if method == 14:
        c = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1}])
        props = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1})
        return struct.pack("<BBH", 9, 4, len(props)) + props + c.compress(data) + c.flush()
    raise ValueError(method)


@dataclass(frozen=True)
class Raw:
    """Entry content written as given: ``body`` as the stored bytes, with a declared size."""

    body: bytes
    size: int
    crc: int = 0


def craft_zip(
    entries,
    *,
    zip64: bool = False,
    prepend: bytes = b"",
    comment: bytes = b"",
    lzma_eos: bool = True,
) -> bytes:
    """Write a zip archive.

    ``entries`` holds ``(name, data)`` or ``(name, data, method)``; a ``str`` name is
    UTF-8 (flag 0x800 when non-ASCII), a ``bytes`` name is written raw without the flag.
    ``data`` may be a :class:`Raw` to write a stream that does not match its sizes.
    With ``zip64`` every size and offset goes through zip64 fields and end records.
    Offsets are relative to the start of the zip, after ``prepend`` (self-extractor).
    """
    out = bytearray(prepend)
    base = len(prepend)
    records = []
    for item in entries:
        name, data, method = (*item, 0) if len(item) == 2 else item
        raw = name if isinstance(name, bytes) else name.encode()
        flags = 0x800 if isinstance(name, str) and not name.isascii() else 0
        if method == 14 and lzma_eos:
            flags |= 0x2
        if isinstance(data, Raw):
            body, crc = data.body, data.crc
        else:
            body, crc = compress(data, method), zlib.crc32(data)
        size = data.size if isinstance(data, Raw) else len(data)
        offset = len(out) - base
        extra = struct.pack("<HHQQ", 1, 16, size, len(body)) if zip64 else b""
        big = 0xFFFFFFFF
        out += LOCAL.pack(
            0x04034B50,
            45,
            flags,
            method,
            0,
            0x21,
            crc,
            big if zip64 else len(body),
            big if zip64 else size,
            len(raw),
            len(extra),
        )
        out += raw + extra + body
        records.append((raw, flags, method, crc, len(body), size, offset))
    cd_start = len(out) - base
    for raw, flags, method, crc, csize, usize, offset in records:
        extra = struct.pack("<HHQQQ", 1, 24, usize, csize, offset) if zip64 else b""
        fields = (0xFFFFFFFF,) * 3 if zip64 else (csize, usize, offset)
        out += CENTRAL.pack(
            0x02014B50,
            0x031E,
            45,
            flags,
            method,
            0,
            0x21,
            crc,
            fields[0],
            fields[1],
            len(raw),
            len(extra),
            0,
            0,
            0,
            0o644 << 16,
            fields[2],
        )
        out += raw + extra
    cd_size = len(out) - base - cd_start
    n = len(records)
    if zip64:
        z64 = len(out) - base
        out += ZIP64_EOCD.pack(0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_start)
        out += ZIP64_LOCATOR.pack(0x07064B50, 0, z64, 1)
        out += EOCD.pack(0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    else:
        out += EOCD.pack(0x06054B50, 0, 0, n, n, cd_size, cd_start, len(comment))
    return bytes(out + comment)


def zip_dir(
    src: Path,
    *,
    explicit_dirs: bool = False,
    deflate_meta: bool = False,
    force_zip64: bool = False,
    comment: bytes = b"",
    stream: bool = False,
) -> bytes:
    """Zip the directory ``src`` with Python's ``zipfile`` and return the bytes.

    ``stream=True`` writes to a non-seekable stream, so entries get data descriptors.
    """
    sink = io.BytesIO()
    target = _NonSeekable(sink) if stream else sink
    with zipfile.ZipFile(target, "w") as zf:
        for root, dirs, files in os.walk(src):
            dirs.sort()
            rel = Path(root).relative_to(src).as_posix()
            prefix = "" if rel == "." else rel + "/"
            if explicit_dirs and prefix:
                zf.writestr(zipfile.ZipInfo(prefix), b"")
            for name in sorted(files):
                info = zipfile.ZipInfo(prefix + name)
                if deflate_meta and name == "meta.json":
                    info.compress_type = zipfile.ZIP_DEFLATED
                with zf.open(info, "w", force_zip64=force_zip64) as out:
                    out.write((Path(root) / name).read_bytes())
        zf.comment = comment
    return sink.getvalue()


class _NonSeekable:
    """A write-only stream: zipfile then writes data descriptors (flag bit 3)."""

    def __init__(self, sink: io.BytesIO) -> None:
        self._sink = sink

    def write(self, data: bytes) -> int:
        return self._sink.write(data)

    def flush(self) -> None:
        pass


def central_offset(data: bytes, name: bytes) -> int:
    """Return the position of the central record named ``name``."""
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46 : pos + 46 + name_len] == name:
            return pos
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise KeyError(name)


def local_offset(data: bytes, name: bytes) -> int:
    """Return the position of the local header of entry ``name`` (from its central record)."""
    return struct.unpack_from("<I", data, central_offset(data, name) + CENTRAL_OFFSET)[0]


def patch(data: bytes, pos: int, fmt: str, value) -> bytes:
    """Return ``data`` with ``struct.pack(fmt, value)`` written at ``pos``."""
    out = bytearray(data)
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


# -- the helpers write what zipfile reads -------------------------------------------------


def test_craft_zip_is_read_by_zipfile() -> None:
    entries = [
        ("meta.json", b"{}"),
        ("a.memmap", b"x" * 100, 8),
        ("b.memmap", b"y" * 50, 12),
        ("c.memmap", b"z" * 70, 14),
        ("ключ.memmap", b"k"),
    ]
    for zip64 in (False, True):
        data = craft_zip(entries, zip64=zip64, prepend=b"#!stub\n", comment=b"hi")
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            assert zf.testzip() is None
            assert zf.namelist() == [e[0] for e in entries]
            assert zf.read("c.memmap") == b"z" * 70
            assert zf.comment == b"hi"


def test_patch_helpers_find_records() -> None:
    data = craft_zip([("meta.json", b"{}"), ("a.memmap", b"abc")])
    assert data[local_offset(data, b"a.memmap") :].startswith(b"PK\x03\x04")
    assert data[central_offset(data, b"a.memmap") :].startswith(b"PK\x01\x02")
