"""The index agrees with what tensordict loads, on every node kind, dtype and container."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDictBase
from tensordict import TensorDict as RefTensorDict
from tensordict.tensorclass import NonTensorDataBase, is_tensorclass

from tdview.index import (
    LAZY_STACK,
    LEAF,
    NON_TENSOR,
    NON_TENSOR_STACK,
    TENSORCLASS,
    Checkpoint,
    needs_unpickling,
    rollup,
    search,
    walk,
)
from tdview.index._facts import pickle_key

from .corpus import BUILDERS, CONTAINERS, EXTRA_DTYPES, dtypes, write


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus")


def reference(path: Path) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RefTensorDict.load_memmap(path, device="meta", allow_pickle=True)


def same_value(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def assert_matches(ckpt: Checkpoint, node, obj) -> None:  # one branch per kind
    where = "/".join(node.path) or "<root>"
    if isinstance(obj, torch.Tensor):
        assert node.kind == LEAF, where
        assert node.record.dtype.name == str(obj.dtype), where
        assert tuple(node.record.shape) == tuple(obj.shape), where
        return
    if isinstance(obj, NonTensorDataBase):
        assert node.kind == NON_TENSOR, where
        assert node.class_name == type(obj).__name__, where
        if node.has_value:
            assert same_value(node.value, obj.data), where
        else:
            assert needs_unpickling(ckpt.store, node), where
        return
    if isinstance(obj, NonTensorStack):
        assert node.kind == NON_TENSOR_STACK, where
        assert node.has_value != needs_unpickling(ckpt.store, node), where
        # A pickled stack's shape is inside the pickle: unknown to a metadata reader.
        expected = tuple(obj.batch_size) if node.has_value else None
        assert ckpt.batch_size(node) == expected, where
        return
    if isinstance(obj, LazyStackedTensorDict):
        assert node.kind == LAZY_STACK, where
        assert ckpt.batch_size(node) == tuple(obj.batch_size), where
        members = ckpt.children(node)
        assert len(members) == len(obj.tensordicts), where
        for member, sub in zip(members, obj.tensordicts, strict=True):
            assert_matches(ckpt, member, sub)
        return
    if is_tensorclass(obj):
        assert node.kind == TENSORCLASS, where
        assert node.class_name == type(obj).__name__, where
        assert ckpt.batch_size(node) == tuple(obj.batch_size), where
        obj = obj._tensordict
    else:
        assert isinstance(obj, TensorDictBase), where
        assert node.class_name == type(obj).__name__, where
    if hasattr(obj, "_source") and node.kind != TENSORCLASS:  # legacy views
        (source,) = ckpt.children(node)
        assert_matches(ckpt, source, obj._source)
        return
    assert ckpt.batch_size(node) == tuple(obj.batch_size), where
    names = ckpt.names(node) or (None,) * len(obj.batch_size)
    assert list(names) == list(obj.names), where
    children = ckpt.children(node)
    assert [c.key for c in children] == list(obj.keys()), where
    for child in children:
        assert_matches(ckpt, child, obj.get(child.key))


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_index_agrees_with_tensordict(corpus_root: Path, name: str, container: str) -> None:
    torch.manual_seed(0)
    path = write(BUILDERS[name](), corpus_root, name, container)
    with Checkpoint(path) as ckpt:
        assert_matches(ckpt, ckpt.root, reference(path))
        assert not [n.problems for n in walk(ckpt, ckpt.root) if n.problems]


def walked_rollup(ckpt: Checkpoint, top) -> tuple:
    """The totals of ``top`` added up node by node over :func:`walk` (every child a node);
    a node whose load unpickles adds its pickle file's size and counts one pickle."""
    nbytes = numel = leaves = pickles = pickle_bytes = 0
    problems = len(top.problems)
    by_dtype: dict[str, int] = {}
    for node in [top, *walk(ckpt, top)]:
        if not node.is_leaf and needs_unpickling(ckpt.store, node):
            size = ckpt.store.entry(pickle_key(node)).size
            nbytes, pickles, pickle_bytes = nbytes + size, pickles + 1, pickle_bytes + size
        if node is top:
            continue
        if node.is_leaf:
            own = rollup(ckpt, node)  # a leaf's own totals, its problems included
            nbytes, numel, leaves = nbytes + own.bytes, numel + own.numel, leaves + 1
            problems += own.problems
            for name, size in own.by_dtype.items():
                by_dtype[name] = by_dtype.get(name, 0) + size
        else:
            problems += len(node.problems)
    return nbytes, numel, leaves, by_dtype, problems, pickles, pickle_bytes


