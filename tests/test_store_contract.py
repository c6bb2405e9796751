"""One contract for every store (in the manner of zarr's ``StoreTests``): the same
checkpoint, written by tensordict as a folder (``TensorDict.memmap``) and as an archive
(``TensorDict.save(".tdz")``; ``pack_memmap`` for a compressed one), read through the
four stores, each asked the same questions with the same answers expected.

The four kinds: a local directory (:class:`~tdview.storage.DirectoryStore`), a local
archive (:class:`~tdview.storage.ArchiveStore`), a remote archive over HTTP (our range
server) and a remote folder on S3 (moto's server). Each server is started once for the
session (:mod:`tests.remote_servers`), not per test.

What a store says of itself is the only thing that differs: whether its files are
entries of an archive (``packed``), whether they can be mapped (``mappable``), and whether
its folders are local ones (``local_folders``) (:data:`KINDS`). Every method of the
payload seam (``locate``, ``stored_span``, ``map``, ``read_into``, ``decompress``,
``fetch``, ``check_intact``) is asked of all four.
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tensordict import TensorDict, pack_memmap

import tdview
from tdview.errors import ArchiveError, LimitExceededError, UnsafeCheckpointError
from tdview.storage import Payload, Store, open_store

from ._optional import require_module
from .remote_servers import RangeServer, start_s3

#: store kind -> (Store.kind, its payloads are archive entries, they can be mapped)
KINDS = {
    "directory": ("directory", False, True),
    "archive": ("archive", True, True),
    "remote-directory": ("directory", False, False),
    "remote-archive": ("archive", True, False),
    "consolidated": ("archive", True, True),
    "remote-consolidated": ("archive", True, False),
    "zip-folder": ("archive", True, True),
    "zip-tdz": ("archive", True, True),
    "safetensors": ("safetensors", True, True),
    "remote-safetensors": ("safetensors", True, False),
    "h5": ("h5", False, False),
    "zarr": ("zarr", False, False),
    "remote-zarr": ("zarr", False, False),
}
#: the kinds whose files are archive entries with a recorded CRC-32 (a consolidated
#: file's leaves are spans of its payload: no CRC is recorded)
CRC_RECORDED = {"archive", "remote-archive", "zip-folder", "zip-tdz"}
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


def _safetensors() -> dict[str, torch.Tensor]:
    """The checkpoint's tensors as a state dict (``nested.b``), for ``save_file``."""
    return {
        ".".join((key,) if isinstance(key, str) else key): value
        for key, value in _checkpoint().items(include_nested=True, leaves_only=True)
        if isinstance(value, torch.Tensor)
    }


def _library_written() -> TensorDict:
    """The checkpoint for ``to_h5``/``to_zarr``, which refuse bfloat16: its bf16 leaf as
    int16, the same bytes."""
    td = _checkpoint()
    td["half"] = td["half"].view(torch.int16)
    return td


def _bytes(tensor: torch.Tensor) -> bytes:
    return tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.fixture(scope="session")
def contract_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store-contract")
    td = _checkpoint()
    td.memmap(root / "ckpt")
    td.save(root / "ckpt.tdz")
    pack_memmap(root / "ckpt", root / "ckpt-deflate.tdz", compression="deflate")
    td.consolidate(filename=root / "ckpt.td")
    # a zip of checkpoints (torchrl's archive checkpoints): the folder, and the .tdz stored
    with zipfile.ZipFile(root / "run.zip", "w") as run:
        for file in sorted((root / "ckpt").rglob("*")):
            if file.is_file():
                run.write(file, f"run/ckpt/{file.relative_to(root / 'ckpt')}")
        run.write(root / "ckpt.tdz", "run/ckpt.tdz")
    save_file(_safetensors(), root / "ckpt.safetensors")
    _library_written().to_h5(root / "ckpt.h5").close()
    _library_written().to_zarr(root / "ckpt.zarr")
    return root


@pytest.fixture(scope="session")
def contract_http(contract_root: Path) -> Iterator[RangeServer]:
    require_module("aiohttp", "the HTTP store reads through it")
    server = RangeServer(str(contract_root))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def contract_s3(contract_root: Path) -> Iterator[dict]:
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")

    server, options = start_s3(BUCKET)
    s3fs.S3FileSystem(**options).put(str(contract_root / "ckpt"), f"{BUCKET}/ckpt", recursive=True)
    zarr = str(contract_root / "ckpt.zarr")
    s3fs.S3FileSystem(**options).put(zarr, f"{BUCKET}/ckpt.zarr", recursive=True)
    yield options
    server.stop()


