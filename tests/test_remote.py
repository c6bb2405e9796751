"""Remote checkpoints: archives over HTTP (our range server), archives and folders on S3
(moto's server), fsspec URLs, errors of misbehaving servers, caching.

Every count of requests and bytes comes from the servers' request logs
(:mod:`tests.remote_servers`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import MemoryMappedTensor, TensorDict, TensorDictBase, pack_memmap

import tdview
from tdview.errors import RemoteModeError, RemoteReadError
from tdview.storage import ArchiveStore, open_store

from ._optional import require_module
from .remote_servers import LoggedMotoServer, RangeServer, Request, start_s3

require_module("aiohttp", "tdview's HTTP reads go through it")


def _tree() -> TensorDict:
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    layer0 = TensorDict(w=randn(64, 32), b=randn(32), **{f"x{i}": randn(100) for i in range(5)})
    td = TensorDict(
        model=TensorDict(layer0=layer0, layer1=TensorDict(w=randn(16, 8), b=randn(8))),
        step=torch.tensor(7),
        mask=torch.rand(50, generator=g) > 0.5,
        half=randn(10).to(torch.bfloat16),
        ids=torch.arange(1000),
        empty=torch.zeros(0, 3),
        batch_size=[],
    )
    td["note"] = "hello"
    return td


def _wide() -> TensorDict:
    """1,200 small leaves in 120 folders: a central directory above 64 KiB."""
    return TensorDict(
        {
            f"group{i:03d}": TensorDict(
                {f"leaf{j}": torch.full((4,), float(i * 10 + j)) for j in range(10)}
            )
            for i in range(120)
        }
    )


@pytest.fixture(scope="session")
def remote_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("remote")
    td = _tree()
    td.memmap(root / "tree")
    td.save(root / "tree.tdz")
    pack_memmap(root / "tree", root / "tree-deflate.tdz", compression="deflate")
    _wide().save(root / "wide.tdz")
    # the same archive after 256 MiB of prepended zeros (a sparse file): what a server
    # that ignores Range would send whole
    with open(root / "big.tdz", "wb") as f:
        f.truncate(256 << 20)
        f.seek(256 << 20)
        f.write((root / "wide.tdz").read_bytes())
    return root


@pytest.fixture(scope="session")
def http_server(remote_root: Path):
    """Our range-capable HTTP server (tests/remote_servers.RangeServer) on loopback."""
    server = RangeServer(str(remote_root))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3(remote_root: Path):
    """moto's S3 server (ThreadedMotoServer, port 0), with the checkpoints uploaded."""
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")

    server, options = start_s3("ckpts")
    fs = s3fs.S3FileSystem(**options)
    for name in ("tree.tdz", "tree-deflate.tdz", "wide.tdz"):
        fs.put(str(remote_root / name), f"ckpts/{name}")
    fs.put(str(remote_root / "tree"), "ckpts/tree", recursive=True)
    server.take()
    yield server, options
    server.stop()


def _payload_spans(path: Path) -> dict[str, tuple[int, int]]:
    """Where each ``.memmap`` entry's payload lies in a local archive."""
    with ArchiveStore(path) as store:
        spans = {}
        for key in store.keys():
            if key.endswith(".memmap"):
                start = store.payload_offset(key)
                spans[key] = (start, start + store.entry(key).stored_size)
        return spans


def _read_spans(log: list[Request]) -> list[tuple[int, int]]:
    return [span for r in log if (span := r.span()) is not None]


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _same(got: Any, ref: Any, where: str = "<root>", *, directory: bool) -> None:
    """Same classes, keys, batch sizes, dtypes, shapes and values; remote leaves are in
    memory (a MemoryMappedTensor without a file for a folder)."""
    assert type(got) is type(ref), where
    if isinstance(ref, torch.Tensor):
        assert got.dtype == ref.dtype and got.shape == ref.shape, where
        assert torch.equal(
            got.view(torch.uint8) if got.dtype == torch.bool else got,
            ref.view(torch.uint8) if ref.dtype == torch.bool else ref,
        ), where
        if isinstance(ref, MemoryMappedTensor):
            with pytest.raises(RuntimeError, match="no file"):
                _ = got.filename
        return
    if isinstance(ref, TensorDictBase):
        assert list(got.keys()) == list(ref.keys()), where
        assert got.batch_size == ref.batch_size, where
        if not directory or got._memmap_prefix is None:
            assert getattr(got, "_memmap_prefix", None) is None, where
        for key in ref.keys():
            _same(
                got._get_str(key, None),
                ref._get_str(key, None),
                f"{where}/{key}",
                directory=directory,
            )
        return
    assert got.data == ref.data, where


