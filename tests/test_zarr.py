"""zarr stores written by tensordict's ``to_zarr``, read by tdview (locally, over HTTP
and from S3) and compared with ``TensorDict.from_zarr(path).to_tensordict()``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

import tdview
from tdview.errors import (
    CheckpointFormatError,
    MissingExtraError,
    NotACheckpointError,
    RemoteModeError,
    UnsafeCheckpointError,
)
from tdview.index import Checkpoint, rollup, search, walk
from tdview.protocol import Session, handle
from tdview.storage import open_store

from ._optional import require_module
from .every_kind import (
    SUBPATHS,
    assert_bfloat16_is_refused_by,
    assert_each_leaf_loads_as,
    assert_loads_as,
    assert_options_keep_the_leaves,
    every_kind,
)
from .remote_servers import RangeServer, start_s3

zarr = require_module("zarr", "tdview[zarr] reads zarr through it")
BUCKET = "zarr-stores"


def _td() -> TensorDict:
    g = torch.Generator().manual_seed(36)
    td = TensorDict(
        obs=torch.randn(5, 3, generator=g),
        f64=torch.randn(5, dtype=torch.float64, generator=g),
        half=torch.randn(5, 2, generator=g).to(torch.float16),
        mask=torch.rand(5, generator=g) > 0.5,
        i8=torch.arange(5, dtype=torch.int8),
        i32=torch.arange(5, dtype=torch.int32) - 2,
        u8=torch.arange(5, dtype=torch.uint8),
        empty=torch.zeros(5, 0),
        nested=TensorDict(
            x=torch.arange(10).reshape(5, 2),
            deeper=TensorDict(z=torch.randn(5, 1, 4, generator=g), batch_size=[5, 1]),
            batch_size=[5],
        ),
        batch_size=[5],
        names=["time"],
    )
    td["name"] = "hello zarr"
    td["config"] = NonTensorData({"lr": 0.001, "layers": [64, 64]})
    td["labels"] = NonTensorStack(*"abcde")
    return td


@pytest.fixture(scope="module")
def zarr_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("zarr")
    _td().to_zarr(root / "td.zarr")
    return root


@pytest.fixture(scope="module")
def zarr_path(zarr_root: Path) -> Path:
    return zarr_root / "td.zarr"


@pytest.fixture(scope="module")
def reference(zarr_path: Path) -> TensorDict:
    return TensorDict.from_zarr(zarr_path).to_tensordict()


def _same(got: TensorDict, want: TensorDict) -> None:
    """Keys, batch sizes, names, and each value and its type (a plain tensor...)."""
    assert got.batch_size == want.batch_size and got.names == want.names
    assert sorted(got.keys()) == sorted(want.keys())
    for key in want.keys():
        w, g = want.get(key), got.get(key)
        assert type(g) is type(w), (key, type(g), type(w))
        if isinstance(w, TensorDict):
            _same(g, w)
        elif isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and torch.equal(g, w), key
        elif isinstance(w, NonTensorStack):
            assert g.tolist() == w.tolist()
        else:
            assert got[key] == want[key]


@pytest.mark.parametrize("subpath", [None, "nested", "nested/deeper"])
def test_a_load_equals_from_zarr(
    zarr_path: Path, reference: TensorDict, subpath: str | None
) -> None:
    with Checkpoint(zarr_path) as ckpt:
        assert ckpt.store.kind == "zarr" and not ckpt.store.mappable
        got = ckpt.load(subpath=subpath)
    _same(got, reference if subpath is None else reference.get(tuple(subpath.split("/"))))


@pytest.fixture(scope="module")
def every_zarr(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TensorDict]:
    """A store of :func:`every_kind` and its reference, ``from_zarr(...).to_tensordict()``."""
    path = tmp_path_factory.mktemp("every") / "every.zarr"
    every_kind().to_zarr(path)
    return path, TensorDict.from_zarr(path).to_tensordict()


@pytest.mark.parametrize("subpath", SUBPATHS)
def test_every_leaf_loads_as_from_zarr_gives_it(
    every_zarr: tuple[Path, TensorDict], subpath: str | None
) -> None:
    """Each leaf's type (a plain tensor in memory, not a MemoryMappedTensor), dtype and
    value, the non-tensor values and the tensorclass (a TensorDict in both), for the root
    and subtrees."""
    path, reference = every_zarr
    with Checkpoint(path) as ckpt:
        assert_loads_as(ckpt, reference, subpath)


def test_every_leaf_on_its_own_loads_as_from_zarr_gives_it(
    every_zarr: tuple[Path, TensorDict],
) -> None:
    path, reference = every_zarr
    with Checkpoint(path) as ckpt:
        assert assert_each_leaf_loads_as(ckpt, reference) == 14


def test_to_zarr_writes_no_bfloat16(tmp_path: Path) -> None:
    assert_bfloat16_is_refused_by(lambda td: td.to_zarr(tmp_path / "bf16.zarr"))


def test_mode_and_device_keep_the_reference_s_leaves(every_zarr: tuple[Path, TensorDict]) -> None:
    path, reference = every_zarr
    with Checkpoint(path) as ckpt:
        assert_options_keep_the_leaves(ckpt, reference)
        with pytest.raises(RemoteModeError, match="a zarr store"):
            ckpt.load(mode="r+")


#: non-tensor values ``to_zarr`` writes as JSON (a pickled one is never read: see below)
NON_TENSOR = {
    "str": lambda: "hello",
    "int": lambda: NonTensorData(5),
    "float": lambda: NonTensorData(0.5),
    "bool": lambda: NonTensorData(True),
    "none": lambda: NonTensorData(None),
    "list": lambda: NonTensorData([1, "a", 2.5]),
    "dict": lambda: NonTensorData({"lr": 0.1, "layers": [64, 64]}),
    "stack of str": lambda: NonTensorStack(*"abc"),
    "stack of int": lambda: NonTensorStack(1, 2, 3),
}


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", list(NON_TENSOR))
def test_a_non_tensor_value_loads_as_from_zarr_gives_it(
    tmp_path: Path, name: str, nested: bool
) -> None:
    """Class, batch size, value and the types inside it, as the reference gives them."""
    td = TensorDict(x=torch.zeros(3), inner=TensorDict(y=torch.ones(3, 2), batch_size=[3]))
    td.batch_size = [3]
    key = ("inner", "v") if nested else ("v",)
    td[key] = NON_TENSOR[name]()
    td.to_zarr(tmp_path / "v.zarr")
    want = TensorDict.from_zarr(tmp_path / "v.zarr").to_tensordict()
    with Checkpoint(tmp_path / "v.zarr") as ckpt:
        got = ckpt.load()
        part = ckpt.load(subpath="/".join(key[:-1])) if nested else got
    assert got.batch_size == want.batch_size
    wanted = want.get(key)
    for found in (got.get(key), part.get(key[-1])):
        assert type(found) is type(wanted) and found.batch_size == wanted.batch_size
        values = found.tolist() if isinstance(wanted, NonTensorStack) else found.data
        expected = wanted.tolist() if isinstance(wanted, NonTensorStack) else wanted.data
        assert _typed(values) == _typed(expected)


def _typed(value: object) -> object:
    """A value with the type of everything in it, so that ``1 == 1.0 == True`` differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    original = zarr.storage.LocalStore.get

    async def spy(self, key, *args, **kwargs):  # type: ignore[no-untyped-def]
        read.append(key)
        return await original(self, key, *args, **kwargs)

    monkeypatch.setattr(zarr.storage.LocalStore, "get", spy)
    return read


