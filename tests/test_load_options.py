"""``out``, ``subpath``, ``num_threads``, ``allow_pickle``, the errors, and loading from an
open :class:`~tdview.Checkpoint`."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    pack_memmap,
    tensorclass,
)

import tdview
from tdview import Checkpoint
from tdview.errors import (
    CheckpointFormatError,
    DeviceUnavailableError,
    LimitExceededError,
    NotACheckpointError,
    PickleRefusedError,
    SubpathError,
    UnsafeCheckpointError,
    UnsupportedFormatVersionError,
)
from tdview.index import needs_unpickling, walk
from tdview.loader import PICKLE_WARNING
from tdview.storage import ArchiveStore, DirectoryStore

from .compare import assert_same


@tensorclass
class Pair:
    left: torch.Tensor
    name: str


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def tree() -> TensorDict:
    return TensorDict(
        a=torch.arange(4.0),
        sub=TensorDict(b=torch.ones(2, 3), deep=TensorDict(c=torch.zeros(1))),
        other=TensorDict(x=torch.ones(5)),
        pair=Pair(left=torch.ones(2), name="p", batch_size=[2]),
        ls=LazyStackedTensorDict(TensorDict(y=torch.ones(2)), TensorDict(y=torch.zeros(2))),
        text=NonTensorData("hello"),
    )


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    tree().memmap(tmp_path / "d")
    return tmp_path / "d"


# -- out ----------------------------------------------------------------------------------


def make_out() -> TensorDict:
    return TensorDict(
        a=torch.full((4,), -1.0),
        sub=TensorDict(b=torch.full((2, 3), -1.0), stale=torch.ones(1), deep=torch.ones(3)),
        stale=torch.zeros(2),
        other=torch.zeros(1),  # a leaf where the checkpoint has a collection
    )


@pytest.mark.parametrize("container", ["dir", "tdz"])
def test_out_reuses_nested_tensordicts_and_replaces_leaves(
    saved: Path, tmp_path: Path, container: str
) -> None:
    path = saved if container == "dir" else tmp_path / "o.tdz"
    if container == "tdz":
        pack_memmap(saved, path)
    out, ref_out = make_out(), make_out()
    sub, old_leaf = out["sub"], out["a"]
    result = tdview.load_memmap(path, out=out, allow_pickle=True)
    ref = quiet(TensorDict.load_memmap, path, out=ref_out, allow_pickle=True)
    assert result is out and ref is ref_out
    assert out["sub"] is sub and out["a"] is not old_leaf
    assert torch.equal(old_leaf, torch.full((4,), -1.0))  # the old storage is not written
    assert "stale" not in out.keys() and "stale" not in out["sub"].keys()
    assert_same(result, ref)


def test_out_device(saved: Path) -> None:
    out = TensorDict(device="cpu")
    loaded = tdview.load_memmap(saved, out=out)
    assert loaded.device == torch.device("cpu")
    with pytest.raises(
        ValueError, match="Cannot load a tensordict on device meta into a tensordict on device cpu"
    ):
        tdview.load_memmap(saved, device="meta", out=TensorDict(device="cpu"))


def test_out_locked_and_wrong_types(saved: Path) -> None:
    with pytest.raises(RuntimeError, match="locked"):
        tdview.load_memmap(saved, out=TensorDict(a=torch.zeros(4)).lock_())
    with pytest.raises(TypeError, match="out must be"):
        tdview.load_memmap(saved, out={"a": 1})


def test_out_tensorclass(tmp_path: Path) -> None:
    Pair(left=torch.arange(3.0), name="saved", batch_size=[3]).memmap(tmp_path / "tc")
    out = Pair(left=torch.zeros(3), name="old", batch_size=[3])
    inner = out._tensordict
    result = tdview.load_memmap(tmp_path / "tc", out=out)
    assert result is out and out._tensordict is inner
    assert out.name == "saved" and torch.equal(out.left, torch.arange(3.0))


def test_out_lazy_stack(tmp_path: Path) -> None:
    LazyStackedTensorDict(TensorDict(y=torch.ones(2)), TensorDict(y=torch.zeros(2))).memmap(
        tmp_path / "ls"
    )
    out = LazyStackedTensorDict(
        TensorDict(y=torch.full((2,), 5.0)), TensorDict(y=torch.full((2,), 5.0))
    )
    members = list(out.tensordicts)
    result = tdview.load_memmap(tmp_path / "ls", out=out)
    assert isinstance(result, LazyStackedTensorDict)
    assert all(a is b for a, b in zip(result.tensordicts, members, strict=True))
    assert torch.equal(result["y"], torch.stack([torch.ones(2), torch.zeros(2)]))
    three = LazyStackedTensorDict(*(TensorDict(y=torch.ones(2)) for _ in range(3)))
    with pytest.raises(ValueError, match="Cannot load 2 stacked tensordicts into a stack of 3"):
        tdview.load_memmap(tmp_path / "ls", out=three)


def test_out_lazy_stack_for_a_saved_tensordict(tmp_path: Path) -> None:
    """A saved TensorDict loaded into a lazy stack: each member gets its slice of the
    memory-mapped leaf, as tensordict's loader gives it."""
    TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2]).memmap(tmp_path / "td")

    def stack() -> LazyStackedTensorDict:
        return LazyStackedTensorDict(TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(3)))

    out = stack()
    got = tdview.load_memmap(tmp_path / "td", out=out)
    assert got is out
    assert_same(got, TensorDict.load_memmap(tmp_path / "td", out=stack()))
    assert got.tensordicts[1]["a"].tolist() == [3.0, 4.0, 5.0]