# -- HTTP: archives -------------------------------------------------------------------------


def test_http_browse_reads_no_payload_byte(http_server: RangeServer, remote_root: Path) -> None:
    url = f"{http_server.url}/wide.tdz"
    http_server.take()
    with tdview.Checkpoint(url) as ckpt:
        keys = [n.key for n in ckpt.children()]
        assert keys == [f"group{i:03d}" for i in range(120)]
        assert [n.key for n in ckpt.children(("group007",))] == [f"leaf{j}" for j in range(10)]
        assert ckpt.node(("group119", "leaf9")).record.shape == (4,)
        transport = ckpt.store.transport
    log = http_server.take()
    assert log[0].range == "bytes=-65536"
    spans = _payload_spans(remote_root / "wide.tdz")
    for span in _read_spans(log):
        assert not any(_overlap(span, p) for p in spans.values()), span
    size = os.path.getsize(remote_root / "wide.tdz")
    # the suffix, the rest of the central directory, then every meta.json in one batch
    assert transport.batches <= 3, transport.batches
    sent = sum(r.sent for r in log)
    assert sent == transport.bytes_read < size


def test_http_load_matches_local(http_server: RangeServer, remote_root: Path) -> None:
    ref = tdview.load_memmap(remote_root / "tree.tdz")
    for name in ("tree.tdz", "tree-deflate.tdz"):
        got = tdview.load_memmap(f"{http_server.url}/{name}")
        _same(got, ref, directory=False)
    assert type(got["model", "layer0", "w"]) is torch.Tensor


def test_http_subpath_reads_only_the_subtree(http_server: RangeServer, remote_root: Path) -> None:
    url = f"{http_server.url}/tree.tdz"
    ckpt = tdview.Checkpoint(url)
    ckpt.children()
    http_server.take()
    got = ckpt.load("model/layer0")
    ref = tdview.load_memmap(remote_root / "tree.tdz", subpath="model/layer0")
    _same(got, ref, directory=False)
    spans = _payload_spans(remote_root / "tree.tdz")
    mine = {k: s for k, s in spans.items() if k.startswith("model/layer0/")}
    assert len(mine) == 7
    payload = sum(b - a for a, b in mine.values())
    read = _read_spans(http_server.take())
    assert sum(b - a for a, b in read) <= 1.05 * payload + 4096
    others = [s for k, s in spans.items() if k not in mine]
    for span in read:
        assert not any(_overlap(span, p) for p in others), span
    ckpt.close()


def test_remote_refuses_r_plus(http_server: RangeServer) -> None:
    with pytest.raises(RemoteModeError, match="mode='r\\+'.*remote checkpoint"):
        tdview.load_memmap(f"{http_server.url}/tree.tdz", mode="r+")


def test_progress_and_cancel(http_server: RangeServer) -> None:
    seen: list[tuple[str, ...]] = []
    ckpt = tdview.Checkpoint(f"{http_server.url}/tree.tdz")
    ckpt.load(progress=seen.append)
    assert ("model", "layer0", "w") in seen and len(seen) == len(set(seen)) >= 10

    class Stop(Exception):
        pass

    def stop(path: tuple[str, ...]) -> None:
        raise Stop

    with pytest.raises(Stop):
        ckpt.load(progress=stop)
    ckpt.close()


@pytest.mark.parametrize(
    "mode, message",
    [
        ("ignore-range", "ignored the Range header"),
        ("short", "short read"),
        ("wrong-range", "bytes other than those asked for"),
    ],
)
def test_misbehaving_server_is_refused(
    http_server: RangeServer, remote_root: Path, mode: str, message: str
) -> None:
    assert tdview.Checkpoint(f"{http_server.url}/big.tdz").children()  # served well
    http_server.take()
    http_server.behaviour["/big.tdz"] = mode
    try:
        with pytest.raises(RemoteReadError, match=message):
            tdview.load_memmap(f"{http_server.url}/big.tdz")
    finally:
        del http_server.behaviour["/big.tdz"]
    log = http_server.take()
    # refused at the first answer: the client hung up, no whole-file download
    assert len(log) <= 2 and sum(r.sent for r in log) < 64 << 20, log


