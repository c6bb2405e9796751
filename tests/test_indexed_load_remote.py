"""Remote reading, what issue 36 left: a cached indexed load, the diff of remote stores.

(A preview of a remote leaf reads only its rows: ``test_remote.py::
test_preview_of_rows_reads_only_those_rows`` counts the bytes.) Checkpoints are written by
tensordict; requests are counted on the servers' side (:mod:`tests.remote_servers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict

import tdview

from ._optional import require_module
from .remote_servers import RangeServer, start_s3
from .test_indexed_load import same

ROWS = 2000


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two steps of a run, as archives and folders; ``a`` differs in row 5."""
    root = tmp_path_factory.mktemp("steps")
    for i in range(2):
        td = TensorDict(
            a=torch.arange(ROWS * 4.0).view(ROWS, 4),
            b=torch.linspace(0, 1, ROWS * 16).view(ROWS, 16),
            batch_size=[ROWS],
        )
        td["a"][5] += i
        td.save(root / f"step{i}.tdz")
        td.memmap(root / f"step{i}")
    return root


@pytest.fixture(scope="module")
def http(steps: Path):
    require_module("aiohttp", "tdview's HTTP reads go through it")
    server = RangeServer(str(steps))
    yield server
    server.stop()


@pytest.mark.parametrize("cache", ["blocks", "files"])
def test_a_cached_indexed_load_sends_no_request(
    http: RangeServer, steps: Path, tmp_path: Path, cache: str
) -> None:
    """Rows the cache holds (here, read by an earlier indexed load) are read again
    without a request, and the values are tensordict's."""
    url = f"{http.url}/step0.tdz"
    http.take()
    first = tdview.load_memmap(
        tdview.remote(url, cache=cache, cache_dir=str(tmp_path)), index=slice(0, 1000)
    )
    assert http.take()  # the first load reads through the cache
    again = tdview.load_memmap(
        tdview.remote(url, cache=cache, cache_dir=str(tmp_path)), index=slice(100, 900, 7)
    )
    assert http.take() == []
    ref = TensorDict.load_memmap(steps / "step0")
    same(first, ref[:1000])
    same(again, ref[100:900:7])


def test_the_diff_of_remote_checkpoints_is_the_local_diff(http: RangeServer, steps: Path) -> None:
    for level in ("metadata", "fingerprint", "values"):
        local = tdview.diff(steps / "step0.tdz", steps / "step1.tdz", level=level)
        remote = tdview.diff(f"{http.url}/step0.tdz", f"{http.url}/step1.tdz", level=level)
        rows = [(r.path, r.status) for r in remote]
        assert rows == [(r.path, r.status) for r in local], level
    assert ("a",) in [r.path for r in remote if r.status != "same"]


def test_the_diff_of_an_s3_folder_and_an_http_archive(http: RangeServer, steps: Path) -> None:
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3("diffs")
    try:
        s3fs.S3FileSystem(**options).put(str(steps / "step0"), "diffs/step0", recursive=True)
        folder = tdview.remote("s3://diffs/step0", **options)
        remote = tdview.diff(folder, f"{http.url}/step1.tdz", level="values")
    finally:
        server.stop()
    local = tdview.diff(steps / "step0", steps / "step1.tdz", level="values")
    assert [(r.path, r.status) for r in remote] == [(r.path, r.status) for r in local]
    assert [r.path for r in remote if r.status != "same"] == [("a",)]


def test_a_cached_s3_folder_load_sends_no_request(steps: Path, tmp_path: Path) -> None:
    """A folder's listings are kept beside the block cache: a second load of rows the
    cache holds sends nothing, not even a listing; a kept listing that does not read back
    as one is ignored (the folder is listed again)."""
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3("cached")
    cache = tmp_path / "cache"
    try:
        s3fs.S3FileSystem(**options).put(str(steps / "step0"), "cached/step0", recursive=True)

        def load(index: Any) -> Any:
            where = tdview.remote(
                "s3://cached/step0", cache="blocks", cache_dir=str(cache), **options
            )
            return tdview.load_memmap(where, index=index)

        server.take()
        first = load(slice(0, 1000))
        assert server.take()
        again = load(slice(100, 900, 7))
        assert server.take() == []
        for kept in (cache / "tdview-listings").glob("*.json"):
            kept.write_bytes(b'{"not": "a listing"')
        third = load(slice(0, 10))
        assert any("list-type" in r.path for r in server.take())
    finally:
        server.stop()
    ref = TensorDict.load_memmap(steps / "step0")
    same(first, ref[:1000])
    same(again, ref[100:900:7])
    same(third, ref[:10])


def test_an_s3_folder_of_checkpoints_is_a_collection(steps: Path) -> None:
    """A remote folder without ``meta.json`` that holds checkpoints is browsed as the local
    folder is (the same members, folders and side files); its members load, by rows
    too, as tensordict loads them."""
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3("runs")
    try:
        s3fs.S3FileSystem(**options).put(str(steps), "runs/steps", recursive=True)
        with tdview.Checkpoint(steps) as local:
            expected = [(n.key, n.kind) for n in local.children()]
        with tdview.Checkpoint(tdview.remote("s3://runs/steps", **options)) as folder:
            assert type(folder).__name__ == "Collection"
            assert [(n.key, n.kind) for n in folder.children()] == expected
            rows = folder.load("step0", index=slice(10, 20))
            archive = folder.load("step1.tdz")
            leaf = folder.load_leaf("step1.tdz/a")
    finally:
        server.stop()
    assert ("step0", "checkpoint") in expected and ("step1.tdz", "checkpoint") in expected
    same(rows, TensorDict.load_memmap(steps / "step0")[10:20])
    same(archive, TensorDict.load_memmap(steps / "step1"))
    assert torch.equal(leaf, TensorDict.load_memmap(steps / "step1")["a"])