def test_out_sub_tensordict_needs_a_sub_tensordict(tmp_path: Path) -> None:
    source = TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2, 3])
    source._get_sub_tensordict(0).memmap(tmp_path / "sub")
    with pytest.raises(TypeError, match="Loading a _SubTensorDict into a TensorDict output"):
        tdview.load_memmap(tmp_path / "sub", out=TensorDict())
    out = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3])._get_sub_tensordict(0)
    assert tdview.load_memmap(tmp_path / "sub", out=out) is out
    assert torch.equal(out._source["a"], source["a"])


# -- subpath ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "subpath, why",
    [
        ("zz", "'<root>' has no entry 'zz'"),
        (("sub", "zz"), "'sub' has no entry 'zz'"),
        ("a", "it is a tensor leaf"),
        ("sub/b", "it is a tensor leaf"),
        ("pair/left", "it is a tensor leaf"),
        ("text/data", "'text' has no entry 'data'"),
    ],
)
def test_subpath_naming_no_tensordict(saved: Path, subpath: Any, why: str) -> None:
    shown = subpath if isinstance(subpath, str) else "/".join(subpath)
    with pytest.raises(
        ValueError, match=re.escape(f"No tensordict found under subpath {shown!r} ({why}")
    ) as info:
        tdview.load_memmap(saved, subpath=subpath)
    assert isinstance(info.value, SubpathError)
    with pytest.raises(ValueError, match="No tensordict found"):
        quiet(TensorDict.load_memmap, saved, subpath=subpath)


@pytest.mark.parametrize("archive", [False, True])
def test_subpath_by_the_folder_name_on_disk(tmp_path: Path, archive: bool) -> None:
    """A part given as its folder shows it ("sp%20ace" for the key "sp ace") reaches it,
    as tensordict's fallback to raw names does. robust_key=False reads the legacy layout
    only, where the key "sp ace" has no folder (tensordict's subpath joins the name to the
    path and loads it, although its full load leaves that key out)."""
    td = TensorDict({"sp ace": TensorDict(v=torch.arange(3), deep=TensorDict(w=torch.ones(2)))})
    path = tmp_path / ("enc.tdz" if archive else "enc")
    td.save(path) if archive else td.memmap(path)
    for subpath in ("sp%20ace", ("sp%20ace", "deep")):
        assert_same(
            tdview.load_memmap(path, subpath=subpath), TensorDict.load_memmap(path, subpath=subpath)
        )
    with pytest.raises(SubpathError, match="has no entry 'sp%20ace'"):
        tdview.load_memmap(path, subpath="sp%20ace", robust_key=False)


def test_subpath_to_a_folder_the_save_does_not_record(tmp_path: Path) -> None:
    """A folder left by an earlier save into the same prefix is not part of the saved
    tensordict (its full load leaves it out): the error says the folder exists."""
    TensorDict(old=TensorDict(z=torch.ones(3)), a=torch.ones(1)).memmap(tmp_path / "ck")
    TensorDict(a=torch.zeros(1)).memmap(tmp_path / "ck", existsok=True)
    assert list(tdview.load_memmap(tmp_path / "ck").keys()) == ["a"]
    with pytest.raises(
        SubpathError,
        match=re.escape(
            f"the folder {tmp_path / 'ck' / 'old'} exists, but the saved tensordict does not "
            "record it"
        ),
    ):
        tdview.load_memmap(tmp_path / "ck", subpath="old")


@pytest.mark.parametrize("subpath", [(), 1, ("a", 2), [("a",)]])
def test_subpath_of_the_wrong_type(saved: Path, subpath: Any) -> None:
    with pytest.raises(
        ValueError, match=re.escape("subpath must be a string path or a (nested) tuple of strings.")
    ):
        tdview.load_memmap(saved, subpath=subpath)


