"""What a user sees of an open checkpoint: its own methods, not the loader's doors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview.errors import SubpathError
from tdview.index import Checkpoint, load_access, resolve_subpath

#: The doors a load goes through (tdview.index.LoadAccess), which a checkpoint once showed.
LOADER_HOOKS = {
    "kept_meta",
    "folder_meta",
    "folder_items",
    "load_items",
    "load_fields",
    "collection_node",
    "leaf_node",
    "descend",
    "make_collection",
    "inner",
    "walks_folders",
}


def _saved(path: Path) -> Path:
    TensorDict(a=torch.arange(3.0), sub=TensorDict(b=torch.ones(2))).memmap(path)
    return path


def test_a_checkpoint_shows_no_loader_hook(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    _saved(folder / "step_1")
    with Checkpoint(_saved(tmp_path / "ckpt")) as ckpt, Checkpoint(folder) as collection:
        for opened in (ckpt, collection):
            assert LOADER_HOOKS.isdisjoint(dir(opened)), type(opened).__name__
            # the user's doors are all there
            assert {"load", "load_leaf", "node", "children", "page"} <= set(dir(opened))


def test_the_loader_reaches_the_index_through_its_access(tmp_path: Path) -> None:
    path = _saved(tmp_path / "ckpt")
    with Checkpoint(path) as ckpt:
        access = load_access(ckpt)
        # the subpath's fast way down is the resolver's (tdview.index.resolve_subpath)
        assert LOADER_HOOKS - {"descend"} <= set(dir(access))
        node = resolve_subpath(ckpt, ("sub",))
        assert node is not None and node.path == ("sub",)
        assert access.kept_meta("sub") is node.meta  # the checkpoint's own cache
        assert [item.key for item in access.load_items(ckpt.root)] == ["a", "sub"]
        assert ckpt.load("sub")["b"].tolist() == [1.0, 1.0]
    assert tdview.load_memmap(path)["a"].tolist() == [0.0, 1.0, 2.0]


def test_one_resolver_answers_a_subtree_and_a_leaf(tmp_path: Path) -> None:
    path = _saved(tmp_path / "ckpt")
    with Checkpoint(path) as ckpt:
        assert resolve_subpath(ckpt, None) is ckpt.root
        assert resolve_subpath(ckpt, "sub/b", leaf=True).path == ("sub", "b")
        with pytest.raises(SubpathError, match="'sub/b' .*it is a tensor leaf"):
            resolve_subpath(ckpt, "sub/b")
        with pytest.raises(SubpathError, match="'sub' in .* is a tensordict, not a tensor leaf"):
            resolve_subpath(ckpt, "sub", leaf=True)
        with pytest.raises(SubpathError, match="has no entry 'zz'"):
            resolve_subpath(ckpt, ("sub", "zz"))
        # the loads go through it: the same errors
        with pytest.raises(SubpathError, match="it is a tensor leaf"):
            ckpt.load("sub/b")
        with pytest.raises(SubpathError, match="not a tensor leaf"):
            ckpt.load_leaf("sub")


def test_a_checkpoint_and_a_folder_of_them_share_locate_and_total(tmp_path: Path) -> None:
    from tdview.index import rollup

    folder = tmp_path / "run"
    _saved(folder / "step_1")
    with Checkpoint(_saved(tmp_path / "ckpt")) as ckpt, Checkpoint(folder) as collection:
        assert ckpt.locate("sub/b") == (ckpt, (), ("sub", "b"))
        assert ckpt.locate() == (ckpt, (), ())
        member, prefix, inner = collection.locate("step_1/sub")
        assert (prefix, inner) == (("step_1",), ("sub",)) and member is not collection
        assert member.node(inner).path == ("sub",)
        for tree in (ckpt, collection):
            total = tree.total(tree.root)
            assert rollup(tree, tree.root) is total and total.leaves == 2
        assert rollup(ckpt, ckpt.node("sub/b")).leaves == 1
