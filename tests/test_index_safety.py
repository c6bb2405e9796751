"""What the index never does (read payloads, unpickle, import, write), and how it reports
problems on the node they belong to instead of failing the whole tree."""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview.errors import UnsafeCheckpointError
from tdview.index import (
    Checkpoint,
    leaf_storage,
    needs_unpickling,
    pickle_info,
    rollup,
    search,
    size_problems,
    walk,
)
from tdview.storage import ArchiveStore


def visit_everything(ckpt: Checkpoint) -> None:
    """Every question the index answers, on every node."""
    rollup(ckpt, ckpt.root)
    search(ckpt, "a")
    for node in walk(ckpt, ckpt.root):
        ckpt.batch_size(node)
        if node.is_leaf:
            leaf_storage(ckpt.store, node)
            size_problems(ckpt.store, node)
        elif needs_unpickling(ckpt.store, node):
            pickle_info(ckpt.store, node)


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    files = [root] if root.is_file() else sorted(root.rglob("*"))
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in files}


@pytest.mark.parametrize("kind", ["directory", "archive"])
def test_never_reads_a_payload_byte(demo_paths, kind, monkeypatch) -> None:
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_os_open(path, *args, **kwargs)

    def refusing(method):
        def guarded(self, key, *args, **kwargs):
            assert not key.endswith(".memmap"), f"the index read the payload of {key}"
            return method(self, key, *args, **kwargs)

        return guarded

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    for name in ("payload", "raw_payload", "decompress", "verify"):
        monkeypatch.setattr(ArchiveStore, name, refusing(getattr(ArchiveStore, name)))
    with Checkpoint(demo_paths[kind]) as ckpt:
        visit_everything(ckpt)
    assert not [p for p in opened if p.endswith(".memmap")]