def totals(total) -> tuple:
    return (
        total.bytes,
        total.numel,
        total.leaves,
        total.by_dtype,
        total.problems,
        total.pickles,
        total.pickle_bytes,
    )


@pytest.mark.parametrize("container", ["dir", "tdz"])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rollup_equals_the_sum_over_every_node(
    corpus_root: Path, name: str, container: str
) -> None:
    """A rollup totals plain TensorDict folders without making their child nodes: it
    agrees with the node-by-node sum, at the root and at every collection, whether it is
    asked before or after the nodes exist."""
    torch.manual_seed(0)
    path = write(BUILDERS[name](), corpus_root, name, container)
    with Checkpoint(path) as walked, Checkpoint(path) as fresh:
        collections = [n for n in walk(walked, walked.root) if not n.is_leaf]
        assert totals(rollup(fresh, fresh.root)) == walked_rollup(walked, walked.root)
        for node in collections:
            expected = walked_rollup(walked, node)
            assert totals(rollup(walked, node)) == expected, node.path
            # the first checkpoint made no node of this path: its folder's rollup serves
            assert totals(rollup(fresh, fresh.node(node.path))) == expected, node.path


def test_rollup_of_a_damaged_tree_equals_the_sum_over_every_node(tmp_path: Path) -> None:
    td = RefTensorDict(
        a=torch.ones(3),
        gone=torch.ones(2),
        nested=torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(4, 3)]),
        sub=RefTensorDict(x=torch.ones(5, dtype=torch.int16), lost=RefTensorDict(y=torch.ones(1))),
        bad=RefTensorDict(z=torch.ones(1)),
    )
    root = tmp_path / "ckpt"
    td.memmap(root)
    (root / "gone.memmap").unlink()
    (root / "bad" / "meta.json").write_text("{")
    for path in (root / "sub" / "lost").iterdir():
        path.unlink()
    (root / "sub" / "lost").rmdir()
    with Checkpoint(root) as walked, Checkpoint(root) as fresh:
        expected = walked_rollup(walked, walked.root)
        assert expected[4] == 3  # the missing file, the unreadable meta.json, the lost folder
        assert totals(rollup(fresh, fresh.root)) == expected
        assert totals(rollup(fresh, fresh.node("sub"))) == walked_rollup(walked, walked.node("sub"))


def test_identical_meta_files_are_parsed_once(tmp_path: Path) -> None:
    layer = {"w": torch.ones(4, 2), "b": torch.zeros(2)}
    td = RefTensorDict(
        layers=RefTensorDict({str(i): RefTensorDict(layer) for i in range(4)}),
        other=RefTensorDict(w=torch.ones(3)),
    )
    td.memmap(tmp_path / "ckpt")
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        metas = [ckpt.node(f"layers/{i}").meta for i in range(4)]
        assert all(meta is metas[0] for meta in metas)  # one parse, shared
        assert ckpt.node("other").meta is not metas[0]
        assert [c.path for c in ckpt.children("layers/2")] == [
            ("layers", "2", "w"),
            ("layers", "2", "b"),
        ]
        assert ckpt.node("layers/3/w").file == "layers/3/w.memmap"


@pytest.mark.parametrize("container", ["dir", "packed", "deflate"])  # save() reloads: fails
def test_dtypes_the_reference_cannot_load(corpus_root: Path, container: str) -> None:
    path = write(dtypes(EXTRA_DTYPES), corpus_root, "extra_dtypes", container)
    with Checkpoint(path) as ckpt:
        got = {n.key: (n.record.dtype.name, n.record.shape) for n in ckpt.children()}
    assert got == {name: (f"torch.{name}", (2, 3)) for name in EXTRA_DTYPES}


def test_rollup_counts_every_leaf(demo_paths: dict[str, Path]) -> None:
    # The demo has no nested or empty leaves and no stale files: one file per leaf.
    files = list(demo_paths["directory"].rglob("*.memmap"))
    with Checkpoint(demo_paths["archive"]) as ckpt:
        total = rollup(ckpt, ckpt.root)
        assert total.leaves == len(files)
        assert total.pickles == 1  # the demo's one pickled value: its file, not a leaf
        assert total.bytes == sum(f.stat().st_size for f in files) + total.pickle_bytes
        assert sum(total.by_dtype.values()) + total.pickle_bytes == total.bytes
        replay = rollup(ckpt, ckpt.node("replay"))
        assert replay.by_dtype["torch.bfloat16"] == 1_000 * 2
        assert rollup(ckpt, ckpt.node("replay")) is replay  # cached


