"""Decompressing large entries: output in chunks into one array, CRC-32 checked inline
or on a thread pool (chunks combined), and the output buffer that grows when a declared
size is more than the stored bytes can give."""

from __future__ import annotations

import bz2
import functools
import lzma
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tdview.errors import LeafDataError
from tdview.storage import _codecs
from tdview.storage._codecs import BZIP2, DEFLATE, LZMA, decode
from tdview.storage._crc import crc32_combine

SIZE = 14 << 20  # above _PARALLEL_CRC_MIN: chunks are checked on the pool when given


@functools.cache
def payload(size: int = SIZE) -> bytes:
    """Compressible but not trivial: a ramp with random bytes sprinkled in."""
    ramp = np.arange(size, dtype=np.uint32).astype(np.uint8)
    noise = np.random.default_rng(size).integers(0, 256, len(ramp[::4099]), dtype=np.uint8)
    ramp[::4099] = noise
    return ramp.tobytes()


@functools.cache
def compress(method: int, data: bytes) -> tuple[bytes, int]:
    """``(stored bytes, flags)`` as a zip entry holds them."""
    if method == DEFLATE:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(), 0
    if method == BZIP2:
        return bz2.compress(data), 0
    props = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1})  # type: ignore[attr-defined]
    body = lzma.compress(data, format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1}])
    return bytes([9, 4]) + len(props).to_bytes(2, "little") + props + body, 0x2


@given(st.binary(max_size=600), st.binary(max_size=600))
def test_crc32_combine_matches_zlib(a: bytes, b: bytes) -> None:
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_crc32_combine_of_many_chunks() -> None:
    data = payload(1 << 20)
    crc = 0
    for start in range(0, len(data), 65_537):
        chunk = data[start : start + 65_537]
        crc = crc32_combine(crc, zlib.crc32(chunk), len(chunk))
    assert crc == zlib.crc32(data)


@pytest.mark.parametrize("method", [DEFLATE, BZIP2, LZMA])
@pytest.mark.parametrize("threads", [0, 1, 2])
def test_large_entry_decodes_exactly(method: int, threads: int) -> None:
    """Many output chunks; with a pool the chunk CRCs are combined (with one thread the
    decoder runs on it and checks every chunk itself instead of waiting for itself)."""
    data = payload()
    stored, flags = compress(method, data)
    if not threads:
        out = decode(method, flags, memoryview(stored), len(data), zlib.crc32(data), "entry")
    else:
        with ThreadPoolExecutor(threads) as pool:
            future = pool.submit(
                decode,
                method,
                flags,
                memoryview(stored),
                len(data),
                zlib.crc32(data),
                "entry",
                pool,
            )
            out = future.result(timeout=120)
    assert out.dtype == np.uint8 and out.flags.writeable and len(out) == len(data)
    assert out.tobytes() == data


@pytest.mark.parametrize("threads", [0, 2])
def test_large_entry_crc_mismatch(threads: int) -> None:
    data = payload()
    stored, flags = compress(DEFLATE, data)
    pool = ThreadPoolExecutor(threads) if threads else None
    try:
        with pytest.raises(LeafDataError, match="CRC-32 mismatch"):
            decode(
                DEFLATE,
                flags,
                memoryview(stored),
                len(data),
                zlib.crc32(data) ^ 1,
                "entry 'big.memmap'",
                pool,
            )
    finally:
        if pool is not None:
            pool.shutdown()


@pytest.mark.parametrize("method", [DEFLATE, BZIP2, LZMA])
def test_output_grows_past_a_small_first_allocation(method: int, monkeypatch) -> None:
    monkeypatch.setattr(_codecs, "_capacity", lambda method, stored, size: 1000)
    data = payload()
    stored, flags = compress(method, data)
    out = decode(method, flags, memoryview(stored), len(data), zlib.crc32(data), "entry")
    assert out.tobytes() == data


def test_false_declared_size_allocates_only_what_deflate_can_give() -> None:
    """A 1 TiB declared size for 9 stored bytes: the data's real size in the error, no
    terabyte allocated (deflate cannot expand beyond 1032:1)."""
    stored, flags = compress(DEFLATE, b"abc")
    with pytest.raises(
        LeafDataError,
        match=r"decompresses to 3 bytes, but its declared size "
        r"is 1099511627776",
    ):
        decode(DEFLATE, flags, memoryview(stored), 1 << 40, zlib.crc32(b"abc"), "entry")
    assert _codecs._capacity(DEFLATE, len(stored), 1 << 40) < 1 << 20


def test_zero_output_stream_ends() -> None:
    """A stream of an empty file (end marker only) with a declared size of 0."""
    stored, flags = compress(DEFLATE, b"")
    out = decode(DEFLATE, flags, memoryview(stored), 0, 0, "entry")
    assert len(out) == 0