def test_browsing_reads_zarr_json_and_no_chunk(
    zarr_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = _spy_reads(monkeypatch)
    with Checkpoint(zarr_path) as ckpt:
        nodes = list(walk(ckpt, ckpt.root))
        assert rollup(ckpt, ckpt.root).leaves >= 9
        assert search(ckpt, "deeper/z")[0] == [("nested", "deeper", "z")]
        shapes = {n.path: tuple(n.record.shape) for n in nodes if n.is_leaf and n.record}
    assert shapes[("nested", "deeper", "z")] == (5, 1, 4)
    chunks = [key for key in read if "/c/" in key or key.startswith("c/")]
    # the chunks of the non-tensor values shown (their folders' meta.json), no tensor's
    assert {key.split("/c/")[0] for key in chunks} <= {"name", "config", "labels"}, read
    assert "zarr.json" in read


def test_a_preview_reads_only_the_chunks_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = torch.arange(4000 * 8, dtype=torch.float32).reshape(4000, 8)
    TensorDict(big=big, batch_size=[]).to_zarr(tmp_path / "big.zarr", chunks=(100,))
    read = _spy_reads(monkeypatch)
    with Checkpoint(tmp_path / "big.zarr") as ckpt:
        session = Session(ckpt, str(tmp_path / "big.zarr"), namespace={})
        message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "preview",
                   "params": {"path": ["big"], "rows": 5, "stats": False}}  # fmt: skip
        reply, buffers = handle(session, message)
    assert reply is not None and reply["ok"], reply
    got = np.frombuffer(buffers[0], dtype=np.float32)
    assert np.array_equal(got, big.reshape(-1)[: got.size].numpy())
    chunks = [key for key in read if "/c/" in key]
    assert chunks and len(chunks) <= 2, chunks  # of 40


