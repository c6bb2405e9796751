"""Proof of compatibility: tdview.load_memmap gives what tensordict's load_memmap gives.

A corpus of checkpoints (every node kind and reference dtype, keys that need encoding, dim
names, empty levels, 0-dim and nested tensors, tensorclasses with non-tensor fields,
NonTensorStacks as JSON and pickled, heterogeneous lazy stacks, legacy lazy views and
sub-tensordicts, json_types, and hand-written 0.3/0.4-era layouts), written by
tensordict's own writers in every container (directory, ``.tdz``, ``pack_memmap`` stored,
deflate, bzip2, lzma), is loaded by both on every device tdview supports here, and the two
results are compared by :func:`tests.compare.assert_same`.
"""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    pack_memmap,
    set_lazy_legacy,
    tensorclass,
)
from torch._subclasses import FakeTensorMode

import tdview
from tdview.storage import WINDOWS_PATHS

from .compare import assert_same
from .corpus import BUILDERS, CONTAINERS, write


@tensorclass
class Sample:
    """Tensor, nested tensorclass, optional and non-JSON fields."""

    obs: torch.Tensor
    note: str
    extra: Any = None
    child: Any = None


@tensorclass
class OldPoint:
    """The class of the hand-written 0.3/0.4-era tensorclass node."""

    pos: torch.Tensor
    label: str
    extra: Any = None


def tensorclass_fields() -> TensorDict:
    inner = Sample(obs=torch.arange(4.0).reshape(2, 2), note="inner", batch_size=[2])
    outer = Sample(
        obs=torch.ones(2, 3), note="outer", extra={"a", "b"}, child=inner, batch_size=[2]
    )
    return TensorDict(
        sample=outer,
        none_field=Sample(obs=torch.zeros(2), note="n", batch_size=[2]),
        typed=MetaData[str]("typed"),
        meta=MetaData({"lr": 0.1}),
        batch_size=[2],
    )


def stacks_more() -> TensorDict:
    lists = NonTensorStack(NonTensorData([1, 2]), NonTensorData([3, 4]))  # the quirk
    dicts = NonTensorStack(NonTensorData({"k": 1}), NonTensorData({"k": [2, 3]}))
    jagged = NonTensorStack(NonTensorData([1]), NonTensorData([2, 3]))
    member0 = TensorDict(a=torch.zeros(2), text=NonTensorData("m0"), batch_size=[2])
    member1 = TensorDict(
        a=torch.ones(2),
        deep=LazyStackedTensorDict(
            TensorDict(z=torch.zeros(2, 1), batch_size=[2]),
            TensorDict(z=torch.ones(2, 1), w=torch.ones(2), batch_size=[2]),
            stack_dim=1,
        ),
        batch_size=[2],
    )
    return TensorDict(
        lists=lists,
        dicts=dicts,
        jagged=jagged,
        hetero=LazyStackedTensorDict(member0, member1, stack_dim=0),
    )


def views_more() -> TensorDict:
    source = TensorDict(
        a=torch.arange(24.0).reshape(2, 3, 4),
        b=torch.arange(6).reshape(2, 3),
        batch_size=[2, 3],
        names=["x", "y"],
    )
    flat = TensorDict(c=torch.arange(6.0).reshape(1, 6), batch_size=[1, 6])
    with set_lazy_legacy(True):
        views = {
            "transposed": source.transpose(0, 1),
            "squeezed": flat.squeeze(0),
            "viewed": flat.view(2, 3),
            "unsq2": source.unsqueeze(-1),
        }
    views["sub_int"] = source._get_sub_tensordict(1)
    views["sub_bool"] = source._get_sub_tensordict(torch.tensor([True, False]))
    return TensorDict(views)


def names_and_levels() -> TensorDict:
    named = TensorDict(
        level=TensorDict(
            deeper=TensorDict(batch_size=[2, 0]),
            row=torch.tensor([1.5, 2.5]),
            batch_size=[2],
            names=["n"],
        ),
        both=TensorDict(v=torch.zeros(2, 3), batch_size=[2, 3], names=["n", "m"]),
        batch_size=[2],
        names=["n"],
    )
    return TensorDict(zero_dim=torch.tensor(7, dtype=torch.int16), named=named, empty=TensorDict())