def _open(request: pytest.FixtureRequest, kind: str, archive: str = "ckpt.tdz") -> Store:
    root: Path = request.getfixturevalue("contract_root")
    if kind == "directory":
        return open_store(root / "ckpt")
    if kind == "archive":
        return open_store(root / archive)
    if kind == "consolidated":
        return open_store(root / "ckpt.td")
    if kind in ("zip-folder", "zip-tdz"):  # a checkpoint in a zip of them: Store.sub_store
        inner = "run/ckpt.tdz" if kind == "zip-tdz" else "run/ckpt"
        return open_store(root / "run.zip").sub_store(inner)
    if kind == "remote-consolidated":
        server = request.getfixturevalue("contract_http")
        return open_store(f"{server.url}/ckpt.td")
    if kind == "safetensors":
        return open_store(root / "ckpt.safetensors")
    if kind in ("h5", "zarr"):
        return open_store(root / f"ckpt.{kind}")
    if kind == "remote-zarr":
        options = request.getfixturevalue("contract_s3")
        return open_store(tdview.remote(f"s3://{BUCKET}/ckpt.zarr", **options))
    if kind == "remote-safetensors":
        return open_store(f"{request.getfixturevalue('contract_http').url}/ckpt.safetensors")
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
        name = "ckpt.td" if store.root.endswith(".td") else name
        name = "run.zip" if "run.zip::" in store.root else name
        name = "ckpt.safetensors" if store.root.endswith(".safetensors") else name
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
    # an HDF5 or zarr array loads as a plain tensor, as its format's reader gives it
    assert store.leaves_in_memory is (kind in ("h5", "zarr"))
    assert store.values_batched is (kind in ("h5", "zarr"))  # a value alone: its group's batch


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
        crc = zlib.crc32(_bytes(tensor)) if store.contract_kind in CRC_RECORDED else None  # type: ignore[attr-defined]
        assert payload.crc32 == crc
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


# -- what a store says it can do ----------------------------------------------------------------

#: store kind -> (packed, local_folders)
#: store kind -> (packed, local_folders, maps_unprobed where names are probed one by one)
CAPABILITIES = {
    "directory": (False, True, sys.platform.startswith("linux")),
    "archive": (True, False, False),
    "remote-directory": (False, False, False),
    "remote-archive": (True, False, False),
    "consolidated": (True, False, False),
    "remote-consolidated": (True, False, False),
    "zip-folder": (True, False, False),
    "zip-tdz": (True, False, False),
    "safetensors": (True, False, False),
    "remote-safetensors": (True, False, False),
    "h5": (False, False, False),
    "zarr": (False, False, False),
    "remote-zarr": (False, False, False),
}


def test_capabilities(store: Store) -> None:
    packed, local_folders, unprobed = CAPABILITIES[store.contract_kind]  # type: ignore[attr-defined]
    assert store.packed is packed
    assert store.local_folders is local_folders
    assert store.maps_unprobed is unprobed
    assert store.packed is KINDS[store.contract_kind][1]  # type: ignore[attr-defined]


# -- stored_span ------------------------------------------------------------------------------


def test_stored_span(store: Store) -> None:
    """The archive's cheap answer: where a stored leaf lies in the file map opens (what
    locate says); None for a store whose files are their own or are not mapped."""
    for key in _leaves():
        span = store.stored_span(key)
        payload = store.locate(key)
        if store.packed and store.mappable:
            assert span == (payload.offset, payload.size), key
        else:
            assert span is None, key
    assert store.stored_span("nope.memmap") is None


def test_stored_span_of_a_compressed_entry_is_none(deflated: Store) -> None:
    for key in _leaves():
        payload = deflated.locate(key)
        if not payload.as_stored or not deflated.mappable:
            assert deflated.stored_span(key) is None, key


# -- map ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("write", [False, None])
def test_map_opens_the_file_that_holds_the_bytes(store: Store, write: bool | None) -> None:
    for key, tensor in _leaves().items():
        if not store.mappable:
            with pytest.raises(io.UnsupportedOperation):
                store.map(key, write=write)
            continue
        fd, st, shared = store.map(key, write=write)
        try:
            offset = store.locate(key).offset
            assert offset is not None
            if store.packed:
                assert store.stored_span(key) == (offset, tensor.numel() * tensor.element_size())
                assert not shared  # private for mode None and "r": a shared one is "r+"
            assert st.st_size >= offset + tensor.numel() * tensor.element_size()
            data = os.pread(fd, tensor.numel() * tensor.element_size(), offset)
            assert data == _bytes(tensor), key
            with open(store.opened_path(fd, key), "rb") as f:
                f.seek(offset)
                assert f.read(len(data)) == data
        finally:
            os.close(fd)


