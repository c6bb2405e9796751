"""The one CRC-32 helper of tdview: the fastest library installed, zlib's results."""

from __future__ import annotations

import sys
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tdview.storage import CRC32_LIBRARY, _crc, crc32


@given(st.binary(max_size=5000), st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs(data: bytes, start: int) -> None:
    assert crc32(data, start) == zlib.crc32(data, start)
    assert crc32(memoryview(data)) == zlib.crc32(data)


def test_the_fastest_wheel_installed_runs() -> None:
    # the test extras install isal (CI); zlib only where no wheel imports
    try:
        import isal  # noqa: F401

        assert CRC32_LIBRARY == "isal"
    except ImportError:
        assert CRC32_LIBRARY in ("zlib-ng", "zlib")


def test_without_the_wheels_zlib_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "isal", None)  # import isal raises ImportError
    monkeypatch.setitem(sys.modules, "zlib_ng", None)
    name, function = _crc._fastest()
    assert name == "zlib" and function is zlib.crc32


def test_a_large_buffer_in_chunks_is_zlibs() -> None:
    data = bytes(range(256)) * 40_000  # 10 MB
    crc = 0
    for at in range(0, len(data), 1 << 20):
        crc = crc32(memoryview(data)[at : at + (1 << 20)], crc)
    assert crc == zlib.crc32(data)


def test_deflate_is_inflated_by_isal_with_zlibs_results() -> None:
    from tdview.storage import INFLATE_LIBRARY
    from tdview.storage._codecs import DEFLATE, decode

    try:
        import isal  # noqa: F401

        assert INFLATE_LIBRARY == "isal"
    except ImportError:
        assert INFLATE_LIBRARY == "zlib"
    data = bytes(range(256)) * 30_000 + bytes(4099)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    stored = packer.compress(data) + packer.flush()
    out = decode(DEFLATE, 0, memoryview(stored), len(data), zlib.crc32(data), "entry 'x'")
    assert out.tobytes() == data == zlib.decompress(stored, -15)


def test_without_isal_zlib_inflates(monkeypatch: pytest.MonkeyPatch) -> None:
    from tdview.storage import _codecs

    monkeypatch.setitem(sys.modules, "isal", None)
    name, make, error = _codecs._raw_inflate()
    assert (name, error) == ("zlib", zlib.error)
    assert make().decompress(zlib.compress(b"abc")[2:-4]) == b"abc"
