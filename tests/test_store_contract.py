"""One contract for every store (in the manner of zarr's ``StoreTests``): the same
checkpoint, written by tensordict as a folder (``TensorDict.memmap``) and as an archive
(``TensorDict.save(".tdz")``; ``pack_memmap`` for a compressed one), read through the
four stores, each asked the same questions with the same answers expected.

The four kinds: a local directory (:class:`~tdview.storage.DirectoryStore`), a local
archive (:class:`~tdview.storage.ArchiveStore`), a remote archive over HTTP (our range
server) and a remote folder on S3 (moto's server). Each server is started once for the
session (:mod:`tests.remote_servers`), not per test.

What a store says of itself is the only thing that differs: whether its files are
entries of an archive, and whether they can be mapped (:data:`KINDS`).
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, pack_memmap

import tdview
from tdview.errors import UnsafeCheckpointError
from tdview.storage import Payload, Store, open_store

from .remote_servers import LoggedMotoServer, RangeServer

#: store kind -> (Store.kind, its payloads are archive entries, they can be mapped)
KINDS = {
    "directory": ("directory", False, True),
    "archive": ("archive", True, True),
    "remote-directory": ("directory", False, False),
    "remote-archive": ("archive", True, False),
}
BUCKET = "store-contract"


def _checkpoint() -> TensorDict:
    g = torch.Generator().manual_seed(19)
    td = TensorDict(
        w=torch.randn(6, 5, generator=g),
        ids=torch.arange(37),
        mask=torch.rand(11, generator=g) > 0.5,
        half=torch.randn(9, generator=g).to(torch.bfloat16),
        step=torch.tensor(7),
        empty=torch.zeros(0, 3),
        nested=TensorDict(b=torch.randn(4, 3, generator=g), c=torch.arange(5, dtype=torch.int16)),
        batch_size=[],
    )
    td["note"] = "not a tensor"
    return td


def _leaves() -> dict[str, torch.Tensor]:
    """Store key of each tensor leaf's file -> the tensor (an empty one has no file)."""
    return {
        "/".join((key,) if isinstance(key, str) else key) + ".memmap": value
        for key, value in _checkpoint().items(include_nested=True, leaves_only=True)
        if isinstance(value, torch.Tensor) and value.numel()
    }


def _bytes(tensor: torch.Tensor) -> bytes:
    return tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.fixture(scope="session")
def contract_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store-contract")
    td = _checkpoint()
    td.memmap(root / "ckpt")
    td.save(root / "ckpt.tdz")
    pack_memmap(root / "ckpt", root / "ckpt-deflate.tdz", compression="deflate")
    return root


@pytest.fixture(scope="session")
def contract_http(contract_root: Path) -> Iterator[RangeServer]:
    pytest.importorskip("aiohttp")
    server = RangeServer(str(contract_root))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def contract_s3(contract_root: Path) -> Iterator[dict]:
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    import boto3
    import s3fs

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = LoggedMotoServer()
    options = {
        "key": "testing",
        "secret": "testing",
        "skip_instance_cache": True,
        "client_kwargs": {"endpoint_url": server.endpoint, "region_name": "us-east-1"},
    }
    boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    s3fs.S3FileSystem(**options).put(str(contract_root / "ckpt"), f"{BUCKET}/ckpt", recursive=True)
    yield options
    server.stop()


def _open(request: pytest.FixtureRequest, kind: str, archive: str = "ckpt.tdz") -> Store:
    root: Path = request.getfixturevalue("contract_root")
    if kind == "directory":
        return open_store(root / "ckpt")
    if kind == "archive":
        return open_store(root / archive)
    if kind == "remote-archive":
        server: RangeServer = request.getfixturevalue("contract_http")
        return open_store(f"{server.url}/{archive}")
    options = request.getfixturevalue("contract_s3")
    return open_store(tdview.remote(f"s3://{BUCKET}/ckpt", **options))


@pytest.fixture(params=list(KINDS))
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    with _open(request, request.param) as opened:
        opened.contract_kind = request.param  # type: ignore[attr-defined]
        yield opened


@pytest.fixture(params=["archive", "remote-archive"])
def deflated(request: pytest.FixtureRequest) -> Iterator[Store]:
    with _open(request, request.param, "ckpt-deflate.tdz") as opened:
        opened.contract_kind = request.param  # type: ignore[attr-defined]
        yield opened


def _where(store: Store, payload: Payload, root: Path) -> bytes:
    """The stored bytes where the payload says they are (in the local copy of what a
    remote store serves)."""
    if payload.in_archive:
        name = "ckpt.tdz" if "deflate" not in store.root else "ckpt-deflate.tdz"
        path = root / name
    else:
        path = Path(payload.file) if payload.file is not None else root / "ckpt" / payload.key
    assert payload.offset is not None
    with open(path, "rb") as f:
        f.seek(payload.offset)
        return f.read(payload.stored_size)


# -- what a store says of itself ------------------------------------------------------------