def non_tensor_broadcast() -> TensorDict:
    """NonTensorData saved without a batch size below parents with one, a device, dim
    names: the load broadcasts each (dropping ``_metadata``, as tensordict does) or only
    moves it."""
    with_meta = NonTensorData(data={"x", "y"}, _metadata={"m": 1}, batch_size=[])
    plain = TensorDict(note=NonTensorData("text"), batch_size=[])
    plain["kept"] = NonTensorData(data=[1, 2], _metadata={"k": 2})
    return TensorDict(
        rows=TensorDict(tag=NonTensorData("row"), meta=with_meta, batch_size=[3]),
        named=TensorDict(tag=NonTensorData("n"), v=torch.zeros(3), batch_size=[3], names=["t"]),
        typed=TensorDict(kind=MetaData[str]("typed"), batch_size=[3]),
        on_cpu=TensorDict(note=NonTensorData("c"), batch_size=[3, 2], device="cpu"),
        plain=plain,
    )


def pytree() -> TensorDict:
    return TensorDict(
        tree=TensorDict.from_pytree(
            {"a": torch.ones(2), "b": [torch.zeros(1)], "c": (torch.ones(3),)}
        )
    )


def _write_json(path: Path, obj: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "meta.json").write_text(json.dumps(obj))


def _leaf(shape: list[int], dtype: str) -> dict:
    return {"device": "cpu", "shape": shape, "dtype": dtype}  # no "is_nested" before 0.5