def test_subpath_reads_only_its_subtree(saved: Path, monkeypatch) -> None:
    (saved / "other" / "meta.json").write_text("{broken")  # a sibling nobody needs
    read: list[str] = []
    real = DirectoryStore.read_bytes
    monkeypatch.setattr(
        DirectoryStore,
        "read_bytes",
        lambda self, key, limit: read.append(key) or real(self, key, limit),
    )
    probed: list[str] = []
    real_is_file = DirectoryStore.is_file
    monkeypatch.setattr(
        DirectoryStore, "is_file", lambda self, key: probed.append(key) or real_is_file(self, key)
    )
    loaded = tdview.load_memmap(saved, subpath="sub/deep")
    assert list(loaded.keys()) == ["c"]
    assert read == ["meta.json", "sub/meta.json", "sub/deep/meta.json"]
    assert not [key for key in probed if not key.startswith("sub/deep/")]


def test_subpath_reads_one_entry_of_each_ancestor(saved: Path) -> None:
    """tensordict opens the sub-folder by name and checks nothing of the ancestors: a
    broken sibling entry of one does not stop a subpath below it. The node loaded, and the
    ancestor's bounds, are still checked."""
    meta = json.loads((saved / "sub" / "meta.json").read_text())
    meta["bogus"] = {"dtype": "torch.nope", "shape": [1]}
    (saved / "sub" / "meta.json").write_text(json.dumps(meta))
    assert_same(
        tdview.load_memmap(saved, subpath="sub/deep"),
        quiet(TensorDict.load_memmap, saved, subpath="sub/deep"),
    )
    for subpath in ("sub", "sub/zz"):
        with pytest.raises(CheckpointFormatError, match="leaf 'bogus': unknown dtype"):
            tdview.load_memmap(saved, subpath=subpath)
    deep = b"[" * 100 + b"]" * 100
    (saved / "sub" / "meta.json").write_bytes(
        b'{"x": ' + deep + b', "deep": {"type": "TensorDict"}, "_type": "x"}'
    )
    with pytest.raises(LimitExceededError, match="JSON nested 101 levels deep"):
        tdview.load_memmap(saved, subpath="sub/deep")


def test_subpath_reaches_tensorclass_fields_and_stack_members(saved: Path) -> None:
    assert isinstance(tdview.load_memmap(saved, subpath="pair"), Pair)
    assert tdview.load_memmap(saved, subpath="ls/1")["y"].tolist() == [0.0, 0.0]
    text = tdview.load_memmap(saved, subpath="text")
    assert isinstance(text, NonTensorData) and text.data == "hello" and text.batch_size == ()


# -- num_threads --------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["deflate", "bzip2", "lzma"])
def test_num_threads_decompresses_in_a_pool_up_front(
    tmp_path: Path, monkeypatch, compression: str
) -> None:
    td = TensorDict({f"k{i}": torch.randn(1000) for i in range(12)})
    td["sub"] = TensorDict(z=torch.randn(50))
    td.memmap(tmp_path / "d")
    path = tmp_path / "t.zip"
    pack_memmap(tmp_path / "d", path, compression=compression)
    threads: list[str] = []
    real = ArchiveStore.decompress

    def decompress(self, key, *args, **kwargs):
        if key.endswith(".memmap"):
            threads.append(threading.current_thread().name)
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(ArchiveStore, "decompress", decompress)
    loaded = tdview.load_memmap(path, num_threads=4)
    assert_same(loaded, quiet(TensorDict.load_memmap, path))
    assert len(threads) == 13 and all(name.startswith("tdview-inflate") for name in threads)
    threads.clear()
    tdview.load_memmap(path, num_threads=4, subpath="sub")
    assert len(threads) == 1  # only the subtree is scheduled (one entry: no pool needed)
    tdview.load_memmap(path, num_threads=4, device="meta")
    assert threads == [threading.current_thread().name]  # meta: nothing more decompressed


def test_num_threads_must_be_a_count(saved: Path) -> None:
    with pytest.raises(ValueError, match="num_threads"):
        tdview.load_memmap(saved, num_threads=-1)


# -- allow_pickle -------------------------------------------------------------------------


@pytest.fixture
def pickled(tmp_path: Path) -> Path:
    TensorDict(
        s=NonTensorData({1, 2}),
        stack=NonTensorStack(NonTensorData({3}), NonTensorData({4})),
        ok=torch.ones(1),
    ).memmap(tmp_path / "p")
    return tmp_path / "p"


