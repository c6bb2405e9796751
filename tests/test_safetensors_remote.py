"""safetensors over fsspec: a file and a shard set over HTTP (our range server) and S3
(moto's server). The tree costs two ranged reads per file, none of a payload byte; loads
equal ``load_file``. Counts come from the servers' request logs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import tdview
from tdview.index import Checkpoint, walk

from ._optional import require_module
from .remote_servers import RangeServer, start_s3
from .test_safetensors import assert_same, dotted, model_state
from .test_safetensors_shards import reference, write_shards

require_module("aiohttp", "tdview's HTTP reads go through it")
BUCKET = "safetensors"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("served")
    save_file(model_state(), root / "model.safetensors", metadata={"format": "pt"})
    write_shards(root / "sharded", model_state())
    return root


@pytest.fixture(scope="module")
def http(served: Path) -> Iterator[RangeServer]:
    server = RangeServer(str(served))
    yield server
    server.stop()


def _header_end(path: Path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def test_http_tree_is_two_ranged_reads(http: RangeServer, served: Path) -> None:
    http.take()
    with Checkpoint(f"{http.url}/model.safetensors") as ckpt:
        leaves = {".".join(n.path) for n in walk(ckpt, ckpt.root) if n.is_leaf}
        assert ckpt.store.metadata == {"format": "pt"}
    log = http.take()
    assert [r.range for r in log] == [
        "bytes=0-7",
        f"bytes=8-{_header_end(served / 'model.safetensors') - 1}",
    ]
    with safe_open(served / "model.safetensors", "pt") as f:
        assert leaves == set(f.keys())


def test_http_load_equals_load_file(http: RangeServer, served: Path) -> None:
    with Checkpoint(f"{http.url}/model.safetensors") as ckpt:
        assert not ckpt.store.mappable
        td = ckpt.load()
        layer = ckpt.load(subpath="model/layers/3")
        http.take()
        leaf = ckpt.load_leaf("model/embed/weight")
    want = load_file(served / "model.safetensors")
    assert_same(dotted(td), want)
    assert_same(
        dotted(layer),
        {
            k[len("model.layers.3.") :]: v
            for k, v in want.items()
            if k.startswith("model.layers.3.")
        },
    )
    assert_same({"w": leaf}, {"w": want["model.embed.weight"]})
    (read,) = http.take()  # one read: that tensor's bytes
    with safe_open(served / "model.safetensors", "pt") as f:
        nbytes = f.get_tensor("model.embed.weight").nbytes
    assert read.sent == nbytes


def test_http_shard_set(http: RangeServer, served: Path) -> None:
    http.take()
    url = f"{http.url}/sharded/model.safetensors.index.json"
    with Checkpoint(url) as ckpt:
        leaves = {".".join(n.path) for n in walk(ckpt, ckpt.root) if n.is_leaf}
        log = http.take()
        td = ckpt.load()
    assert leaves == set(model_state())
    # the index, then two reads per shard
    assert len(log) == 1 + 2 * 3
    assert_same(dotted(td), reference(served / "sharded"))


def test_s3_file_and_shard_set(served: Path) -> None:
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3(BUCKET)
    try:
        fs = s3fs.S3FileSystem(**options)
        fs.put(str(served / "model.safetensors"), f"{BUCKET}/model.safetensors")
        fs.put(str(served / "sharded"), f"{BUCKET}/sharded", recursive=True)
        with Checkpoint(tdview.remote(f"s3://{BUCKET}/model.safetensors", **options)) as ckpt:
            assert_same(dotted(ckpt.load()), load_file(served / "model.safetensors"))
        index = f"s3://{BUCKET}/sharded/model.safetensors.index.json"
        with Checkpoint(tdview.remote(index, **options)) as ckpt:
            assert_same(
                dotted(ckpt.load(subpath="model")),
                {
                    k[len("model.") :]: v
                    for k, v in reference(served / "sharded").items()
                    if k.startswith("model.")
                },
            )
    finally:
        server.stop()