def write_legacy(root: Path) -> Path:
    """A 0.4-era directory, by hand: no format version, raw names, old class paths."""
    td_type = "<class 'tensordict.tensordict.TensorDict'>"
    _write_json(
        root,
        {
            "obs": _leaf([2, 3], "torch.float32"),
            "a b": _leaf([2], "torch.int64"),
            "sub dir": {"type": "TensorDict"},
            "tc": {"type": "OldPoint"},
            "nd": {"type": "NonTensorData"},
            "ls": {"type": "LazyStackedTensorDict"},
            "nts": {"type": "NonTensorStack"},
            "shape": [2],
            "device": "cpu",
            "_type": td_type,
        },
    )
    torch.arange(6.0).numpy().tofile(root / "obs.memmap")
    torch.tensor([3, 4]).numpy().tofile(root / "a b.memmap")
    _write_json(
        root / "sub dir",
        {"x": _leaf([2], "torch.float64"), "shape": [2], "device": "cpu", "_type": td_type},
    )
    torch.tensor([0.5, 1.5], dtype=torch.float64).numpy().tofile(root / "sub dir" / "x.memmap")
    _write_json(root / "tc", {"_type": str(OldPoint), "label": "json-field"})
    (root / "tc" / "other.pickle").write_bytes(pickle.dumps({"extra": {1, 2}}))
    _write_json(
        root / "tc" / "_tensordict",
        {"pos": _leaf([2, 2], "torch.float32"), "shape": [2], "device": "cpu", "_type": td_type},
    )
    torch.ones(4).numpy().tofile(root / "tc" / "_tensordict" / "pos.memmap")
    _write_json(
        root / "nd", {"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": "v"}
    )
    _write_json(root / "nd" / "_tensordict", {"shape": [], "device": "cpu", "_type": td_type})
    _write_json(
        root / "ls", {"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0}
    )
    for i in range(2):
        _write_json(
            root / "ls" / str(i),
            {"y": _leaf([3], "torch.int32"), "shape": [], "device": "cpu", "_type": td_type},
        )
        torch.full((3,), i, dtype=torch.int32).numpy().tofile(root / "ls" / str(i) / "y.memmap")
    _write_json(
        root / "nts",
        {
            "_type": "<class 'tensordict.tensorclass.NonTensorStack'>",
            "stack_dim": 0,
            "device": "cpu",
            "data": ["p", "q"],
        },
    )
    return root


def write_legacy_03(root: Path) -> Path:
    """A 0.3-era node: nested tensordicts are folders that meta.json does not name."""
    td_type = "<class 'tensordict.tensordict.TensorDict'>"
    _write_json(
        root, {"a": _leaf([2], "torch.float32"), "shape": [2], "device": "cpu", "_type": td_type}
    )
    torch.ones(2).numpy().tofile(root / "a.memmap")
    _write_json(
        root / "old",
        {"b": _leaf([2], "torch.float32"), "shape": [2], "device": "cpu", "_type": td_type},
    )
    torch.zeros(2).numpy().tofile(root / "old" / "b.memmap")
    return root


EXTRA: dict[str, Callable[[], TensorDict]] = {
    "tensorclass_fields": tensorclass_fields,
    "stacks_more": stacks_more,
    "views_more": views_more,
    "names_and_levels": names_and_levels,
    "pytree": pytree,
    "non_tensor_broadcast": non_tensor_broadcast,
}
HANDWRITTEN = {"legacy_04": write_legacy, "legacy_03": write_legacy_03}
CASES = [*BUILDERS, *EXTRA, *HANDWRITTEN]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    root = tmp_path_factory.mktemp("load_corpus")
    made: dict[tuple[str, str], Path] = {}

    def get(name: str, container: str) -> Path:
        if (name, container) not in made:
            if name in HANDWRITTEN:
                directory = root / f"{name}.dir"
                if not directory.exists():
                    HANDWRITTEN[name](directory)
                path = directory
                if container != "dir":
                    path = root / f"{name}.{container}.zip"
                    compression = None if container in ("packed", "tdz") else container
                    pack_memmap(directory, path, compression=compression)
            else:
                builder = BUILDERS.get(name) or EXTRA[name]
                path = write(builder(), root, name, container)
            made[name, container] = path
        return made[name, container]

    return get


def reference(path: Path, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(path, allow_pickle=True, **kwargs)


def ours(path: Path, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tdview.load_memmap(path, allow_pickle=True, **kwargs)


@pytest.mark.parametrize("device", [None, "cpu", "meta"])
@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("name", CASES)
def test_same_as_tensordict(corpus, name: str, container: str, device: str | None) -> None:
    path = corpus(name, container)
    assert_same(ours(path, device=device), reference(path, device=device))


@pytest.mark.parametrize("container", ["dir", "tdz", "deflate"])
@pytest.mark.parametrize("name", ["plain_nested", "legacy_04", "tensorclass_fields"])
def test_same_with_mode_r(corpus, name: str, container: str) -> None:
    path = corpus(name, container)
    assert_same(ours(path, mode="r"), reference(path, mode="r"))


@pytest.mark.parametrize("container", ["dir", "tdz"])
@pytest.mark.parametrize(
    "subpath",
    [
        "nested",
        ("nested", "deeper"),
        "nested/deeper",
        "empty_level",
    ],
)
def test_same_subpath(corpus, container: str, subpath: Any) -> None:
    path = corpus("plain_nested", container)
    assert_same(ours(path, subpath=subpath), reference(path, subpath=subpath))


@pytest.mark.parametrize("container", ["dir", "lzma"])
@pytest.mark.parametrize(
    "name, subpath",
    [
        ("tensorclass_tree", "tc"),
        ("tensorclass_tree", ("tc", "inner")),
        ("tensorclass_tree", "tc/_tensordict/inner"),
        ("lazy_stacks", "ls/1"),
        ("lazy_stacks", "ls"),
        ("non_tensor", "text"),
        ("non_tensor", "grid"),
        ("tricky_keys", "sub dir"),
        ("tensorclass_fields", ("sample", "child")),
        ("legacy_04", "sub dir"),
        ("legacy_04", "tc"),
        ("legacy_views", "permuted"),
    ],
)
def test_same_subpath_everywhere(corpus, name: str, subpath: Any, container: str) -> None:
    path = corpus(name, container)
    assert_same(ours(path, subpath=subpath), reference(path, subpath=subpath))


@pytest.mark.parametrize("container", ["dir", "tdz", "bzip2"])
@pytest.mark.parametrize("name", ["plain_nested", "legacy_04", "legacy_03"])
def test_same_with_robust_key_false(corpus, name: str, container: str) -> None:
    path = corpus(name, container)
    assert_same(ours(path, robust_key=False), reference(path, robust_key=False))


@pytest.mark.skipif(WINDOWS_PATHS, reason="such names cannot be files on Windows")
@pytest.mark.parametrize("robust_key", [False, None])
@pytest.mark.parametrize("archive", [False, True])
def test_keys_with_backslash_or_colon_saved_raw(
    tmp_path: Path, archive: bool, robust_key: bool | None
) -> None:
    """tensordict saves such keys with robust_key=False under their raw names (a colon
    second, like a Windows drive; a backslash); they are names here, not paths."""
    td = TensorDict(
        {
            "a:b": torch.arange(3.0),
            "C:x": torch.ones(2),
            "a\\b": torch.zeros(4),
            "\\lead": torch.arange(2),
            "ok": torch.ones(1),
            "d:sub": TensorDict(v=torch.arange(5)),
        }
    )
    path = tmp_path / ("raw.tdz" if archive else "raw")
    if archive:
        td.save(path, robust_key=False)
    else:
        td.memmap(path, robust_key=False)
    got = ours(path, robust_key=robust_key)
    assert_same(got, reference(path, robust_key=robust_key))
    if robust_key is False:
        assert list(got.keys()) == list(td.keys())
        assert (got == td).all()


def test_robust_key_false_never_escapes_the_folder(corpus) -> None:
    """tensordict recurses forever on the collection ".." or "." with robust_key=False (it
    joins the raw key to the path); tdview leaves such keys out, with a warning."""
    path = corpus("tricky_keys", "dir")
    with pytest.warns(UserWarning):
        loaded = tdview.load_memmap(path, robust_key=False)
    # keys whose robust name is the key itself are found under their raw name
    assert {"ключ", "emoji😀", "x.memmap", "meta.json", "_class", "ключи"} <= set(loaded.keys())
    assert not {"a b", "..", ".", "sub dir"} & set(loaded.keys())


@pytest.mark.parametrize("container", ["dir", "deflate"])
@pytest.mark.parametrize(
    "name", ["plain_nested", "tensorclass_tree", "lazy_stacks", "legacy_views"]
)
def test_same_under_fake_tensor_mode(corpus, name: str, container: str) -> None:
    path = corpus(name, container)
    with FakeTensorMode():
        got, ref = ours(path), reference(path)
    assert_same(got, ref, values=False, storage=False)


@pytest.mark.parametrize("num_threads", [0, 4])
@pytest.mark.parametrize("container", ["deflate", "bzip2", "lzma"])
def test_same_with_threads(corpus, container: str, num_threads: int) -> None:
    path = corpus("dtypes", container)
    assert_same(ours(path, num_threads=num_threads), reference(path, num_threads=num_threads))


def test_legacy_03_subfolders_are_left_out_with_a_warning(corpus) -> None:
    path = corpus("legacy_03", "dir")
    with pytest.warns(UserWarning, match="old"):
        loaded = tdview.load_memmap(path)
    assert list(loaded.keys()) == ["a"] == list(reference(path).keys())


@pytest.mark.parametrize("device", [None, "meta"])
def test_non_tensor_metadata_dropped_by_a_broadcast(tmp_path: Path, device: str | None) -> None:
    """A NonTensorData whose meta.json records ``_metadata``, saved without a batch size
    below a parent with one: tensordict's broadcast makes a new one and drops it; below a
    parent without batch dims it is kept. tdview loads both as tensordict does."""
    path = tmp_path / "ckpt"
    non_tensor_broadcast().memmap(path)
    for folder in ("rows/meta", "plain/kept"):
        meta_file = path / folder / "meta.json"
        meta = json.loads(meta_file.read_text())
        meta["_metadata"] = {"edited": folder}
        meta_file.write_text(json.dumps(meta))
    got, ref = ours(path, device=device), reference(path, device=device)
    assert_same(got, ref)
    assert got["rows"]._tensordict["meta"]._metadata is None
    assert got["plain"]._tensordict["kept"]._metadata == {"edited": "plain/kept"}


@pytest.mark.parametrize("device", [None, "meta"])
def test_plain_folders_are_built_without_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str | None
) -> None:
    """A tree of plain TensorDict folders (batch sizes that match and that do not, a
    device recorded below a parent without one, a tensorclass deep inside, a folder
    removed) loads as tensordict loads it, and only the root and the nodes that are not
    plain TensorDicts are made into index nodes."""
    inner = Sample(obs=torch.ones(3, 2), note="deep", batch_size=[3])
    tree = TensorDict(
        {
            "a": torch.arange(3.0),
            "block": {
                "w": torch.ones(3, 4),
                "sub": TensorDict(x=torch.zeros(3, 2, 5), batch_size=[3, 2]),
                "cpu": TensorDict(y=torch.ones(3), batch_size=[3], device="cpu"),
                "sample": inner,
            },
            "gone": {"z": torch.ones(3)},
            "kept": {"deeper": {"deepest": {"v": torch.full((3,), 7.0)}}},
        },
        batch_size=[3],
    )
    path = tmp_path / "ckpt"
    tree.memmap(path)
    shutil.rmtree(path / "gone")
    made: list[tuple[str, ...]] = []
    from tdview.index import LoadAccess

    make = LoadAccess.make_collection

    def counted(self: Any, node_path: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(tuple(node_path))
        return make(self, node_path, *args, **kwargs)

    monkeypatch.setattr(LoadAccess, "make_collection", counted)
    with pytest.warns(UserWarning, match="'gone'.*folder"):
        got = tdview.load_memmap(path, device=device)
    assert_same(got, reference(path, device=device))
    assert "gone" not in got.keys()
    assert got["block", "sub"].batch_size == torch.Size([3, 2])
    assert got["block", "sample"].note == "deep"
    assert got["kept", "deeper", "deepest"]._memmap_prefix == path / "kept/deeper/deepest"
    # the root, the missing folder, the tensorclass (its inner folder, its string field)
    tensorclass = ("block", "sample")
    assert set(made) == {
        (),
        ("gone",),
        tensorclass,
        (*tensorclass, "_tensordict"),
        (*tensorclass, "note"),
    }