def test_map_for_writing(store: Store) -> None:
    if not store.mappable:
        with pytest.raises(io.UnsupportedOperation):
            store.map("w.memmap", write=True)
        return
    fd, _, shared = store.map("w.memmap", write=True)
    try:
        assert shared
        assert os.fstat(fd).st_size > 0  # an open descriptor of the file
    finally:
        os.close(fd)


@pytest.mark.parametrize("write", [False, None])
def test_map_of_a_missing_key(store: Store, write: bool | None) -> None:
    """Never probed before (a fresh store): what a load of leaves given unprobed meets
    (``maps_unprobed``); also in a folder, and asked twice (the second time from what
    the first remembered)."""
    if not store.mappable:
        return
    for key in ("nope.memmap", "nested/nope.memmap", "nope.memmap"):
        with pytest.raises(FileNotFoundError, match=key.replace(".", r"\.")):
            store.map(key, write=write)


def test_map_of_an_unprobed_key_then_its_probe(store: Store) -> None:
    """A key mapped first (no probe) is then known as a probe would know it: a regular
    file of its size, inside the root."""
    if not store.mappable:
        return
    for key, tensor in _leaves().items():
        fd, st, _ = store.map(key, write=None)
        os.close(fd)
        assert store.is_file(key), key
        assert store.link(key) is None, key
        if not store.packed:
            assert st.st_size == tensor.numel() * tensor.element_size(), key
            assert store.known_size(key) in (None, st.st_size), key


def test_plain_entries_are_plain_files_and_plain_dirs(store: Store) -> None:
    """``plain_entries`` answers what ``plain_files`` and ``plain_dirs`` answer, for a few
    names to probe or many, and every name it gives is what it says."""
    folders = sorted({key.rpartition("/")[0] for key in _leaves()})
    if store.kind == "directory":  # a listing answers (not vacuous): the leaves are there
        assert set(_leaves()) <= {
            (folder + "/" if folder else "") + name
            for folder in folders
            for name in store.plain_entries(folder)[0] or ()
        }
    for folder in folders:
        for wanted in (None, 1, 100):
            files, dirs = store.plain_entries(folder, wanted)
            assert files == store.plain_files(folder, wanted), (folder, wanted)
            assert dirs == store.plain_dirs(folder, wanted), (folder, wanted)
            prefix = folder + "/" if folder else ""
            assert all(store.is_file(prefix + name) for name in files or ()), folder
            assert all(store.is_dir(prefix + name) for name in dirs or ()), folder


def test_folder_walk_reads_what_the_store_reads_by_key(store: Store) -> None:
    """A local directory store holds a folder open for the loader's walk, whose reads
    give the bytes and sizes the store gives by key; every other store answers None."""
    opened = store.folder_walk("")
    if store.kind != "directory" or not store.mappable or not sys.platform.startswith("linux"):
        assert opened is None
        return
    assert opened is not None
    walk, fd = opened
    try:
        assert walk.read_meta(fd, 1 << 20) == store.read_bytes("meta.json", 1 << 20)
        assert walk.read_meta(fd, 4) is None  # over the limit: the store's read tells
        sub = walk.folder(fd, "nested")
        assert sub >= 0 and walk.folder(fd, "w.memmap") == -1 and walk.folder(fd, "..") == -1
        try:
            assert walk.read_meta(sub, 1 << 20) == store.read_bytes("nested/meta.json", 1 << 20)
            assert walk.file_size(sub, "b.memmap") == len(_bytes(_leaves()["nested/b.memmap"]))
        finally:
            os.close(sub)
        assert walk.file_size(fd, "absent.memmap") == -1
        assert walk.open_leaf(fd, "absent.memmap", None) is None
        leaf = walk.open_leaf(fd, "ids.memmap", "r")
        assert leaf is not None
        file, size, write = leaf
        try:
            assert (size, write) == (len(_bytes(_leaves()["ids.memmap"])), False)
            assert os.pread(file, size, 0) == _bytes(_leaves()["ids.memmap"])
        finally:
            os.close(file)
    finally:
        os.close(fd)


# -- read_into ----------------------------------------------------------------------------------


