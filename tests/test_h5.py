"""HDF5 files written by tensordict's ``to_h5``, read by tdview and compared with
``TensorDict.from_h5(path).to_tensordict()`` (the reference) and h5py."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

import tdview
from tdview.errors import (
    MissingExtraError,
    NotACheckpointError,
    RemoteModeError,
    UnsafeCheckpointError,
)
from tdview.format import encode_key
from tdview.index import Checkpoint, leaf_storage, rollup, search, walk
from tdview.protocol import Session, handle
from tdview.storage import _h5 as h5_store
from tdview.storage import open_store
from tdview.storage._h5 import reads_str

from ._optional import require_module
from .every_kind import (
    SUBPATHS,
    assert_bfloat16_is_refused_by,
    assert_each_leaf_loads_as,
    assert_loads_as,
    assert_options_keep_the_leaves,
    every_kind,
)
from .remote_servers import RangeServer

h5py = require_module("h5py", "tdview[h5] reads HDF5 through it")


def _td() -> TensorDict:
    g = torch.Generator().manual_seed(35)
    td = TensorDict(
        obs=torch.randn(6, 3, generator=g),
        f64=torch.randn(6, dtype=torch.float64, generator=g),
        half=torch.randn(6, 2, generator=g).to(torch.float16),
        mask=torch.rand(6, generator=g) > 0.5,
        i8=torch.arange(6, dtype=torch.int8),
        i16=torch.arange(6, dtype=torch.int16),
        i32=torch.arange(6, dtype=torch.int32) - 3,
        u8=torch.arange(6, dtype=torch.uint8),
        c64=torch.randn(6, generator=g, dtype=torch.complex64),
        empty=torch.zeros(6, 0),
        nested=TensorDict(
            x=torch.arange(12).reshape(6, 2),
            deeper=TensorDict(z=torch.randn(6, 1, 5, generator=g), batch_size=[6, 1]),
            batch_size=[6],
        ),
        batch_size=[6],
    )
    td["name"] = "hello h5"
    td["labels"] = NonTensorStack(*"abcdef")
    return td


@pytest.fixture(scope="module")
def h5_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("h5") / "td.h5"
    _td().to_h5(path).close()
    return path


@pytest.fixture(scope="module")
def reference(h5_path: Path) -> Iterator[TensorDict]:
    persistent = TensorDict.from_h5(h5_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # bytes now, str in 0.17
        yield persistent.to_tensordict()
    persistent.close()


def _same(got: TensorDict, want: TensorDict) -> None:
    """Keys, batch sizes, and each value and its type (a plain tensor, ``bytes``...)."""
    assert got.batch_size == want.batch_size
    assert sorted(got.keys()) == sorted(want.keys())
    for key in want.keys():
        w, g = want.get(key), got.get(key)
        assert type(g) is type(w), (key, type(g), type(w))
        if isinstance(w, TensorDict):
            _same(g, w)
        elif isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and torch.equal(g, w), key
        elif isinstance(w, NonTensorStack):
            assert [type(v) for v in g.tolist()] == [type(v) for v in w.tolist()], key
            assert g.tolist() == w.tolist(), key
        else:
            assert_same_value(g.data, w.data, key)


def test_the_file_opens_as_an_h5_store(h5_path: Path) -> None:
    with open_store(h5_path) as store:
        assert store.kind == "h5" and not store.mappable and not store.packed
        assert "obs.memmap" in store.list_dir("") and store.is_dir("nested")
        assert "empty.memmap" not in store.list_dir("")  # no file for a leaf of no element


@pytest.mark.parametrize("subpath", [None, "nested", "nested/deeper"])
def test_a_load_equals_from_h5(h5_path: Path, reference: TensorDict, subpath: str | None) -> None:
    with Checkpoint(h5_path) as ckpt:
        got = ckpt.load(subpath=subpath)
    want = reference if subpath is None else reference.get(tuple(subpath.split("/")))
    _same(got, want)


#: non-tensor values ``to_h5`` writes (a dict or None it cannot: h5py refuses them)
NON_TENSOR = {
    "int": lambda: NonTensorData(5),
    "float": lambda: NonTensorData(0.5),
    "bool": lambda: NonTensorData(True),
    "ints": lambda: NonTensorData([1, 2]),
    "strs": lambda: NonTensorData(["a", "b"]),
    "str": lambda: "hello",
    "stack of str": lambda: NonTensorStack(*"abc"),
    "stack of int": lambda: NonTensorStack(1, 2, 3),
}


def assert_same_value(got: object, want: object, what: str) -> None:
    """Equal values of one type (numpy's where the reference gives numpy's)."""
    assert type(got) is type(want), (what, got, want)
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype, (what, got, want)
        assert np.array_equal(got, want), (what, got, want)
    else:
        assert got == want, (what, got, want)


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", list(NON_TENSOR))
def test_a_non_tensor_value_loads_as_from_h5_gives_it(
    tmp_path: Path, name: str, nested: bool
) -> None:
    """Class, batch size, value and its type: a number or an array comes back as numpy's
    (``from_h5`` reads ``dataset[()]``), a stack's elements as the reference's, a string
    tensordict wrote as the installed tensordict reads it (``bytes`` before 0.17)."""
    td = TensorDict(x=torch.zeros(3), inner=TensorDict(y=torch.ones(3, 2), batch_size=[3]))
    td.batch_size = [3]
    key = ("inner", "v") if nested else ("v",)
    td[key] = NON_TENSOR[name]()
    td.to_h5(tmp_path / "v.h5").close()
    persistent = TensorDict.from_h5(tmp_path / "v.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = persistent.to_tensordict()
    persistent.close()
    with Checkpoint(tmp_path / "v.h5") as ckpt:
        got = ckpt.load()
        part = ckpt.load(subpath="/".join(key[:-1])) if nested else got
    assert got.batch_size == want.batch_size
    for found in (got.get(key), part.get(key[-1])):
        wanted = want.get(key)
        assert type(found) is type(wanted) and found.batch_size == wanted.batch_size
        if isinstance(wanted, NonTensorStack):
            values = found.tolist()
            assert [type(v) for v in values] == [type(v) for v in wanted.tolist()]
            assert values == wanted.tolist()
        else:
            assert_same_value(found.data, wanted.data, name)


@pytest.fixture(scope="module")
def every_h5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, TensorDict]]:
    """A file of :func:`every_kind` and its reference, ``from_h5(...).to_tensordict()``."""
    path = tmp_path_factory.mktemp("every") / "every.h5"
    every_kind().to_h5(path).close()
    persistent = TensorDict.from_h5(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # a str it wrote reads as bytes
        yield path, persistent.to_tensordict()
    persistent.close()


@pytest.mark.parametrize("subpath", SUBPATHS)
def test_every_leaf_loads_as_from_h5_gives_it(
    every_h5: tuple[Path, TensorDict], subpath: str | None
) -> None:
    """Each leaf's type (a plain tensor in memory, not a MemoryMappedTensor), dtype and
    value, the non-tensor values (``bytes`` for the strings) and the tensorclass (a
    TensorDict in both), for the root and subtrees."""
    path, reference = every_h5
    with Checkpoint(path) as ckpt:
        assert_loads_as(ckpt, reference, subpath)


def test_every_leaf_on_its_own_loads_as_from_h5_gives_it(
    every_h5: tuple[Path, TensorDict],
) -> None:
    path, reference = every_h5
    with Checkpoint(path) as ckpt:
        assert assert_each_leaf_loads_as(ckpt, reference) == 14


def test_to_h5_writes_no_bfloat16(tmp_path: Path) -> None:
    assert_bfloat16_is_refused_by(lambda td: td.to_h5(tmp_path / "bf16.h5"))


def test_mode_and_device_keep_the_reference_s_leaves(every_h5: tuple[Path, TensorDict]) -> None:
    path, reference = every_h5
    with Checkpoint(path) as ckpt:
        assert_options_keep_the_leaves(ckpt, reference)


def test_reads_str_is_what_the_installed_from_h5_gives(tmp_path: Path) -> None:
    TensorDict(x=torch.zeros(2), s="text", batch_size=[2]).to_h5(tmp_path / "s.h5").close()
    persistent = TensorDict.from_h5(tmp_path / "s.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = persistent["s"]
    persistent.close()
    assert reads_str() is isinstance(want, str)
    with Checkpoint(tmp_path / "s.h5") as ckpt:
        got = ckpt.load()["s"]
    assert type(got) is type(want) and got == want


def test_a_string_tensordict_marked_is_str_where_tensordict_reads_str(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a tensordict that reads the strings it wrote as ``str`` (0.17, as 0.15's
    FutureWarning says), that string loads as ``str``; a string another tool wrote (no
    ``__tensordict_str__``) stays ``bytes``, as ``from_h5`` gives it in every version."""
    path = tmp_path / "strings.h5"
    TensorDict(x=torch.zeros(2), batch_size=[2]).to_h5(path).close()
    written = TensorDict(x=torch.zeros(2), mine="by tensordict", batch_size=[2])
    written.to_h5(tmp_path / "mine.h5").close()
    with h5py.File(path, "a") as f, h5py.File(tmp_path / "mine.h5") as mine:
        f.create_dataset("other", data="by h5py", dtype=h5py.string_dtype())
        mine.copy("mine", f)  # the dataset and its attribute
    persistent = TensorDict.from_h5(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = persistent.to_tensordict()
    persistent.close()
    assert want["other"] == b"by h5py" and want["mine"] == b"by tensordict"
    monkeypatch.setattr(h5_store, "reads_str", lambda: True)
    with Checkpoint(path) as ckpt:
        got = ckpt.load()
    assert got["mine"] == "by tensordict" and type(got["other"]) is bytes
    assert got["other"] == want["other"]


def test_the_tree_is_the_file_s_groups_and_datasets(h5_path: Path, reference: TensorDict) -> None:
    with Checkpoint(h5_path) as ckpt, h5py.File(h5_path) as f:
        for node in walk(ckpt, ckpt.root):
            if node.record is not None and node.is_leaf:
                dataset = f["/".join(node.path)]
                assert tuple(node.record.shape) == dataset.shape
                want = reference.get(tuple(node.path))
                assert str(want.dtype) == node.record.dtype.name
        shown = {c.key: c.kind for c in ckpt.children(())}
        assert set(shown) == set(reference.keys())
        assert shown["labels"] == "non_tensor_stack" and shown["name"] == "non_tensor"


def test_browsing_reads_no_dataset(h5_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree, the rollup and a search read metadata only: no tensor dataset's data."""
    read: list[str] = []
    original = h5py.Dataset.__getitem__

    def spy(self, index):  # type: ignore[no-untyped-def]
        read.append(self.name)
        return original(self, index)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    monkeypatch.setattr(h5py.Dataset, "read_direct", lambda *a, **k: pytest.fail("read"))
    with Checkpoint(h5_path) as ckpt:
        nodes = list(walk(ckpt, ckpt.root))
        assert rollup(ckpt, ckpt.root).leaves >= 11
        assert search(ckpt, "deeper/z")[0] == [("nested", "deeper", "z")]
    assert len(nodes) > 12
    assert set(read) <= {"/name", "/labels"}  # the non-tensor values shown, no tensor


def test_a_preview_reads_only_the_rows_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.h5"
    big = torch.arange(20000 * 8, dtype=torch.float32).reshape(20000, 8)
    TensorDict(big=big, batch_size=[]).to_h5(path, chunks=(100, 8)).close()
    asked: list[object] = []
    original = h5py.Dataset.__getitem__

    def spy(self, index):  # type: ignore[no-untyped-def]
        asked.append(index)
        return original(self, index)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    with Checkpoint(path) as ckpt:
        session = Session(ckpt, str(path), namespace={})
        message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "preview",
                   "params": {"path": ["big"], "rows": 5, "stats": False}}  # fmt: skip
        reply, buffers = handle(session, message)
    assert reply is not None and reply["ok"], reply
    got = np.frombuffer(buffers[0], dtype=np.float32)
    assert np.array_equal(got, big.reshape(-1)[: got.size].numpy())
    rows = [i[-1] for i in asked if isinstance(i, tuple) and isinstance(i[-1], slice)]
    assert rows and all(s.stop - s.start <= 100 for s in rows), asked


def test_a_leaf_is_read_not_mapped(h5_path: Path) -> None:
    with Checkpoint(h5_path) as ckpt:
        storage = leaf_storage(ckpt.store, ckpt.node("nested/deeper/z"))
    assert storage.cost == "copy" and storage.stored_bytes == 6 * 5 * 4
    assert storage.location is not None and storage.location.endswith("td.h5::/nested/deeper/z")


def test_byte_ranges_are_the_elements_in_c_order(h5_path: Path) -> None:
    with open_store(h5_path) as store, h5py.File(h5_path) as f:
        want = np.ascontiguousarray(f["nested/deeper/z"][()]).astype("<f4").tobytes()
        dest = bytearray(40)
        store.read_ranges("nested/deeper/z.memmap", [(4, 24), (60, 80)], memoryview(dest))
        assert bytes(dest) == want[4:24] + want[60:80]
        with pytest.raises(ValueError, match="run past"):
            store.read_into("nested/deeper/z.memmap", len(want) - 4, bytearray(8))


def test_the_encoder_is_tensordict_s(h5_path: Path) -> None:
    from tdview.storage._group_tree import encode_name

    for key in ["a b", "", ".", "..", "x/y", "%41", 'q?*<>|:"\\', "ключ", "tab\there"]:
        assert encode_name(key) == encode_key(key)


def test_load_memmap_refuses_it_as_tensordict_does(h5_path: Path) -> None:
    with pytest.raises(ValueError) as want:
        TensorDict.load_memmap(h5_path)
    with pytest.raises(NotACheckpointError) as got:
        tdview.load_memmap(h5_path)
    assert type(want.value).__name__ in [c.__name__ for c in type(got.value).__mro__]
    assert "not a memory-mapped tensordict archive" in str(got.value)
    assert f"tdview.Checkpoint({str(h5_path)!r}).load()" in str(got.value)


def test_the_tree_command_shows_it(h5_path: Path) -> None:
    run = [sys.executable, "-m", "tdview", "tree", str(h5_path), "--depth", "-1"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "deeper" in out and "float16" in out and "labels" in out


def test_diff_against_its_memmap_folder(
    h5_path: Path, reference: TensorDict, tmp_path: Path
) -> None:
    """``tdview diff`` reads both alike: equal values exit 0, a changed value 1."""
    same = reference.clone()
    same["name"] = "hello h5"  # str, as tdview reads what tensordict wrote
    same.memmap(tmp_path / "same")
    run = [sys.executable, "-m", "tdview", "diff", "--level", "values", str(h5_path)]
    equal = subprocess.run([*run, str(tmp_path / "same")], capture_output=True, text=True)
    assert equal.returncode == 0, equal.stdout + equal.stderr
    same["nested", "x"][2, 1] += 1
    same.memmap(tmp_path / "changed")
    differs = subprocess.run([*run, str(tmp_path / "changed")], capture_output=True, text=True)
    assert differs.returncode == 1 and "nested/x" in differs.stdout, differs.stdout


def test_without_h5py_the_error_names_the_extra(
    h5_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(MissingExtraError, match=r'pip install "tdview\[h5\]"'):
        Checkpoint(h5_path)


# -- hostile files ---------------------------------------------------------------------


def _hostile(folder: Path, outside: Path) -> Path:
    """A file with an external link and a virtual dataset into ``outside``, and the
    same pair into a file beside it (followed)."""
    secret = outside / "secret.h5"
    with h5py.File(secret, "w") as f:
        f["data"] = np.arange(10.0)
    beside = folder / "beside.h5"
    with h5py.File(beside, "w") as f:
        f["data"] = np.arange(4.0)
    path = folder / "hostile.h5"
    with h5py.File(path, "w") as f:
        f["ok"] = np.ones(3, dtype=np.float32)
        f["out_link"] = h5py.ExternalLink(str(secret), "/data")
        f["up_link"] = h5py.ExternalLink("../" + outside.name + "/secret.h5", "/data")
        f["in_link"] = h5py.ExternalLink("beside.h5", "/data")
        for name, source, n in [("out_vds", secret, 10), ("in_vds", beside, 4)]:
            layout = h5py.VirtualLayout(shape=(n,), dtype="f8")
            layout[:] = h5py.VirtualSource(str(source), "data", shape=(n,))
            f.create_virtual_dataset(name, layout)
    return path


def test_links_and_virtual_datasets_out_of_the_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir(), (tmp_path / "out").mkdir()
    path = _hostile(tmp_path / "in", tmp_path / "out")
    with Checkpoint(path) as ckpt:
        for name in ["out_link", "up_link", "out_vds"]:
            with pytest.raises(UnsafeCheckpointError, match=f"/{name}") as refused:
                ckpt.store.read_bytes(f"{name}/meta.json", 1 << 20)
            assert "out of the file's folder" in str(refused.value)
            assert f"{name}.memmap" not in ckpt.store.list_dir("")
        with pytest.raises(UnsafeCheckpointError, match="out_link"):
            ckpt.load()  # a load of the whole file meets the refused link
        for name in ["in_link", "in_vds"]:  # followed: inside the file's folder
            got = ckpt.load_leaf(name)
            assert torch.equal(got, torch.arange(4.0, dtype=torch.float64))


def test_unsupported_dtype_names_file_key_and_dtype(tmp_path: Path) -> None:
    path = tmp_path / "compound.h5"
    with h5py.File(path, "w") as f:
        f["t"] = np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")])
        f["ok"] = np.ones(2, dtype=np.float32)
    with Checkpoint(path) as ckpt:
        with pytest.raises(ValueError, match=r"'/t'.*\('a', '<i4'\)"):
            json.loads(ckpt.store.read_bytes("t/meta.json", 1 << 20))
        assert [c.key for c in ckpt.children(())] == ["ok", "t"]


# -- remote: an HDF5 file at a URL, read by ranges -------------------------------------------


@pytest.fixture(scope="module")
def http(h5_path: Path) -> Iterator[RangeServer]:
    require_module("aiohttp", "the HTTP store reads through it")
    server = RangeServer(str(h5_path.parent))
    yield server
    server.stop()


def test_a_file_at_a_url_loads_as_the_local_one(http: RangeServer, reference: TensorDict) -> None:
    http.take()
    with Checkpoint(f"{http.url}/td.h5") as ckpt:
        assert ckpt.store.kind == "h5" and not ckpt.store.mappable
        _same(ckpt.load(subpath="nested"), reference["nested"])
        _same(ckpt.load(), reference)
    assert all(r.span() is not None for r in http.take() if r.method == "GET")  # by ranges


def test_a_remote_file_follows_no_external_link(tmp_path: Path) -> None:
    require_module("aiohttp", "the HTTP store reads through it")
    (tmp_path / "in").mkdir(), (tmp_path / "out").mkdir()
    _hostile(tmp_path / "in", tmp_path / "out")
    server = RangeServer(str(tmp_path / "in"))
    try:
        with Checkpoint(f"{server.url}/hostile.h5") as ckpt:
            with pytest.raises(UnsafeCheckpointError, match="out of a remote file"):
                ckpt.store.read_bytes("in_link/meta.json", 1 << 20)
            assert torch.equal(ckpt.load_leaf("ok"), torch.ones(3))
    finally:
        server.stop()


def test_mode_r_plus_is_refused_naming_the_format(h5_path: Path) -> None:
    with Checkpoint(h5_path) as ckpt, pytest.raises(RemoteModeError, match="an HDF5 file"):
        ckpt.load(mode="r+")