def test_kind_and_mappable(store: Store) -> None:
    kind, _, mappable = KINDS[store.contract_kind]  # type: ignore[attr-defined]
    assert store.kind == kind
    assert store.mappable is mappable


# -- payloads of leaves ---------------------------------------------------------------------


@pytest.mark.parametrize("key", list(_leaves()))
def test_leaf_payload(store: Store, key: str, contract_root: Path) -> None:
    _, in_archive, mappable = KINDS[store.contract_kind]  # type: ignore[attr-defined]
    tensor = _leaves()[key]
    payload = store.locate(key)
    assert isinstance(payload, Payload)
    assert payload.key == key
    assert payload.display == store.display(key)
    assert payload.size == tensor.numel() * tensor.element_size()
    assert payload.stored_size == payload.size
    assert payload.compression == "stored"
    assert payload.as_stored and not payload.encrypted
    assert payload.in_archive is in_archive
    assert payload.mappable is mappable
    assert payload.error is None and payload.link is None
    assert payload.offset is not None
    if in_archive:
        assert payload.file is None
        assert payload.crc32 == zlib.crc32(_bytes(tensor))
    else:
        assert payload.offset == 0 and payload.crc32 is None
        assert (payload.file is not None) is mappable  # a local file has a path
    assert _where(store, payload, contract_root) == _bytes(tensor)


def test_payload_agrees_with_entry(store: Store) -> None:
    for key in [*_leaves(), "meta.json", "nested/meta.json"]:
        payload, entry = store.locate(key), store.entry(key)
        assert (payload.size, payload.stored_size) == (entry.size, entry.stored_size), key
        assert (payload.compression, payload.crc32) == (entry.compression, entry.crc32), key
        assert (payload.display, payload.file) == (entry.display, entry.file), key
        assert payload.encrypted is entry.encrypted, key


def test_meta_payload_is_its_bytes(store: Store) -> None:
    data = store.read_bytes("meta.json", 1 << 20)
    payload = store.locate("meta.json")
    assert payload.size == len(data) and payload.as_stored


def test_payload_is_frozen(store: Store) -> None:
    payload = store.locate("w.memmap")
    with pytest.raises(dataclasses.FrozenInstanceError):
        payload.size = 0  # type: ignore[misc]
    assert payload == store.locate("w.memmap")


def test_locating_reads_no_payload_byte(store: Store) -> None:
    """Once its folders are known (listed, or the central directory read), a remote
    store locates a file reading at most the local header of an archive entry: never
    the bytes of a leaf."""
    assert all(store.is_file(key) for key in _leaves())  # lists the folders
    transport = getattr(store, "transport", None)
    before = transport.bytes_read if transport is not None else 0
    for key in _leaves():
        store.locate(key)
    if transport is not None:
        in_archive = KINDS[store.contract_kind][1]  # type: ignore[attr-defined]
        headers = sum(30 + len(key.encode()) for key in _leaves()) if in_archive else 0
        assert transport.bytes_read - before <= headers


# -- keys that are no file ------------------------------------------------------------------


def test_missing_key_raises_file_not_found_naming_it(store: Store) -> None:
    for key in ("nope.memmap", "nested/nope.memmap", "absent/x.memmap"):
        with pytest.raises(FileNotFoundError, match=key.replace(".", r"\.")):
            store.locate(key)


def test_empty_leaf_has_no_payload(store: Store) -> None:
    """tensordict writes no file for an empty tensor: its key is missing in every store."""
    with pytest.raises(FileNotFoundError, match=r"empty\.memmap"):
        store.locate("empty.memmap")


def test_directory_key_is_no_payload(store: Store) -> None:
    with pytest.raises(IsADirectoryError, match="nested"):
        store.locate("nested")


@pytest.mark.parametrize("key", ["../x.memmap", "/etc/passwd", "nested/../w.memmap", "a//b"])
def test_unsafe_key_is_refused(store: Store, key: str) -> None:
    with pytest.raises(UnsafeCheckpointError):
        store.locate(key)


def test_key_must_be_a_string(store: Store) -> None:
    with pytest.raises(TypeError):
        store.locate(b"w.memmap")  # type: ignore[arg-type]


# -- compressed archives (pack_memmap) --------------------------------------------------------


@pytest.mark.parametrize("key", list(_leaves()))
def test_compressed_payload(deflated: Store, key: str, contract_root: Path) -> None:
    tensor = _leaves()[key]
    payload = deflated.locate(key)
    assert payload.size == tensor.numel() * tensor.element_size()
    assert payload.in_archive and payload.file is None and payload.offset is not None
    assert payload.crc32 == zlib.crc32(_bytes(tensor))
    if payload.compression == "stored":  # pack_memmap stores what deflate would not shrink
        assert payload.as_stored and payload.stored_size == payload.size
        assert payload.mappable is deflated.mappable
        assert _where(deflated, payload, contract_root) == _bytes(tensor)
    else:
        assert payload.compression == "deflate"
        assert not payload.as_stored and not payload.mappable
        data = _where(deflated, payload, contract_root)
        assert zlib.decompress(data, -15) == _bytes(tensor)