def test_read_into(store: Store) -> None:
    for key, tensor in _leaves().items():
        want = _bytes(tensor)
        buf = bytearray(len(want))
        store.read_into(key, 0, buf)
        assert bytes(buf) == want, key
        if len(want) > 3:
            part = bytearray(len(want) - 3)
            store.read_into(key, 2, memoryview(part))
            assert bytes(part) == want[2:-1], key
        store.read_into(key, len(want), bytearray(0))  # nothing, at the end


def test_read_into_refuses_a_range_past_the_end(store: Store) -> None:
    size = len(_bytes(_leaves()["w.memmap"]))
    with pytest.raises(ValueError):
        store.read_into("w.memmap", size - 2, bytearray(4))
    with pytest.raises(ValueError):
        store.read_into("w.memmap", -1, bytearray(1))
    with pytest.raises(FileNotFoundError):
        store.read_into("nope.memmap", 0, bytearray(1))
    with pytest.raises(UnsafeCheckpointError):
        store.read_into("../w.memmap", 0, bytearray(1))


def test_read_ranges(store: Store) -> None:
    want = _bytes(_leaves()["ids.memmap"])
    dest = bytearray(8 + 16)
    store.read_ranges("ids.memmap", [(0, 8), (40, 56)], memoryview(dest))
    assert bytes(dest) == want[0:8] + want[40:56]


def test_read_ranges_of_a_compressed_entry_inflates_its_start(deflated: Store) -> None:
    """A compressed entry's ranges are its content's (inflated up to the last byte)."""
    compressed = 0
    for key, tensor in _leaves().items():
        want = _bytes(tensor)
        compressed += not deflated.locate(key).as_stored
        spans = [(len(want) - 1, len(want)), (0, 2), (1, min(3, len(want)))]
        dest = bytearray(sum(end - start for start, end in spans))
        deflated.read_ranges(key, spans, memoryview(dest))
        assert bytes(dest) == b"".join(want[a:b] for a, b in spans), key
        with pytest.raises((ValueError, ArchiveError)):
            deflated.read_ranges(key, [(0, len(want) + 1)], memoryview(bytearray(len(want) + 1)))
    assert compressed


def test_read_into_a_compressed_entry_reads_its_stream(
    deflated: Store, contract_root: Path
) -> None:
    for key in _leaves():
        payload = deflated.locate(key)
        buf = bytearray(payload.stored_size)
        deflated.read_into(key, 0, buf)
        assert bytes(buf) == _where(deflated, payload, contract_root), key


# -- decompress -------------------------------------------------------------------------------


def test_decompress(store: Store) -> None:
    for key, tensor in _leaves().items():
        data = store.decompress(key)
        assert data.dtype.name == "uint8" and data.flags.writeable, key
        assert data.tobytes() == _bytes(tensor), key
        assert store.decompress(key, max_size=len(data)).tobytes() == _bytes(tensor)
    with pytest.raises(LimitExceededError):
        store.decompress("w.memmap", max_size=3)
    with pytest.raises(FileNotFoundError):
        store.decompress("nope.memmap")


def test_decompress_a_compressed_entry(deflated: Store) -> None:
    for key, tensor in _leaves().items():
        assert deflated.decompress(key).tobytes() == _bytes(tensor), key
    with pytest.raises(LimitExceededError):
        deflated.decompress("w.memmap", max_size=3)


# -- fetch, check_intact ----------------------------------------------------------------------


def test_fetch(store: Store) -> None:
    seen: list[str] = []
    wanted: dict[str, int | None] = {"w.memmap": None, "nested/b.memmap": None, "nope.memmap": None}
    found = store.fetch(wanted, done=seen.append)
    assert bytes(found["w.memmap"]) == _bytes(_leaves()["w.memmap"])
    assert bytes(found["nested/b.memmap"]) == _bytes(_leaves()["nested/b.memmap"])
    assert isinstance(found["nope.memmap"], FileNotFoundError)
    assert {"w.memmap", "nested/b.memmap"} <= set(seen)


def test_fetch_a_prefix_of_a_folder_file(store: Store) -> None:
    """A folder's file is read up to the bytes wanted (an archive entry is read whole:
    the loader checks its size)."""
    found = store.fetch({"ids.memmap": 16})
    want = _bytes(_leaves()["ids.memmap"])
    assert bytes(found["ids.memmap"]) == (want if store.packed else want[:16])


def test_check_intact(store: Store) -> None:
    store.check_intact()  # nothing changed: no error
