"""Indexed loads of deflated archive entries: inflated only as far as the rows selected.

A ``.tdz`` written by tensordict's ``pack_memmap(..., compression="deflate")`` holds each
leaf as a deflate stream. ``load(..., index=...)`` reads a leaf's rows through
``Store.read_ranges``, which inflates the entry from its start up to the last byte
selected (``tdview/storage/_inflate_ranges.py``), locally and over HTTP (the stored
bytes read by ranges as far as that needs). Every result is compared with tdview's
whole load indexed and with tensordict's ``load_memmap`` indexed; what is inflated and
read is counted (the decompressor's output, the store's reads, the server's bytes).
"""

from __future__ import annotations

import json
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict, pack_memmap

import tdview
import tdview.storage._inflate_ranges as inflating
from tdview.errors import LeafDataError
from tdview.index import Checkpoint
from tdview.storage import ArchiveStore

from ._optional import require_module
from .remote_servers import RangeServer, Request
from .test_indexed_load import same

ROWS = 2048
#: the leaves read by rows and the bytes of one of their rows
ROW_BYTES = {"ids.memmap": 512 * 4, "x.memmap": 3 * 4, "inner/y.memmap": 2 * 2 * 8}


def _tree() -> TensorDict:
    g = torch.Generator().manual_seed(7)
    td = TensorDict(
        ids=torch.randint(0, 16, (ROWS, 512), generator=g, dtype=torch.int32),
        x=torch.randn(ROWS, 3, generator=g),
        inner=TensorDict(
            y=torch.randn(ROWS, 2, 2, generator=g, dtype=torch.float64), batch_size=[ROWS, 2]
        ),
        batch_size=[ROWS],
    )
    td["tag"] = "deflated"
    return td


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deflated")
    _tree().memmap(root / "tree")
    pack_memmap(root / "tree", root / "tree.tdz", compression="deflate")
    corrupt = root / "corrupt.tdz"
    shutil.copy(root / "tree.tdz", corrupt)
    with ArchiveStore(corrupt) as store:
        start = store.payload_offset("ids.memmap")
    with open(corrupt, "r+b") as f:
        f.seek(start)
        f.write(b"\x07")  # the first block: final, of the reserved type 3
    liar = root / "liar"  # its meta.json claims 4 PB of ids
    _tree().memmap(liar)
    meta = json.loads((liar / "meta.json").read_text())
    meta["ids"]["shape"] = [ROWS, 512 * 10**9]
    (liar / "meta.json").write_text(json.dumps(meta))
    pack_memmap(liar, root / "liar.tdz", compression="deflate")
    pack_memmap(liar, root / "liar-stored.tdz")
    return root


@pytest.fixture(scope="module")
def http(saved: Path):
    require_module("aiohttp", "tdview's HTTP reads go through it")
    server = RangeServer(str(saved))
    yield server
    server.stop()


def _reference(saved: Path, index: Any) -> Any:
    """tensordict's load of the folder the archive was packed from, indexed."""
    return TensorDict.load_memmap(saved / "tree")[index]


class _Counted:
    """A decompressor whose output is counted."""

    def __init__(self, inner: Any, counts: list[int]) -> None:
        self._inner, self._counts = inner, counts

    def decompress(self, data: Any, limit: int) -> bytes:
        piece = self._inner.decompress(data, limit)
        self._counts.append(len(piece))
        return piece

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def inflated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of every piece of output the ranged inflation produced."""
    counts: list[int] = []
    real = inflating.decompressor

    def counted(*args: Any) -> Any:
        decomp, start = real(*args)
        return _Counted(decomp, counts), start

    monkeypatch.setattr(inflating, "decompressor", counted)
    return counts


def _counting_reads(ckpt: Checkpoint) -> list[int]:
    """The lengths of the stored bytes the checkpoint's store reads by range from now."""
    reads: list[int] = []
    store = ckpt.store
    real = store.read_into

    def read_into(key: str, offset: int, buf: Any) -> None:
        reads.append(len(memoryview(buf)))
        real(key, offset, buf)

    store.read_into = read_into  # type: ignore[method-assign]
    return reads


INDICES = [
    pytest.param(slice(0, 16), id="first-rows"),
    pytest.param(slice(ROWS - 5, ROWS), id="last-rows"),
    pytest.param(3, id="int"),
    pytest.param(slice(10, 600, 7), id="slice-step"),
    pytest.param(torch.tensor([40, 2, 40, 9]), id="int-tensor"),
    pytest.param(torch.arange(ROWS) < 33, id="bool-tensor"),
    pytest.param((slice(1, 4), ...), id="tuple"),
]


@pytest.mark.parametrize("index", INDICES)
@pytest.mark.parametrize("where", ["local", "http"])
def test_an_indexed_load_of_deflated_entries_is_the_load_indexed(
    saved: Path, request: pytest.FixtureRequest, where: str, index: Any
) -> None:
    path = saved / "tree.tdz"
    url = f"{request.getfixturevalue('http').url}/tree.tdz" if where == "http" else path
    got = tdview.load_memmap(url, index=index)
    same(got, _reference(saved, index))
    with Checkpoint(url) as ckpt:
        same(ckpt.load(index=index), ckpt.load()[index])
        same(ckpt.load("inner", index=index), ckpt.load("inner")[index], "inner")
        two = (slice(1, 400, 3), 1)  # on both batch dims of inner
        same(ckpt.load("inner", index=two), _reference(saved, "inner")[two], "inner")