def test_allow_pickle_none_warns_with_tensordicts_text(pickled: Path) -> None:
    with pytest.warns(FutureWarning, match=re.escape(PICKLE_WARNING)) as record:
        loaded = tdview.load_memmap(pickled)
    assert loaded["s"] == {1, 2} and loaded["stack"].tolist() == [{3}, {4}]
    assert all(w.filename == __file__ for w in record)  # points at the caller


def test_allow_pickle_false_refuses_and_names_the_file(pickled: Path) -> None:
    with pytest.raises(
        PickleRefusedError,
        match=r"Refusing to load pickled non-tensor data.*"
        r"s/other\.pickle",
    ) as info:
        tdview.load_memmap(pickled, allow_pickle=False)
    assert isinstance(info.value, RuntimeError)


def test_allow_pickle_true_is_silent(pickled: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tdview.load_memmap(pickled, allow_pickle=True)["s"] == {1, 2}


@pytest.mark.parametrize("value", ["yes", 1, 0])
def test_allow_pickle_must_be_a_bool(saved: Path, value) -> None:
    with pytest.raises(TypeError, match=r"^allow_pickle must be a bool or None\.$"):
        tdview.load_memmap(saved, allow_pickle=value)


def test_json_types_restore_containers_without_unpickling(tmp_path: Path, monkeypatch) -> None:
    TensorDict.from_pytree({"a": torch.ones(2), "b": [torch.zeros(1)]}).memmap(tmp_path / "j")
    assert list(tmp_path.rglob("json_types.json"))
    monkeypatch.setattr(pickle, "loads", lambda *a: pytest.fail("unpickled"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = tdview.load_memmap(tmp_path / "j", allow_pickle=False)
    monkeypatch.undo()
    assert_same(loaded, quiet(TensorDict.load_memmap, tmp_path / "j", allow_pickle=False))


def test_a_pickle_too_large_for_json_types_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    """json_types.json describes a pickle of a few classes: a 5 GiB other.pickle beside it
    (sparse here) is never read to check its hash; allow_pickle=False refuses it."""
    TensorDict.from_pytree({"a": torch.ones(2), "b": [torch.zeros(1)]}).memmap(tmp_path / "j")
    described = min(tmp_path.rglob("json_types.json"))
    big = described.parent / "other.pickle"
    big_key = big.relative_to(tmp_path / "j").as_posix()
    with open(big, "r+b") as f:
        f.truncate(5 << 30)
    read: list[str] = []
    real = DirectoryStore.read_bytes
    monkeypatch.setattr(
        DirectoryStore,
        "read_bytes",
        lambda self, key, limit: read.append(key) or real(self, key, limit),
    )
    with pytest.raises(PickleRefusedError, match=r"other\.pickle"):
        tdview.load_memmap(tmp_path / "j", allow_pickle=False)
    assert big_key.replace("other.pickle", "json_types.json") in read
    assert big_key not in read
    with Checkpoint(tmp_path / "j") as ckpt:
        node = next(
            n
            for n in walk(ckpt, ckpt.root)
            if n.dirkey and (tmp_path / "j" / n.dirkey) == described.parent
        )
        assert needs_unpickling(ckpt.store, node)
    assert big_key not in read


@pytest.mark.parametrize("allow_pickle", [None, True, False])
def test_pickle_free_data_loads_with_any_value(saved: Path, allow_pickle) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tdview.load_memmap(saved, allow_pickle=allow_pickle)["text"] == "hello"


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("swap", ["outside", "fifo"])
def test_a_leaf_file_the_store_refuses_is_an_error_with_its_reason(
    tmp_path: Path, swap: str
) -> None:
    """A leaf file swapped for a symlink out of the checkpoint, or for a FIFO: an error
    that says why (a model silently missing a weight is worse), not that it is missing;
    the index shows the same reason as the node's problem."""
    root = tmp_path / "ck"
    TensorDict(a=torch.arange(3.0), b=torch.ones(2)).memmap(root)
    (root / "a.memmap").unlink()
    secret = tmp_path / "secret"
    secret.write_bytes(b"\0" * 12)
    if swap == "outside":
        (root / "a.memmap").symlink_to(secret)
        reason = f"it resolves to {secret}, outside the checkpoint root"
    else:
        os.mkfifo(root / "a.memmap")
        reason = "not a regular file"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsafeCheckpointError) as raised:
            tdview.load_memmap(root)
    message = str(raised.value)
    assert f"leaf 'a' of {root}: the file {root / 'a.memmap'} cannot be read" in message
    assert reason in message and "missing" not in message and "tensordict" not in message
    with Checkpoint(root) as ckpt:
        assert reason in ckpt.node("a").problems[0]


def test_a_recorded_device_this_process_lacks(tmp_path: Path) -> None:
    """A checkpoint whose meta.json records cuda:0, read without CUDA: a clear error that
    says to pass device= (torch's own is an AssertionError); device="cpu" loads it."""
    root = tmp_path / "gpu"
    TensorDict(a=torch.ones(2), sub=TensorDict(b=torch.zeros(1))).memmap(root)
    meta = json.loads((root / "meta.json").read_text())
    (root / "meta.json").write_text(json.dumps({**meta, "device": "cuda:0"}))
    if torch.cuda.is_available():
        assert tdview.load_memmap(root).device == torch.device("cuda:0")
    else:
        with pytest.raises(
            DeviceUnavailableError,
            match=re.escape(
                f"{root}: the saved tensordict records device 'cuda:0', which this process "
                "cannot use"
            )
            + ".*Pass device='cpu'",
        ):
            tdview.load_memmap(root)
    loaded = tdview.load_memmap(root, device="cpu")
    assert loaded.device == torch.device("cpu") and loaded["sub", "b"].tolist() == [0.0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="loads there: test_cuda_device")
def test_an_asked_device_this_process_lacks(saved: Path) -> None:
    with pytest.raises(
        DeviceUnavailableError,
        match=re.escape(f"{saved}: device='cuda' was asked for, which this process cannot use"),
    ):
        tdview.load_memmap(saved, device="cuda")
    with Checkpoint(saved) as ckpt, pytest.raises(DeviceUnavailableError):
        ckpt.load_leaf("a", device="cuda:0")


def test_a_nested_tensordict_that_does_not_fit_its_parent(tmp_path: Path) -> None:
    root = tmp_path / "bs"
    TensorDict(
        a=torch.ones(5, 2), sub=TensorDict(b=torch.zeros(5, 3), batch_size=[5]), batch_size=[5]
    ).memmap(root)
    meta = json.loads((root / "sub" / "meta.json").read_text())
    meta["shape"], meta["b"]["shape"] = [3], [3, 3]
    (root / "sub" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(
        CheckpointFormatError,
        match=re.escape(
            f"{root / 'sub'}: 'sub' does not fit in its parent '<root>' (batch size [5])"
        ),
    ):
        tdview.load_memmap(root)
    assert tdview.load_memmap(root, subpath="sub").batch_size == (3,)


def test_a_folder_the_store_refuses_is_an_error_with_its_reason(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    TensorDict(a=torch.ones(1), sub=TensorDict(b=torch.ones(2))).memmap(root)
    outside = tmp_path / "elsewhere"
    shutil.move(root / "sub", outside)
    (root / "sub").symlink_to(outside)
    with pytest.raises(UnsafeCheckpointError) as raised:
        tdview.load_memmap(root)
    message = str(raised.value)
    assert f"'sub' of {root}: its folder {root / 'sub'} cannot be read" in message
    assert f"resolves to {outside}, outside the checkpoint root" in message
    assert "tensordict" not in message
    with Checkpoint(root) as ckpt:
        assert "cannot be read" in ckpt.node("sub").problems[0]


def _chain(path: Path, depth: int) -> Path:
    """An archive of ``depth`` TensorDicts nested one in the other, "a/a/.../x"."""
    import zipfile

    meta = {
        "shape": [],
        "device": "cpu",
        "_type": "<class 'tensordict._td.TensorDict'>",
        "_format_version": 1,
        "_class": "tensordict:TensorDict",
    }
    with zipfile.ZipFile(path, "w") as z:
        for level in range(depth):
            last = level == depth - 1
            entries = (
                {"x": {"device": "cpu", "shape": [1], "dtype": "torch.float32", "is_nested": False}}
                if last
                else {"a": {"type": "TensorDict"}}
            )
            z.writestr("a/" * level + "meta.json", json.dumps({**entries, **meta}))
        z.writestr("a/" * (depth - 1) + "x.memmap", torch.ones(1).numpy().tobytes())
    return path


def test_nesting_deeper_than_one_load_builds(tmp_path: Path) -> None:
    """As deep as Python's recursion limit leaves room for loads (about as deep as
    tensordict's loader goes); deeper is a clear error, not a RecursionError, a deeper
    part loads with subpath=, and a higher limit loads more."""
    import sys

    from tdview.loader._build import depth_room

    room = depth_room() - 5  # this test's own frames are a few below the loader's
    loaded = tdview.load_memmap(_chain(tmp_path / "ok.tdz", room))
    assert loaded[("a",) * (room - 1) + ("x",)].tolist() == [1.0]
    deep = _chain(tmp_path / "deep.tdz", 2 * room)
    with pytest.raises(
        LimitExceededError,
        match=re.escape(f"{deep}::a/a/") + ".*nested more "
        r"than \d+ tensordicts deep below the one being loaded, more than "
        r"Python's recursion limit",
    ):
        tdview.load_memmap(deep)
    part = tdview.load_memmap(deep, subpath=("a",) * room)
    assert part[("a",) * (room - 1) + ("x",)].tolist() == [1.0]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 4 * room)
    try:
        whole = tdview.load_memmap(deep)
    finally:
        sys.setrecursionlimit(limit)
    assert whole[("a",) * (2 * room - 1) + ("x",)].tolist() == [1.0]


def test_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ValueError) as info:
        tdview.load_memmap(tmp_path / "x.txt")
    assert isinstance(info.value, NotACheckpointError)
    with pytest.raises(FileNotFoundError, match="meta.json"):
        tdview.load_memmap(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="meta.json"):
        tdview.load_memmap(tmp_path / "empty")


def test_truncated_archive(saved: Path, tmp_path: Path) -> None:
    pack_memmap(saved, tmp_path / "t.tdz")
    data = (tmp_path / "t.tdz").read_bytes()
    (tmp_path / "t.tdz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError):
        tdview.load_memmap(tmp_path / "t.tdz")


def test_bad_crc_of_meta_json_is_an_error(saved: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.tdz"
    pack_memmap(saved, path)
    data = bytearray(path.read_bytes())
    at = Checkpoint(path).store.payload_offset("sub/meta.json")  # type: ignore[attr-defined]
    data[at + 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(tdview.errors.LeafDataError, match=r"sub/meta\.json.*CRC"):
        tdview.load_memmap(path)


def write_meta(folder: Path, **changes: Any) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(changes)
    (folder / "meta.json").write_text(json.dumps(meta))


def test_index_problems_are_raised(saved: Path) -> None:
    """The index records problems on their nodes; the loader raises those it needs."""
    write_meta(saved / "sub" / "deep", _format_version=2)
    with pytest.raises(UnsupportedFormatVersionError, match=r"deep/meta\.json.*version 2"):
        tdview.load_memmap(saved)
    tdview.load_memmap(saved, subpath="other")  # the broken node is not needed here
    (saved / "sub" / "deep" / "meta.json").write_text("[1, 2]")
    with pytest.raises(CheckpointFormatError, match=r"deep/meta\.json"):
        tdview.load_memmap(saved)
    (saved / "sub" / "deep" / "meta.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"deep/meta\.json"):
        tdview.load_memmap(saved)


def test_missing_collection_folder_is_left_out_with_a_warning(saved: Path) -> None:
    import shutil

    shutil.rmtree(saved / "other")
    with pytest.warns(UserWarning, match="'other'"):
        loaded = tdview.load_memmap(saved)
    assert "other" not in loaded.keys()
    assert list(loaded.keys()) == list(quiet(TensorDict.load_memmap, saved).keys())


def test_unknown_class(saved: Path) -> None:
    write_meta(saved / "other", _type="<class 'nowhere.Thing'>", _class="nowhere:Thing")
    with pytest.raises(
        RuntimeError,
        match=r"Could not find the class nowhere\.Thing saved in "
        + re.escape(str(saved / "other")),
    ):
        tdview.load_memmap(saved)


def test_a_class_named_in_the_checkpoint_is_never_imported(saved: Path) -> None:
    import sys

    assert "this" not in sys.modules  # importing it would print the Zen of Python
    write_meta(saved / "other", _type="<class 'this.Zen'>", _class="this:Zen")
    with pytest.raises(RuntimeError, match=r"Could not find the class this\.Zen"):
        tdview.load_memmap(saved)
    write_meta(saved / "pair", _type="<class 'this.Pair'>")
    with pytest.raises(RuntimeError, match=r"this\.Pair"):
        tdview.load_memmap(saved, subpath="pair")
    # its fields do not need the class (tensordict needs it to step into _tensordict)
    assert tdview.load_memmap(saved, subpath="pair/name").data == "p"
    assert "this" not in sys.modules


# -- Checkpoint.load, load_leaf -----------------------------------------------------------


def test_checkpoint_load_reuses_the_index(saved: Path, monkeypatch) -> None:
    ckpt = Checkpoint(saved)
    first = ckpt.load(allow_pickle=True)
    read: list[str] = []
    real = DirectoryStore.read_bytes
    monkeypatch.setattr(
        DirectoryStore,
        "read_bytes",
        lambda self, key, limit: read.append(key) or real(self, key, limit),
    )
    second = ckpt.load(allow_pickle=True)
    assert read == []  # no meta.json read again
    assert_same(second, first)
    assert torch.equal(ckpt.load("sub")["b"], torch.ones(2, 3))
    assert read == []


def test_loaded_values_share_nothing_with_the_index(tmp_path: Path) -> None:
    TensorDict(
        cfg=NonTensorData({"lr": [0.1]}),
        st=NonTensorStack(NonTensorData({"a": 1}), NonTensorData({"a": 2})),
    ).memmap(tmp_path / "v")
    ckpt = Checkpoint(tmp_path / "v")
    first = ckpt.load()
    first["cfg"]["lr"].append(9)
    first["st"].tolist()[0]["a"] = 7
    second = ckpt.load()
    assert second["cfg"] == {"lr": [0.1]} and second["st"].tolist() == [{"a": 1}, {"a": 2}]


def test_checkpoint_load_reports_progress(saved: Path) -> None:
    seen: list[tuple[str, ...]] = []
    Checkpoint(saved).load(progress=seen.append)
    assert ("a",) in seen and ("sub", "deep", "c") in seen and ("pair", "left") in seen
    assert len(seen) == 7


def test_load_leaf(saved: Path, tmp_path: Path) -> None:
    ckpt = Checkpoint(saved)
    leaf = ckpt.load_leaf(("sub", "b"))
    assert leaf._mode == "r" and torch.equal(leaf, torch.ones(2, 3))
    assert ckpt.load_leaf("pair/left").tolist() == [1.0, 1.0]
    assert ckpt.load_leaf("a", device="meta").device.type == "meta"
    with pytest.raises(SubpathError, match="not a tensor leaf"):
        ckpt.load_leaf("sub")
    with pytest.raises(SubpathError):
        ckpt.load_leaf("zz")
    pack_memmap(saved, tmp_path / "l.tdz", compression="deflate")
    assert torch.equal(Checkpoint(tmp_path / "l.tdz").load_leaf("a"), torch.arange(4.0))


def test_lookup_does_not_read_siblings(saved: Path, monkeypatch) -> None:
    ckpt = Checkpoint(saved)
    read: list[str] = []
    real = DirectoryStore.read_bytes
    monkeypatch.setattr(
        DirectoryStore,
        "read_bytes",
        lambda self, key, limit: read.append(key) or real(self, key, limit),
    )
    node = ckpt.node("sub/deep/c")
    assert node.is_leaf and read == ["sub/meta.json", "sub/deep/meta.json"]
    # children() later returns the very node lookup() made
    assert next(c for c in ckpt.children("sub") if c.key == "deep") is ckpt.node("sub/deep")


def test_load_is_load_memmap() -> None:
    assert tdview.load is tdview.load_memmap
    assert tdview.load_memmap.__doc__ and "Examples" in tdview.load_memmap.__doc__


# -- one request, checked once --------------------------------------------------------------

BAD_OPTIONS = [
    ({"mode": "w"}, ValueError, "mode must be 'r', 'r+' or None, got 'w'."),
    ({"allow_pickle": "yes"}, TypeError, "allow_pickle must be a bool or None."),
    ({"out": 3}, TypeError, "out must be a tensordict or a tensorclass instance, got int."),
    ({"num_threads": -1}, ValueError, "num_threads must be a non-negative int, got -1."),
    ({"num_threads": 2.0}, ValueError, "num_threads must be a non-negative int, got 2.0."),
    ({"device": "nowhere"}, RuntimeError, "nowhere"),
]


@pytest.mark.parametrize(("options", "error", "message"), BAD_OPTIONS)
def test_every_entry_point_checks_the_options_before_it_reads(
    saved: Path, tmp_path: Path, options: dict, error: type, message: str
) -> None:
    """One ``LoadRequest`` checks them: a bad option is its own error, before a missing
    checkpoint, a missing subpath or a folder of checkpoints is looked at."""
    shutil.copytree(saved, tmp_path / "run" / "step")
    folder = Checkpoint(tmp_path / "run")
    calls = [
        lambda: tdview.load_memmap(tmp_path / "missing", **options),
        lambda: Checkpoint(saved).load("zz", **options),
        lambda: folder.load("nowhere", **options),
        lambda: folder.load("step/zz", **options),
    ]
    if set(options) <= {"mode", "device"}:  # a leaf takes these two only
        calls += [
            lambda: Checkpoint(saved).load_leaf("zz", **options),
            lambda: folder.load_leaf("step/zz", **options),
        ]
    for call in calls:
        with pytest.raises(error, match=re.escape(message)):
            call()


def test_a_load_request_is_frozen_and_holds_a_torch_device() -> None:
    from tdview.loader import LoadRequest

    request = LoadRequest("sub", "cpu", mode="r", num_threads=2)
    assert request.device == torch.device("cpu") and request.subpath == "sub"
    assert not request.leaf and request.allow_pickle is None and request.progress is None
    with pytest.raises(AttributeError):
        request.mode = "r+"  # type: ignore[misc]
    with pytest.raises(ValueError, match="mode must be"):
        LoadRequest(mode="rw")


def test_a_folder_of_checkpoints_hands_the_request_to_its_member(
    saved: Path, tmp_path: Path
) -> None:
    shutil.copytree(saved, tmp_path / "run" / "step")
    folder = Checkpoint(tmp_path / "run")
    seen: list[tuple[str, ...]] = []
    sub = folder.load("step/sub", mode="r", progress=seen.append)
    assert torch.equal(sub["b"], torch.ones(2, 3)) and sub["b"]._mode == "r"
    assert seen == [("sub", "b"), ("sub", "deep", "c")]  # paths in the member
    assert folder.load_leaf("step/sub/b", device="meta").device.type == "meta"
    with pytest.raises(SubpathError, match="is a folder of checkpoints, not one tensordict"):
        folder.load()


def test_the_options_are_checked_in_one_place() -> None:
    """Only ``LoadRequest`` calls the option checks (ARCHITECTURE.md, "How a load runs")."""
    import ast

    checks = {"check_mode", "check_allow_pickle", "check_out", "check_index"}
    package = Path(tdview.__file__).parent
    callers = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for scope in ast.walk(tree):
            if not isinstance(scope, ast.FunctionDef):
                continue
            for node in ast.walk(scope):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) in checks:
                    callers.add((path.relative_to(package).as_posix(), scope.name))
    assert callers == {("loader/_api.py", "__new__")}


def test_load_memmap_keeps_tensordicts_signature() -> None:
    import inspect

    assert str(inspect.signature(tdview.load_memmap)) == (
        "(prefix: 'str | os.PathLike[str]', device: 'Any' = None, non_blocking: 'bool' = "
        "False, *, out: 'Any' = None, robust_key: 'bool | None' = None, subpath: 'Any' = "
        "None, mode: 'str | None' = None, num_threads: 'int' = 0, allow_pickle: "
        "'bool | None' = None, index: 'Any' = None) -> 'Any'"
    )
    names = list(inspect.signature(tdview.load_memmap).parameters)
    assert names == [
        "prefix",
        "device",
        "non_blocking",
        "out",
        "robust_key",
        "subpath",
        "mode",
        "num_threads",
        "allow_pickle",
        "index",  # tdview's own: load_memmap(...)[index], reading only those rows
    ]


def test_every_load_door_takes_the_options_and_defaults_of_the_request() -> None:
    """The options and their defaults are LoadRequest's; the doors users call spell the
    same names with the same defaults (their order is each door's own)."""
    import inspect

    from tdview.loader import LoadRequest

    defaults = LoadRequest._field_defaults
    assert LoadRequest() == tuple(defaults.values())
    for door in (tdview.load_memmap, Checkpoint.load, Checkpoint.load_leaf):
        params = inspect.signature(door).parameters
        options = {name: p.default for name, p in params.items() if name in defaults}
        assert set(params) - set(options) <= {"self", "prefix", "robust_key"}, door
        expected = {name: defaults[name] for name in options}
        if door is Checkpoint.load_leaf:
            expected["mode"] = "r"  # a leaf is mapped copy-on-write unless asked
            expected["subpath"] = inspect.Parameter.empty  # a leaf is named
        assert options == expected, door


def test_diff_takes_each_argument_once_by_name(tmp_path: Path) -> None:
    """tdview.diff.diff's signature is the one place its arguments are written: every one
    of them reaches the comparison (a subpath, a level and a tolerance given by name)."""
    import inspect

    a, b = tmp_path / "a", tmp_path / "b"
    TensorDict(x=TensorDict(w=torch.zeros(3))).memmap(a)
    TensorDict(x=TensorDict(w=torch.full((3,), 0.5))).memmap(b)
    from tdview.diff import diff

    params = inspect.signature(diff).parameters
    assert list(params)[:2] == ["a", "b"] and len(params) == 11
    close = diff(a, b, level="values", atol=1.0, subpath="x")
    assert close.level == "values" and close.equal
    apart = diff(a, b, level="values", subpath_a="x", subpath_b="x")
    assert not apart.equal and apart.subpath_a == ("x",)