def test_search_substring_and_glob(demo_paths: dict[str, Path]) -> None:
    with Checkpoint(demo_paths["directory"]) as ckpt:
        matches, truncated = search(ckpt, "EXP_AVG_SQ", limit=1000)
        assert not truncated and len(matches) == 28
        assert all(path[-1] == "exp_avg_sq" for path in matches)
        heads, _ = search(ckpt, "model/head/*")
        assert heads == [("model", "head", "weight")]
        few, truncated = search(ckpt, "weight", limit=3)
        assert len(few) == 3 and truncated


def test_paging_and_subpath_forms(demo_paths: dict[str, Path]) -> None:
    with Checkpoint(demo_paths["archive"]) as ckpt:
        page = ckpt.page("optimizer/state", offset=1, limit=2)
        everything = [c.key for c in ckpt.children(("optimizer", "state"))]
        assert page.total == len(everything) and [c.key for c in page.items] == everything[1:3]
        assert ckpt.node((("model",), "head")) is ckpt.node("model/head")
        # A tensorclass is reached as obj.get(key) does, and through _tensordict.
        assert ckpt.node("rollout/observation").record.shape == (3, 8)
        assert ckpt.node("rollout/_tensordict/observation").record.shape == (3, 8)
        assert ckpt.node("episodes/1/observation").record.shape == (9, 4)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_child_counts_without_reading_children(corpus_root: Path, name: str) -> None:
    torch.manual_seed(0)
    path = write(BUILDERS[name](), corpus_root, name, "dir")
    with Checkpoint(path) as walked, Checkpoint(path) as fresh:
        for node in [walked.root, *walk(walked, walked.root)]:
            if not node.is_leaf:
                untouched = fresh.node(node.path)
                assert fresh.count_children(untouched) == len(walked.children(node)), node.path


def test_a_level_of_more_folders_than_the_listing_budget_is_listed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listings kept are bounded; the parent of the folder being listed must stay
    among them, or a level holding more names than the budget is listed again for each
    of its sub-folders (quadratic: a level of 100,000 folders never finished)."""
    from tdview.storage import _names

    RefTensorDict({f"m{i:03d}": RefTensorDict(w=torch.ones(1)) for i in range(200)}).memmap(
        tmp_path / "ck"
    )
    monkeypatch.setattr(_names, "_HELD_NAMES", 50)  # fewer names than the level holds
    scans: list[str] = []
    real_scan = _names.scan
    monkeypatch.setattr(
        _names, "scan", lambda real, dirkey: scans.append(dirkey) or real_scan(real, dirkey)
    )
    with Checkpoint(tmp_path / "ck") as ckpt:
        assert rollup(ckpt, ckpt.root).leaves == 200
        assert len(list(walk(ckpt, ckpt.root))) == 400
    assert scans.count("") == 1
    assert len(scans) <= 201 + 200  # each folder at most twice (walk after rollup)


def test_looking_up_stack_members_one_after_the_other_stays_linear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Member i exists when folders 0..i do: members found before need no check again
    (each lookup checked every folder before it: 40 s for 10,000 members)."""
    from tdview.storage import DirectoryStore

    members = [RefTensorDict(x=torch.full((1,), float(i))) for i in range(60)]
    LazyStackedTensorDict(*members, stack_dim=0).memmap(tmp_path / "s")
    probes: list[str] = []
    real = DirectoryStore.is_dir
    monkeypatch.setattr(
        DirectoryStore, "is_dir", lambda self, key: probes.append(key) or real(self, key)
    )
    with Checkpoint(tmp_path / "s") as ckpt:
        for i in range(60):
            assert ckpt.node(str(i)).path == (str(i),)
        assert ckpt.lookup(ckpt.root, "60") is None
    member_probes = [key for key in probes if key.isdigit()]
    assert len(member_probes) <= 2 * 61, len(member_probes)


def test_a_tensordict_node_finds_an_entry_by_key() -> None:
    from tdview.format import parse_node

    meta = {
        "b": {"type": "TensorDict"},
        "a": {"device": "cpu", "shape": [2], "dtype": "torch.float32", "is_nested": False},
        "shape": [],
        "device": "cpu",
        "_type": "<class 'tensordict._td.TensorDict'>",
        "_format_version": 1,
        "_class": "tensordict:TensorDict",
    }
    node = parse_node(meta, "meta.json")
    assert [e.key for e in node.entries] == ["b", "a"]
    assert node.entry("a") is node.entries[1] and node.entry("b") is node.entries[0]
    assert node.entry("shape") is None and node.entry("zz") is None