def test_local_rows_near_the_start_inflate_and_read_a_small_part(
    saved: Path, inflated: list[int]
) -> None:
    index = slice(0, 16)
    with Checkpoint(saved / "tree.tdz") as ckpt:
        reads = _counting_reads(ckpt)
        got = ckpt.load(index=index)
        stored = sum(ckpt.store.entry(key).stored_size for key in ROW_BYTES)
    same(got, _reference(saved, index))
    # each leaf inflated exactly up to the end of row 15, nothing past it
    assert sum(inflated) == sum(16 * row for row in ROW_BYTES.values()), inflated
    assert sum(reads) < stored / 10, (sum(reads), stored)


def test_the_prefetcher_leaves_the_rows_read_by_range_alone(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``num_threads``, the compressed entries read by rows are not decompressed
    whole as well (the prefetcher takes the others)."""
    whole: list[str] = []
    real = ArchiveStore.decompress

    def decompress(self: ArchiveStore, key: str, *args: Any) -> Any:
        whole.append(key)
        return real(self, key, *args)

    monkeypatch.setattr(ArchiveStore, "decompress", decompress)
    got = tdview.load_memmap(saved / "tree.tdz", index=slice(5, 9), num_threads=3)
    same(got, _reference(saved, slice(5, 9)))
    assert not set(whole) & set(ROW_BYTES), whole


def test_local_rows_at_the_end_inflate_the_whole_entries(saved: Path, inflated: list[int]) -> None:
    index = slice(ROWS - 2, ROWS)
    with Checkpoint(saved / "tree.tdz") as ckpt:
        got = ckpt.load(index=index)
    same(got, _reference(saved, index))
    assert sum(inflated) == sum(ROWS * row for row in ROW_BYTES.values())


def inflation_needs(archive: Path, key: str, end: int) -> int:
    """The stored bytes zlib consumes to produce the first ``end`` bytes of entry ``key``
    of ``archive`` (to 1 KiB): what any inflation up to ``end`` must read."""
    with ArchiveStore(archive) as store:
        raw = bytes(store.raw_payload(key))
    decomp, produced, fed = zlib.decompressobj(-15), 0, 0
    while produced < end:
        produced += len(decomp.decompress(raw[fed : fed + 1024], end - produced))
        fed = min(len(raw), fed + 1024) - len(decomp.unconsumed_tail)
        assert not decomp.unconsumed_tail or produced == end
    return fed


def _payload_served(saved: Path, log: list[Request]) -> int:
    """The bytes served from inside the leaves' stored payloads."""
    with ArchiveStore(saved / "tree.tdz") as store:
        spans = []
        for key in ROW_BYTES:
            start = store.payload_offset(key)
            spans.append((start, start + store.entry(key).stored_size))
    served = 0
    for r in log:
        span = r.span()
        if span is not None:
            served += sum(max(0, min(span[1], b) - max(span[0], a)) for a, b in spans)
    return served


@pytest.mark.parametrize("rows", [16, 700])
def test_http_rows_near_the_start_fetch_only_what_inflation_needs(
    http: RangeServer, saved: Path, rows: int
) -> None:
    index = slice(0, rows)
    with Checkpoint(f"{http.url}/tree.tdz") as ckpt:
        ckpt.load(device="meta")  # the metadata and local headers
        http.take()
        got = ckpt.load(index=index)
        log = http.take()
        stored = sum(ckpt.store.entry(key).stored_size for key in ROW_BYTES)
    same(got, _reference(saved, index))
    archive = saved / "tree.tdz"
    needed = sum(inflation_needs(archive, key, rows * row) for key, row in ROW_BYTES.items())
    served = _payload_served(saved, log)
    assert needed <= served <= 1.05 * needed + len(ROW_BYTES) * (4 << 10), (served, needed)
    assert served < stored * (0.1 if rows == 16 else 0.5), (served, stored)
    # besides, only each leaf's local header (30 bytes and its name)
    assert sum(r.sent for r in log) - served <= len(ROW_BYTES) * 64


def test_http_rows_at_the_end_read_the_whole_entries_once(http: RangeServer, saved: Path) -> None:
    index = slice(ROWS - 3, ROWS)
    with Checkpoint(f"{http.url}/tree.tdz") as ckpt:
        ckpt.load(device="meta")
        http.take()
        got = ckpt.load(index=index)
        log = http.take()
        stored = sum(ckpt.store.entry(key).stored_size for key in ROW_BYTES)
    same(got, _reference(saved, index))
    assert _payload_served(saved, log) == stored


@pytest.mark.parametrize("where", ["local", "http"])
def test_a_corrupt_deflate_stream_names_the_archive_and_the_entry(
    saved: Path, request: pytest.FixtureRequest, where: str
) -> None:
    path = saved / "corrupt.tdz"
    url = f"{request.getfixturevalue('http').url}/corrupt.tdz" if where == "http" else path
    with pytest.raises(LeafDataError, match="corrupt compressed data") as caught:
        tdview.load_memmap(url, index=slice(0, 4))
    assert "'ids.memmap'" in str(caught.value) and "corrupt.tdz" in str(caught.value)
    # the other entries are sound: their rows load
    same(
        tdview.load_memmap(url, subpath="inner", index=slice(0, 4)), _reference(saved, "inner")[0:4]
    )


@pytest.mark.parametrize(
    "method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["zip", "bz2", "xz"]
)
@pytest.mark.parametrize("where", ["local", "http"])
def test_entries_compressed_by_zipfile_load_their_rows(
    saved: Path, request: pytest.FixtureRequest, where: str, method: int, inflated: list[int]
) -> None:
    """An archive zipped by Python's zipfile (deflate, bzip2, lzma): the rows are those
    of tensordict's load, and rows near the start inflate only that far."""
    name = f"zipped-{method}.tdz"
    path = saved / name
    if not path.exists():
        with zipfile.ZipFile(path, "w") as zf:
            for file in sorted((saved / "tree").rglob("*")):
                if file.is_file():
                    arcname = file.relative_to(saved / "tree").as_posix()
                    zf.write(file, arcname, compress_type=method)
    url = f"{request.getfixturevalue('http').url}/{name}" if where == "http" else path
    same(tdview.load_memmap(url, index=slice(0, 3)), _reference(saved, slice(0, 3)))
    assert sum(inflated) == sum(3 * row for row in ROW_BYTES.values())
    for index in (slice(ROWS - 3, ROWS), torch.tensor([1000, 7])):
        same(tdview.load_memmap(url, index=index), _reference(saved, index))


@pytest.mark.parametrize(
    ("where", "name"), [("local", "liar.tdz"), ("http", "liar.tdz"), ("http", "liar-stored.tdz")]
)
def test_a_leaf_larger_than_its_entry_is_refused_before_a_buffer_is_made(
    saved: Path, request: pytest.FixtureRequest, where: str, name: str
) -> None:
    """meta.json claims 4 PB of rows: no buffer of that size is made (a MemoryError);
    the entry's size is the error, as a load without index says it."""
    url = f"{request.getfixturevalue('http').url}/{name}" if where == "http" else saved / name
    with pytest.raises(LeafDataError, match=r"ids\.memmap holds \d+ bytes, but the leaf needs"):
        tdview.load_memmap(url, index=slice(0, 2))


def _deflated(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


def _reader(raw: bytes, reads: list[int] | None = None) -> Any:
    def read(at: int, buf: memoryview) -> None:
        buf[:] = raw[at : at + len(buf)]
        if reads is not None:
            reads.append(len(buf))

    return read


def test_inflate_ranges_copies_any_spans_and_checks_a_whole_entry() -> None:
    data = torch.randint(0, 4, (300_000,), generator=torch.Generator().manual_seed(1))
    content = data.to(torch.uint8).numpy().tobytes()
    raw = _deflated(content)
    entry = (8, 0, len(raw), len(content), zlib.crc32(content))
    spans = [(9000, 9100), (5, 7), (9050, 9060), (0, 0), (100, 5000)]
    dest = bytearray(sum(b - a for a, b in spans))
    reads: list[int] = []
    fed = inflating.inflate_ranges(entry, _reader(raw, reads), spans, memoryview(dest), "e")
    assert bytes(dest) == b"".join(content[a:b] for a, b in spans)
    assert fed == sum(reads) < len(raw) / 4
    whole = bytearray(len(content))
    spans = [(0, len(content))]
    inflating.inflate_ranges(entry, _reader(raw), spans, memoryview(whole), "e")
    assert bytes(whole) == content
    wrong_crc = (*entry[:4], entry[4] ^ 1)
    inflating.inflate_ranges(wrong_crc, _reader(raw), [(0, 10)], memoryview(bytearray(10)), "e")
    with pytest.raises(LeafDataError, match="CRC-32 mismatch"):
        inflating.inflate_ranges(wrong_crc, _reader(raw), spans, memoryview(whole), "e")
    longer = (8, 0, len(raw), len(content) + 1, entry[4])  # declared one byte more
    with pytest.raises(LeafDataError, match="ended after"):
        inflating.inflate_ranges(
            longer,
            _reader(raw),
            [(0, len(content) + 1)],
            memoryview(bytearray(len(content) + 1)),
            "e",
        )
    shorter = (8, 0, len(raw), len(content) - 1, entry[4])  # declared one byte less
    with pytest.raises(LeafDataError, match="expands beyond"):
        inflating.inflate_ranges(
            shorter, _reader(raw), [(0, len(content) - 1)], memoryview(bytearray(len(content))), "e"
        )
    trailing = raw + b"\0\0"
    padded = (8, 0, len(trailing), len(content), entry[4])
    with pytest.raises(LeafDataError, match="stray bytes"):
        inflating.inflate_ranges(padded, _reader(trailing), spans, memoryview(whole), "e")