def test_missing_http_object(http_server: RangeServer) -> None:
    with pytest.raises(FileNotFoundError):
        tdview.Checkpoint(f"{http_server.url}/nothing.tdz")


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec.core

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", refuse)
    with pytest.raises(ImportError, match=r'pip install "tdview\[s3\]"'):
        tdview.Checkpoint("s3://bucket/x.tdz")


def test_cli_tree_takes_a_url(http_server: RangeServer, capsys: pytest.CaptureFixture) -> None:
    from tdview.__main__ import main

    assert main(["tree", f"{http_server.url}/tree.tdz", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    assert "model" in out and "ids" in out


def test_widget_takes_a_url(http_server: RangeServer) -> None:
    view = tdview.TDView(f"{http_server.url}/tree.tdz")
    assert view.error == "" and view.root is not None


# -- file:// and fsspec filesystems -----------------------------------------------------------


def test_file_url_and_filesystem(remote_root: Path) -> None:
    import fsspec

    ref = tdview.load_memmap(remote_root / "tree")
    got = tdview.load_memmap(f"file://{remote_root}/tree")
    _same(got, ref, directory=True)
    assert isinstance(got["ids"], MemoryMappedTensor)
    fs = fsspec.filesystem("file")
    where = tdview.remote(str(remote_root / "tree.tdz"), fs=fs)
    assert where.startswith("file://")
    _same(tdview.load_memmap(where), tdview.load_memmap(remote_root / "tree.tdz"), directory=False)
    with open_store(where) as store:
        assert store.kind == "archive" and not store.mappable


# -- S3 (moto) ----------------------------------------------------------------------------------


def test_s3_archive_and_folder(s3: tuple[LoggedMotoServer, dict], remote_root: Path) -> None:
    server, options = s3
    for name, directory in (("tree.tdz", False), ("tree-deflate.tdz", False), ("tree", True)):
        ref = tdview.load_memmap(remote_root / ("tree" if directory else "tree.tdz"))
        got = tdview.load_memmap(tdview.remote(f"s3://ckpts/{name}", **options))
        _same(got, ref, directory=directory)
        sub = tdview.load_memmap(
            tdview.remote(f"s3://ckpts/{name}", **options), subpath="model/layer0"
        )
        _same(sub, ref["model", "layer0"], directory=directory)
    assert server.take()


def test_s3_folder_browse_lists_each_folder_once(
    s3: tuple[LoggedMotoServer, dict], remote_root: Path
) -> None:
    server, options = s3
    with tdview.Checkpoint(remote_root / "tree") as local:
        top = [n.key for n in local.children()]
        layer = [n.key for n in local.children("model/layer0")]
    server.take()
    with tdview.Checkpoint(tdview.remote("s3://ckpts/tree", **options)) as ckpt:
        assert [n.key for n in ckpt.children()] == top
        assert [n.key for n in ckpt.children("model/layer0")] == layer
        batches = ckpt.store.transport.batches
    log = server.take()
    lists = [r for r in log if "list-type" in r.path or r.path.endswith("?delimiter=%2F")]
    listed = [r.path for r in lists]
    assert len(listed) == len(set(listed))
    assert not any(r.path.endswith(".memmap") for r in log)  # no payload read
    assert batches <= 4


def test_s3_missing_folder_meta(s3: tuple[LoggedMotoServer, dict]) -> None:
    _, options = s3
    with pytest.raises(FileNotFoundError, match="meta.json"):
        tdview.Checkpoint(tdview.remote("s3://ckpts/tree/model/nothing", **options))


# -- caching ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cache", ["blocks", "files"])
def test_cache_is_reused(http_server: RangeServer, tmp_path: Path, cache: str) -> None:
    url = f"{http_server.url}/tree.tdz"
    where = tdview.remote(url, cache=cache, cache_dir=str(tmp_path))
    http_server.take()
    first = tdview.load_memmap(where)
    assert http_server.take()
    again = tdview.load_memmap(tdview.remote(url, cache=cache, cache_dir=str(tmp_path)))
    _same(again, first, directory=False)
    assert http_server.take() == []  # not a GET, nor a HEAD for the size: the cache has it


def test_cached_s3_archive_sends_no_request(
    s3: tuple[LoggedMotoServer, dict], tmp_path: Path
) -> None:
    server, options = s3
    first = tdview.load_memmap(
        tdview.remote("s3://ckpts/tree.tdz", cache="blocks", cache_dir=str(tmp_path), **options)
    )
    assert server.take()
    again = tdview.load_memmap(
        tdview.remote("s3://ckpts/tree.tdz", cache="blocks", cache_dir=str(tmp_path), **options)
    )
    _same(again, first, directory=False)
    assert server.take() == []


def test_cache_that_checks_files_validates_them(
    s3: tuple[LoggedMotoServer, dict], tmp_path: Path
) -> None:
    """A cache of one's own with ``check_files=True`` (here in front of s3fs): its reuse
    costs the requests that check the object against the store, and no read."""
    import fsspec
    import s3fs

    server, options = s3

    def checking() -> Any:
        return fsspec.filesystem(
            "blockcache",
            fs=s3fs.S3FileSystem(**options),
            cache_storage=str(tmp_path),
            check_files=True,
            skip_instance_cache=True,
        )

    first = tdview.load_memmap(tdview.remote("ckpts/tree.tdz", checking()))
    server.take()
    again = tdview.load_memmap(tdview.remote("ckpts/tree.tdz", checking()))
    _same(again, first, directory=False)
    log = server.take()
    # s3fs's info: a HEAD of the object, and a listing of its folder; no byte read
    assert log and all(r.method == "HEAD" or "list-type" in r.path for r in log), log


# -- the store contract, against the local stores ---------------------------------------------


def _keys_and_dirs(store: Any) -> tuple[list[str], list[str]]:
    files, dirs, todo = [], [""], [""]
    while todo:
        d = todo.pop()
        for name in store.list_dir(d):
            key = f"{d}/{name}" if d else name
            if store.is_dir(key):
                dirs.append(key)
                todo.append(key)
            else:
                files.append(key)
    return sorted(files), sorted(dirs)


@pytest.mark.parametrize("name", ["tree", "tree.tdz", "tree-deflate.tdz"])
def test_remote_store_answers_as_the_local_one(remote_root: Path, name: str) -> None:
    from tdview.errors import LimitExceededError

    with open_store(remote_root / name) as local, open_store(f"file://{remote_root}/{name}") as rem:
        assert (rem.kind, rem.mappable, local.mappable) == (local.kind, False, True)
        files, dirs = _keys_and_dirs(local)
        assert _keys_and_dirs(rem) == (files, dirs)
        for key in files:
            assert rem.is_file(key) and not rem.is_dir(key)
            a, b = local.entry(key), rem.entry(key)
            assert (a.size, a.compression) == (b.size, b.compression), key
            if a.size <= 1 << 20:
                assert rem.read_bytes(key, 1 << 20) == local.read_bytes(key, 1 << 20), key
        big = max(files, key=lambda k: local.entry(k).size)
        with pytest.raises(LimitExceededError):
            rem.read_bytes(big, 1)
        with pytest.raises(FileNotFoundError):
            rem.entry("nothing.memmap")
        fetched = rem.fetch({key: None for key in files})  # type: ignore[attr-defined]
        for key in files:
            want = local.read_bytes(key, 1 << 30)
            assert bytes(fetched[key]) == want, key
        assert rem.display("a") != rem.display("") == rem.root


def test_corrupt_bytes_fail_the_crc(http_server: RangeServer, remote_root: Path) -> None:
    from tdview.errors import LeafDataError

    spans = _payload_spans(remote_root / "tree.tdz")
    data = bytearray((remote_root / "tree.tdz").read_bytes())
    start, _ = spans["model/layer0/w.memmap"]
    data[start + 10] ^= 0xFF
    (remote_root / "corrupt.tdz").write_bytes(bytes(data))
    url = f"{http_server.url}/corrupt.tdz"
    with pytest.raises(LeafDataError, match="CRC-32 mismatch"):
        tdview.load_memmap(tdview.remote(url, verify=True), subpath="model/layer0")
    # unchecked by default, as a mapped local load (every read's range and length are)
    assert tdview.load_memmap(url, subpath="model/layer0")["w"].shape == (64, 32)
    # the other leaves are intact
    assert tdview.load_memmap(url, subpath="model/layer1")["w"].shape == (16, 8)


def test_truncated_archive_is_refused(http_server: RangeServer, remote_root: Path) -> None:
    from tdview.errors import NotACheckpointError

    data = (remote_root / "tree.tdz").read_bytes()
    (remote_root / "cut.tdz").write_bytes(data[: len(data) // 2])
    with pytest.raises(NotACheckpointError, match="end-of-central-directory"):
        tdview.Checkpoint(f"{http_server.url}/cut.tdz")


# -- previews read by byte ranges ---------------------------------------------------------------

ROW = 64 * 4  # bytes of a row of the big leaf


@pytest.fixture(scope="session")
def big_leaf(remote_root: Path, s3: tuple[LoggedMotoServer, dict]) -> TensorDict:
    """A 25.6 MB leaf (100,000 rows of 64 float32) in an archive and a folder, on the
    HTTP server's folder and on S3."""
    import s3fs

    server, options = s3
    g = torch.Generator().manual_seed(1)
    td = TensorDict(
        obs=torch.randn(100_000, 64, generator=g),
        cube=torch.randn(2000, 7, 9, generator=g),
        step=torch.tensor(3),
    )
    td.save(remote_root / "big-leaf.tdz")
    td.memmap(remote_root / "big-leaf")
    fs = s3fs.S3FileSystem(**options)
    fs.put(str(remote_root / "big-leaf.tdz"), "ckpts/big-leaf.tdz")
    fs.put(str(remote_root / "big-leaf"), "ckpts/big-leaf", recursive=True)
    server.take()
    return td


def _big_leaf_urls(http_server: RangeServer, s3: tuple[LoggedMotoServer, dict]) -> list:
    server, options = s3
    return [
        (http_server, f"{http_server.url}/big-leaf.tdz"),
        (server, tdview.remote("s3://ckpts/big-leaf.tdz", **options)),
        (server, tdview.remote("s3://ckpts/big-leaf", **options)),
    ]


def test_preview_of_rows_reads_only_those_rows(
    http_server: RangeServer, s3: tuple[LoggedMotoServer, dict], big_leaf: TensorDict
) -> None:
    from tdview.protocol._preview import preview
    from tdview.protocol._selection import parse_index

    want = big_leaf["obs"][50_000:50_020, :50]
    for server, url in _big_leaf_urls(http_server, s3):
        with tdview.Checkpoint(url) as ckpt:
            ckpt.children()
            server.take()
            result, buffers = preview(
                ckpt, ("obs",), 100, index=parse_index("[50000:50020]"), stats=False
            )
            log = server.take()
        got = torch.frombuffer(bytearray(buffers[0]), dtype=torch.float32).view(20, 50)
        assert torch.equal(got, want), url
        assert result["selection"]["index"] == "[50000:50020, 0:64]"
        reads = [r for r in log if r.method == "GET"]
        # the 20 rows in one ranged read (50 of 64 columns shown: the gaps are read
        # through), and for an archive its local header
        assert len(reads) <= 2, (url, log)
        assert sum(r.sent for r in log) <= 20 * ROW + 1024, (url, log)


def test_remote_preview_equals_local(
    http_server: RangeServer,
    s3: tuple[LoggedMotoServer, dict],
    big_leaf: TensorDict,
    remote_root: Path,
) -> None:
    """Selections with steps and trailing dims, the heatmap and the statistics: the same
    reply as the local archive's; the statistics read the leaf in chunks of at most
    8 MiB per request, twice at most (statistics, then the histogram)."""
    from tdview.protocol._preview import preview
    from tdview.protocol._selection import parse_index

    cases = [
        ("obs", "[50000:50020, ::3]", False),
        ("cube", "[5:30:2, 1:, ::2]", False),
        ("obs", "[::1000]", False),
        ("step", "[]", True),
        ("obs", "[7:9]", True),
    ]
    with tdview.Checkpoint(remote_root / "big-leaf.tdz") as local:
        expected = [
            preview(local, (leaf,), 100, index=parse_index(index), stats=stats, heatmap=(8, 8))
            for leaf, index, stats in cases
        ]
    for server, url in _big_leaf_urls(http_server, s3):
        with tdview.Checkpoint(url) as ckpt:
            ckpt.children()
            server.take()
            for (leaf, index, stats), (want, want_buffers) in zip(cases, expected, strict=True):
                got, buffers = preview(
                    ckpt, (leaf,), 100, index=parse_index(index), stats=stats, heatmap=(8, 8)
                )
                log = server.take()
                assert {**got, "path": None} == {**want, "path": None}, (url, leaf, index)
                assert buffers == want_buffers, (url, leaf, index)
                if stats and leaf == "obs":
                    payload = big_leaf["obs"].numel() * 4
                    assert sum(r.sent for r in log) <= 2 * payload + 64 * 1024
                    assert max(r.sent for r in log) <= 8 << 20
