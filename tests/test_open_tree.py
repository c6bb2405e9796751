"""One factory opens a path as a checkpoint or a folder of checkpoints; neither class is
the other, both answer the tree interface (``tdview.index.Tree``)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview.errors import NotACheckpointFolderError
from tdview.index import (
    Checkpoint,
    Collection,
    Located,
    Tree,
    is_folder,
    open_tree,
    rollup,
)

from .compare import assert_same

PACKAGE = Path(tdview.__file__).parent


def _saved(path: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    TensorDict(a=torch.randn(3), sub=TensorDict(b=torch.randn(2, 4))).memmap(path)
    return path


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    _saved(folder / "step_1", seed=1)
    TensorDict(a=torch.zeros(3)).memmap(folder / "step_2.tdz")  # an archive member
    (folder / "config.json").write_text('{"lr": 0.1}')
    return folder


def test_one_factory_opens_a_checkpoint_or_a_folder_of_them(run: Path) -> None:
    with open_tree(run / "step_1") as ckpt, open_tree(run) as folder:
        assert type(ckpt) is Checkpoint and type(folder) is Collection
        assert isinstance(ckpt, Tree) and isinstance(folder, Tree)
        assert not is_folder(ckpt) and is_folder(folder)
        assert [n.key for n in folder.children()] == ["config.json", "step_1", "step_2.tdz"]
    with open_tree(run / "step_2.tdz") as archive:
        assert type(archive) is Checkpoint and not is_folder(archive)
    # Checkpoint(path), for users, is the same door
    with Checkpoint(run) as again, Checkpoint(run / "step_1") as plain:
        assert type(again) is Collection and type(plain) is Checkpoint
    # a load refuses the folder as tensordict's load_memmap does, naming its checkpoints
    with pytest.raises(NotACheckpointFolderError, match="step_1, step_2.tdz"):
        open_tree(run, folders=False)
    with pytest.raises(FileNotFoundError):
        TensorDict.load_memmap(run)


def test_a_folder_of_checkpoints_is_no_checkpoint(run: Path) -> None:
    with open_tree(run) as folder, open_tree(run / "step_1") as alone:
        assert not isinstance(folder, Checkpoint)
        located = folder.locate("step_1/sub/b")
        assert isinstance(located, Located) and located.prefix == ("step_1",)
        member = located.owner
        assert type(member) is Checkpoint and member.path == alone.path
        assert located.inner == ("sub", "b") and alone.locate("sub/b") == (alone, (), ("sub", "b"))
        # the folder's own node is its own: owner is the folder
        assert folder.locate("config.json") == (folder, (), ("config.json",))
        # the member answers what the checkpoint opened alone answers
        assert member.node(located.inner).record == alone.node("sub/b").record
        assert rollup(member, member.root) == rollup(alone, alone.root)
        got = folder.load("step_1/sub", mode="r")
        leaf = folder.load_leaf("step_2.tdz/a")
    assert_same(got, TensorDict.load_memmap(run / "step_1", subpath="sub", mode="r"))
    assert torch.equal(leaf, TensorDict.load_memmap(run / "step_2.tdz")["a"])


def test_a_dangling_meta_json_is_a_broken_checkpoint_not_a_folder(tmp_path: Path) -> None:
    """A root whose ``meta.json`` is there but cannot be read (a link to nothing) is a
    checkpoint with that problem, as the reference fails on it, not a folder."""
    path = _saved(tmp_path / "ckpt")
    os.remove(path / "meta.json")
    os.symlink(tmp_path / "nowhere.json", path / "meta.json")
    with open_tree(path) as tree:
        assert type(tree) is Checkpoint and tree.root.problems
    with pytest.raises(FileNotFoundError):
        TensorDict.load_memmap(path)


def test_no_isinstance_of_collection_is_left_in_the_package() -> None:
    """A folder of checkpoints is told by its capability (``is_folder``) and answered
    through the tree interface, never by a class test."""
    found = []
    for file in PACKAGE.rglob("*.py"):
        for call in ast.walk(ast.parse(file.read_text())):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "isinstance"
                and "Collection"
                in {n.id for n in ast.walk(call.args[1]) if isinstance(n, ast.Name)}
            ):
                found.append(f"{file.relative_to(PACKAGE)}:{call.lineno}")
    assert found == []


def test_a_folder_of_checkpoints_is_listed_through_the_store(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collection lists each folder once, by the store's ``entries`` (a linked folder
    not followed), and tells a member by ``holds(folder, "meta.json")``."""
    (run / "linked").symlink_to(run / "step_1", target_is_directory=True)
    (run / "logs").mkdir()
    (run / "logs" / "events.json").write_text("[]")
    with open_tree(run) as folder:
        store = folder.store
        truth = {e.name: e.is_dir(follow_symlinks=False) for e in os.scandir(run)}
        entries, more = store.entries("", 100)
        assert not more and {n for n, _ in entries} == set(truth)
        kinds = dict(entries)
        assert kinds["linked"] == "linked dir" and kinds["step_1"] == "dir"
        assert kinds["config.json"] == kinds["step_2.tdz"] == "file"
        assert store.entries("", 2)[1] is True and len(store.entries("", 2)[0]) == 2
        assert store.holds("step_1", "meta.json") and not store.holds("logs", "meta.json")
        calls: list[str] = []
        listed = store.entries
        monkeypatch.setattr(store, "entries", lambda key, n: calls.append(key) or listed(key, n))
        assert [n.key for n in folder.children()] == [
            "config.json",
            "logs",
            "step_1",
            "step_2.tdz",
        ]
        folder.children("logs")
        folder.children()
        folder.children("logs")
        assert calls == ["", "logs"]
    # an archive's default listing: its central directory's names, folders told apart
    with open_tree(run / "step_2.tdz") as archive:
        names = dict(archive.store.entries("", 100)[0])
        assert names == {"meta.json": "file", "a.memmap": "file"}
        assert archive.store.holds("", "meta.json") and not archive.store.holds("", "b")