def test_a_pickled_value_is_never_unpickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    td["obj"] = NonTensorData({1, 2})  # a set: pickled by to_zarr
    td.to_zarr(tmp_path / "p.zarr")
    import pickle

    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    with Checkpoint(tmp_path / "p.zarr") as ckpt:
        with pytest.raises(UnsafeCheckpointError, match=r"'/obj'.*never unpickles"):
            ckpt.store.read_bytes("obj/meta.json", 1 << 20)
        assert torch.equal(ckpt.load_leaf("a"), torch.zeros(2))


@pytest.mark.parametrize("name", ["", "x\x00"])
def test_a_member_name_no_file_can_have_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "bad.zarr"
    TensorDict(a=torch.zeros(2), batch_size=[2]).to_zarr(path)
    doc = json.loads((path / "zarr.json").read_text())
    members = doc["consolidated_metadata"]["metadata"]
    members[name] = members["a"]
    (path / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(UnsafeCheckpointError, match=repr(name).replace("\\", "\\\\")):
        Checkpoint(path)


def test_a_name_zarr_refuses_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.zarr"
    TensorDict(a=torch.zeros(2), batch_size=[2]).to_zarr(path)
    doc = json.loads((path / "zarr.json").read_text())
    doc["consolidated_metadata"]["metadata"][".."] = doc["consolidated_metadata"]["metadata"]["a"]
    (path / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointFormatError, match=r"bad\.zarr: zarr cannot read it"):
        Checkpoint(path)


def test_load_memmap_refuses_it_as_tensordict_does(zarr_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as want:
        TensorDict.load_memmap(zarr_path)
    with pytest.raises(NotACheckpointError) as got:
        tdview.load_memmap(zarr_path)
    assert isinstance(got.value, FileNotFoundError)
    assert got.value.filename == want.value.filename == str(zarr_path / "meta.json")
    assert f"tdview.Checkpoint({str(zarr_path)!r}).load()" in str(got.value)


def test_the_tree_command_shows_it(zarr_path: Path) -> None:
    run = [sys.executable, "-m", "tdview", "tree", str(zarr_path), "--depth", "-1"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "deeper  TensorDict  batch [5, 1]" in out and "config" in out, out


def test_without_zarr_the_error_names_the_extra(
    zarr_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "zarr", None)
    with pytest.raises(MissingExtraError, match=r'pip install "tdview\[zarr\]"'):
        Checkpoint(zarr_path)


def test_a_folder_with_meta_json_stays_a_checkpoint(tmp_path: Path) -> None:
    TensorDict(a=torch.zeros(2), batch_size=[2]).memmap(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "zarr.json").write_text("{}")
    with open_store(tmp_path / "ckpt") as store:
        assert store.kind == "directory"


# -- remote: HTTP (our range server) and S3 (moto) ---------------------------------------


@pytest.fixture(scope="module")
def http(zarr_root: Path) -> Iterator[RangeServer]:
    require_module("aiohttp", "the HTTP store reads through it")
    server = RangeServer(str(zarr_root))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3_options(zarr_root: Path) -> Iterator[dict]:
    require_module("moto", "the S3 server")
    s3fs = require_module("s3fs", "the S3 client")
    server, options = start_s3(BUCKET)
    s3fs.S3FileSystem(**options).put(
        str(zarr_root / "td.zarr"), f"{BUCKET}/td.zarr", recursive=True
    )
    yield options
    server.stop()


def test_remote_zarr_over_http_loads_as_the_local_one(
    http: RangeServer, reference: TensorDict
) -> None:
    http.take()
    with Checkpoint(f"{http.url}/td.zarr") as ckpt:
        assert [c.key for c in ckpt.children(())]
        browsed = [r.path for r in http.take()]
        got = ckpt.load()
    assert not [
        p for p in browsed if "/c/" in p and p.split("/")[2] not in ("name", "config", "labels")
    ]
    _same(got, reference)


def test_remote_zarr_on_s3_loads_as_the_local_one(s3_options: dict, reference: TensorDict) -> None:
    with Checkpoint(tdview.remote(f"s3://{BUCKET}/td.zarr", **s3_options)) as ckpt:
        _same(ckpt.load(subpath="nested"), reference["nested"])


@pytest.fixture(scope="module")
def plain_http(zarr_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RangeServer]:
    """The store served at ``/episodes`` (no ``.zarr`` in its name), beside a folder
    ``/notes`` holding no zarr store."""
    require_module("aiohttp", "the HTTP store reads through it")
    root = tmp_path_factory.mktemp("plain")
    shutil.copytree(zarr_root / "td.zarr", root / "episodes")
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a store")
    server = RangeServer(str(root))
    yield server
    server.stop()


@pytest.mark.parametrize("slash", ["", "/"])
def test_remote_zarr_at_a_url_of_another_name_is_told_by_its_zarr_json(
    plain_http: RangeServer, reference: TensorDict, slash: str
) -> None:
    """After the archive and consolidated guesses (one suffix read of the object, none
    for a folder's URL), one ranged read of the head of ``zarr.json`` tells the store."""
    plain_http.take()
    with Checkpoint(f"{plain_http.url}/episodes{slash}") as ckpt:
        assert ckpt.store.kind == "zarr"
        opened = plain_http.take()
        got = ckpt.load()
    _same(got, reference)
    probes = [r for r in opened if r.path == "/episodes/zarr.json" and r.range is not None]
    assert [r.range for r in probes] == ["bytes=0-4095"]
    before = opened[: opened.index(probes[0])]
    assert [(r.path, r.range) for r in before] == ([] if slash else [("/episodes", "bytes=-65536")])


def test_a_url_of_no_store_keeps_its_error_after_one_probe(plain_http: RangeServer) -> None:
    plain_http.take()
    with pytest.raises(FileNotFoundError):
        Checkpoint(f"{plain_http.url}/notes")
    assert [r.path for r in plain_http.take()] == ["/notes", "/notes/zarr.json"]
    with pytest.raises(NotACheckpointError, match="cannot be listed over HTTP"):
        Checkpoint(f"{plain_http.url}/notes/")


def test_remote_zarr_on_s3_without_the_suffix(
    s3_options: dict, zarr_root: Path, reference: TensorDict
) -> None:
    """An S3 prefix whose listing holds a ``zarr.json`` and no ``meta.json``."""
    s3fs = require_module("s3fs", "the S3 client")
    fs = s3fs.S3FileSystem(**s3_options)
    if not fs.exists(f"{BUCKET}/plain/episodes/zarr.json"):
        fs.put(str(zarr_root / "td.zarr"), f"{BUCKET}/plain/episodes", recursive=True)
    with Checkpoint(tdview.remote(f"s3://{BUCKET}/plain/episodes", **s3_options)) as ckpt:
        assert ckpt.store.kind == "zarr"
        _same(ckpt.load(subpath="nested"), reference["nested"])


@pytest.mark.parametrize("writer", ["to_zarr", "to_h5"])
def test_check_finds_a_nan_and_du_totals_the_bytes(tmp_path: Path, writer: str) -> None:
    """``tdview check --values`` reads the values through the library; ``tdview du``
    totals the bytes the arrays hold."""
    if writer == "to_h5":
        require_module("h5py", "tdview[h5] reads HDF5 through it")
    td = TensorDict(a=torch.arange(6.0), b={"c": torch.ones(3, 2)}, batch_size=[])
    td["b", "c"][1, 1] = float("nan")
    path = tmp_path / ("t.zarr" if writer == "to_zarr" else "t.h5")
    getattr(td, writer)(path)
    run = [sys.executable, "-m", "tdview"]
    check = subprocess.run([*run, "check", "--values", str(path)], capture_output=True, text=True)
    assert check.returncode == 1 and "b/c" in check.stdout and "NaN" in check.stdout, check.stdout
    du = subprocess.run([*run, "du", str(path)], capture_output=True, text=True, check=True)
    total = sum(v.numel() * v.element_size() for v in td.values(True, True))
    assert du.stdout.split()[0:2] == [str(total), "B"], du.stdout


def test_a_chunk_linked_out_of_the_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "linked.zarr"
    TensorDict(a=torch.arange(4.0), b=torch.ones(2), batch_size=[]).to_zarr(path)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4.0, dtype=np.float32).tobytes())
    chunk = path / "a" / "c" / "0"
    chunk.unlink()
    chunk.symlink_to(secret)
    with Checkpoint(path) as ckpt:
        assert torch.equal(ckpt.load_leaf("b"), torch.ones(2))
        with pytest.raises(UnsafeCheckpointError, match=r"'a/c/0' leads out of the store"):
            ckpt.load_leaf("a")