def test_never_unpickles_or_imports(tmp_path, monkeypatch) -> None:
    td = TensorDict(obj=TensorDict(x=torch.zeros(1)))
    td.memmap(tmp_path / "ckpt")
    # A NonTensorData whose pickle names a module that must never be imported.
    node = tmp_path / "ckpt" / "evil"
    node.mkdir()
    (node / "meta.json").write_text(
        json.dumps(
            {
                "_type": "<class 'tensordict.tensorclass.NonTensorData'>",
                "_metadata": None,
                "_is_non_tensor": True,
            }
        )
    )
    payload = b"\x80\x04\x95" + (0).to_bytes(8, "little")
    payload += b"\x8c\x0etdview_evil_xy\x94\x8c\x03run\x94\x93\x94)R\x94."
    (node / "other.pickle").write_bytes(payload)
    meta = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    meta = {"evil": {"type": "NonTensorData"}, **meta}
    (tmp_path / "ckpt" / "meta.json").write_text(json.dumps(meta))

    def refuse(*args, **kwargs):
        raise AssertionError("unpickled")

    imported: list[str] = []
    real_import = builtins.__import__

    def spy_import(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(builtins, "__import__", spy_import)
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        visit_everything(ckpt)
        evil = ckpt.node("evil")
        assert needs_unpickling(ckpt.store, evil)
        assert pickle_info(ckpt.store, evil).globals == (("tdview_evil_xy", "run"),)
    assert "tdview_evil_xy" not in sys.modules
    assert not [name for name in imported if "evil" in name]


@pytest.mark.parametrize("kind", ["directory", "archive"])
def test_read_only_checkpoint_is_left_untouched(demo_paths, tmp_path, kind) -> None:
    source = demo_paths[kind]
    copy = tmp_path / source.name
    (shutil.copytree if source.is_dir() else shutil.copy2)(source, copy)
    for path in [copy, *copy.rglob("*")] if copy.is_dir() else [copy]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    before = snapshot(copy)
    with Checkpoint(copy) as ckpt:
        visit_everything(ckpt)
    assert snapshot(copy) == before
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """A checkpoint with one problem per node and healthy siblings around each."""
    td = TensorDict(
        ok=torch.arange(4.0),
        missing=torch.ones(3),
        short=torch.ones(6),
        bad_json=TensorDict(x=torch.ones(1)),
        future=TensorDict(y=torch.ones(1)),
        gone=TensorDict(z=torch.ones(1)),
        fine=TensorDict(w=torch.ones(2)),
    )
    root = tmp_path / "ckpt"
    td.memmap(root)
    (root / "missing.memmap").unlink()
    (root / "short.memmap").write_bytes(b"\0" * 10)
    (root / "bad_json" / "meta.json").write_text("{not json")
    meta = json.loads((root / "future" / "meta.json").read_text())
    (root / "future" / "meta.json").write_text(json.dumps({**meta, "_format_version": 2}))
    shutil.rmtree(root / "gone")
    return root


def test_problems_are_reported_on_their_own_nodes(damaged: Path) -> None:
    with Checkpoint(damaged) as ckpt:
        problems = {
            n.key: n.problems + (size_problems(ckpt.store, n) if n.is_leaf else [])
            for n in ckpt.children()
        }
        assert problems["ok"] == [] and problems["fine"] == []
        assert "missing.memmap is missing" in problems["missing"][0]
        assert "10 bytes" in problems["short"][0] and "24 bytes" in problems["short"][0]
        assert "bad_json/meta.json" in problems["bad_json"][0]
        assert "format version 2" in problems["future"][0]
        assert "'gone'" in problems["gone"][0]
        assert ckpt.children("fine")[0].record.shape == (2,)
        # Rollups count the problems the metadata shows; sizes are checked per leaf.
        assert rollup(ckpt, ckpt.root).problems == 4


def test_symlink_loops_end_as_problems(tmp_path: Path) -> None:
    """A folder linked to the root, and two folders linked to each other: the trees they
    make never end (tensordict recurses until it fails). The index shows each loop as a
    problem of its node and walks the rest; the loader refuses the key with the loop."""
    root = tmp_path / "ckpt"
    TensorDict(
        a=torch.arange(4.0),
        sub=TensorDict(s=torch.ones(1)),
        p=TensorDict(l=TensorDict(x=torch.ones(1))),
        q=TensorDict(m=TensorDict(x=torch.ones(1))),
    ).memmap(root)
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(".")
    # p/l and q/m: each the other's parent (p/l/m is q/m/... is p/...)
    shutil.rmtree(root / "p" / "l")
    shutil.rmtree(root / "q" / "m")
    (root / "p" / "l").symlink_to(root / "q")
    (root / "q" / "m").symlink_to(root / "p")
    with Checkpoint(root) as ckpt:
        visit_everything(ckpt)  # ends
        problems = {"/".join(n.path): n.problems for n in walk(ckpt, ckpt.root) if n.problems}
        assert "symlink loop" in problems["sub"][0] and "'sub'" in problems["sub"][0]
        assert rollup(ckpt, ckpt.root).leaves == 1  # "a"; the loops hold no leaf
        assert all("symlink loop" in p[0] for p in problems.values()), problems
        assert set(problems) == {"sub", "p/l/m", "q/m/l"}
    with pytest.raises(UnsafeCheckpointError, match=r"'sub' resolves to .* \(a symlink loop\)"):
        tdview.load_memmap(root)


def test_archive_entry_with_a_bad_local_header_is_a_leaf_problem(tmp_path: Path) -> None:
    path = tmp_path / "x.tdz"
    TensorDict(a=torch.zeros(4), b=torch.ones(4)).save(str(path))
    with ArchiveStore(path) as store:
        at = store._central("a.memmap").header_offset  # test-only peek
    data = bytearray(path.read_bytes())
    data[at : at + 4] = b"XXXX"
    path.write_bytes(bytes(data))
    with Checkpoint(path) as ckpt:
        a, b = ckpt.children()
        assert "a.memmap" in size_problems(ckpt.store, a)[0]
        assert size_problems(ckpt.store, b) == []


def test_tree_command(demo_paths) -> None:
    run = [sys.executable, "-m", "tdview", "tree", str(demo_paths["archive"])]
    out = subprocess.run(
        run + ["model", "--depth", "-1", "--filter", "head"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines()[0].startswith("model  TensorDict")
    assert "head  TensorDict" in out and "weight  float32  [512, 64]  131 KB" in out
    assert "layers" not in out
    top = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "tags  NonTensorData  batch []  pickled 56 B (imports nothing): unpickled only" in top
    assert "replay  TensorDict  batch [1000]" in top
    bad = subprocess.run(run + ["nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "has no key 'nope'" in bad.stderr


def test_tree_lines_are_drawn_alike_by_the_command_and_the_static_view(tmp_path: Path) -> None:
    """The command line and the notebook's static text draw the same rows the same way:
    connectors by last sibling, a row for the children left out of a long level."""
    from tdview.views._html import render_text, rows
    from tdview.views._tree import TreeOptions, render_tree

    td = TensorDict(
        a=TensorDict(x=torch.ones(2), y=TensorDict(z=torch.ones(1))),
        b=torch.zeros(3),
        c=TensorDict({f"k{i}": torch.ones(1) for i in range(4)}),
    )
    td.memmap(tmp_path / "ckpt")
    with Checkpoint(tmp_path / "ckpt") as ckpt:
        lines = list(render_tree(ckpt, ckpt.root, TreeOptions(depth=None, limit=3, rollups=False)))
        keys = [_drawn_key(line) for line in lines[1:]]
        assert keys == [
            "├── b",
            "├── a",
            "│   ├── x",
            "│   └── y",
            "│       └── z",
            "└── c",
            "    ├── k0",
            "    ├── k1",
            "    ├── k2",
            "    └── … 1 more",
        ]
        static = render_text("ckpt", list(rows(ckpt, depth=3, limit=3))).splitlines()[1:]
    assert [_drawn_key(line) for line in static] == keys


def _drawn_key(line: str) -> str:
    """A drawn row up to its key (the description that follows differs by view)."""
    found = re.match(r"[│ ]*[├└]── (?:… \d+ more|\S+)", line)
    assert found, line
    return found.group(0)
