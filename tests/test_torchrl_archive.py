"""torchrl's archive checkpoints (``torchrl.checkpoint.Checkpoint(kind="archive")``): a zip
of the component tree with no top-level ``meta.json``, opened as a folder of checkpoints,
like the folder it was zipped from.

Every file is written by torchrl's own ``Checkpoint.save``; the reference for a member is
tensordict's ``load_memmap`` of that member in the zip extracted to a folder (the layout
torchrl's ``kind="directory"`` writes), and ``json.load`` for the side files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, pack_memmap
from torch import nn

import tdview
from tdview.index import Checkpoint
from tdview.storage import ArchiveStore, open_store

from ._optional import require_module
from .compare import assert_same
from .remote_servers import RangeServer

torchrl_checkpoint = pytest.importorskip("torchrl.checkpoint")

POLICY = "components/0001-policy/state"
OPTIM = "components/0000-optim/state"


def _components() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    optim = torch.optim.Adam(model.parameters())
    model(torch.randn(5, 4)).sum().backward()
    optim.step()
    return model, optim


def _save(path: Path, *, kind: str, compression: str = "stored", tdz: bool = False) -> Path:
    model, optim = _components()
    kwargs = {"archive_compression": compression} if kind == "archive" else {}
    ckpt = torchrl_checkpoint.Checkpoint(format=kind, **kwargs)
    if tdz:  # the state as a .tdz inside the checkpoint
        adapter = torchrl_checkpoint.StateDictCheckpointAdapter(payload_format="archive")
        ckpt.register("policy", model, adapter=adapter)
        ckpt.register("config", {"lr": 0.1, "name": "ppo"})
    else:
        ckpt.register("optim", optim)
        ckpt.register("policy", model)
    ckpt.save(path)
    return path


def _extracted(path: Path, into: Path) -> Path:
    with zipfile.ZipFile(path) as archive:
        archive.extractall(into)
    return into


def _own(tree) -> list[tuple[tuple[str, ...], str]]:
    """The collection's own nodes (folders, members, side files), depth first."""
    out = []

    def visit(node) -> None:
        for child in tree.children(node):
            out.append((child.path, child.kind))
            if child.kind == "folder":
                visit(child)

    visit(tree.root)
    return out


@pytest.mark.parametrize("compression", ["stored", "deflate"])
def test_an_archive_opens_as_the_folder_it_was_zipped_from(
    tmp_path: Path, compression: str
) -> None:
    zipped = _save(tmp_path / "ckpt.zip", kind="archive", compression=compression)
    folder = _save(tmp_path / "ckpt-dir", kind="directory")
    with Checkpoint(zipped) as archive, Checkpoint(folder) as directory:
        assert type(archive).__name__ == "Collection"
        assert _own(archive) == _own(directory)
        assert (POLICY.split("/") and ("components", "0001-policy", "state"), "checkpoint") in _own(
            archive
        )
        reference = _extracted(zipped, tmp_path / "x")
        for member in (POLICY, OPTIM):
            got = archive.load(member)
            # tensordict's archive loader, on the member packed as tensordict packs one
            packed = pack_memmap(reference / member, tmp_path / f"{member.split('/')[1]}.tdz")
            ref = TensorDict.load_memmap(packed)
            assert_same(got, ref, storage=False)
        manifest = archive.side_value(archive.own_node(("manifest.json",)))
        assert manifest == json.loads((reference / "manifest.json").read_text())


def test_a_stored_members_leaves_are_views_of_the_archive(tmp_path: Path) -> None:
    zipped = _save(tmp_path / "ckpt.zip", kind="archive")
    size = zipped.stat().st_size
    with Checkpoint(zipped) as archive:
        td = archive.load(POLICY)
        member = archive.member(("components", "0001-policy", "state"))
        for key, leaf in td.items(True, True):
            span = member.store.stored_span(f"{key}.memmap")
            assert span is not None
            if span[0] % leaf.element_size() == 0:  # aligned: a view of the one mapping
                assert leaf.untyped_storage().nbytes() == size
                assert leaf.storage_offset() * leaf.element_size() == span[0]


@pytest.mark.parametrize("compression", ["stored", "deflate"])
def test_a_tdz_inside_the_archive_is_a_member(
    tmp_path: Path, compression: str, monkeypatch
) -> None:
    zipped = _save(tmp_path / "ckpt.zip", kind="archive", compression=compression, tdz=True)
    inflated: list[str] = []
    real = ArchiveStore.decompress
    monkeypatch.setattr(
        ArchiveStore,
        "decompress",
        lambda self, key, *a, **k: inflated.append(key) or real(self, key, *a, **k),
    )
    reference = _extracted(zipped, tmp_path / "x")
    with Checkpoint(zipped) as archive:
        kinds = dict(_own(archive))
        assert kinds[("components", "0001-policy", "state.tdz")] == "checkpoint"
        assert kinds[("components", "0000-config", "value.json")] == "json"
        got = archive.load("components/0001-policy/state.tdz")
        member = archive.member(("components", "0001-policy", "state.tdz"))
        # read in place when stored; decompressed (once) only when deflated
        assert member.store.mappable is (compression == "stored")
        outer = "components/0001-policy/state.tdz"
        assert (outer in inflated) is (compression == "deflate")
    ref = TensorDict.load_memmap(reference / "components/0001-policy/state.tdz", mode="r")
    assert_same(got, ref, storage=False)


def test_tree_command_lists_the_archive(tmp_path: Path) -> None:
    zipped = _save(tmp_path / "ckpt.zip", kind="archive")
    run = [sys.executable, "-m", "tdview", "tree", str(zipped), "--depth", "-1"]
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "manifest.json" in done.stdout and "0001-policy" in done.stdout
    assert "tensor_00000000" in done.stdout


def test_load_memmap_refuses_it_as_tensordict_does(tmp_path: Path) -> None:
    zipped = _save(tmp_path / "ckpt.zip", kind="archive")
    with pytest.raises(ValueError) as reference:
        TensorDict.load_memmap(zipped)
    assert "not a memory-mapped tensordict archive" in str(reference.value)
    with pytest.raises(ValueError) as ours:
        tdview.load_memmap(zipped)
    assert "0001-policy" in str(ours.value)  # it names the checkpoints it holds
    call = f"tdview.Checkpoint({str(zipped)!r}).load('components/0000-optim/state')"
    assert call in str(ours.value)  # and a call that loads one: it does
    assert eval(call, {"tdview": tdview}).keys()


def test_a_zip_holding_no_checkpoint_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes/readme.json", "{}")
    with pytest.raises(ValueError, match="top-level meta.json"):
        open_store(path)


def test_a_damaged_tdz_inside_is_a_problem_of_its_node(tmp_path: Path) -> None:
    path = tmp_path / "broken.zip"
    good = _save(tmp_path / "ckpt.zip", kind="archive")
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            out.writestr(info, src.read(info))
        out.writestr("components/0002-bad/state.tdz", b"PK not really a zip" * 3)
    with Checkpoint(path) as archive:
        assert len(_own(archive)) > 8  # the rest browses
        with pytest.raises(ValueError, match="state.tdz"):
            archive.load("components/0002-bad/state.tdz")
        node = archive.own_node(("components", "0002-bad", "state.tdz"))
        assert node is not None and any("state.tdz" in p for p in node.problems)


def test_over_http_the_archive_browses_and_a_member_loads(tmp_path: Path) -> None:
    """A zip of checkpoints served by ranges: listed from its central directory, a
    member read through it, a stored .tdz inside read from its entry."""
    require_module("aiohttp", "the HTTP store reads through it")
    _save(tmp_path / "dir.zip", kind="archive")
    _save(tmp_path / "tdz.zip", kind="archive", tdz=True)
    server = RangeServer(str(tmp_path))
    try:
        with (
            Checkpoint(f"{server.url}/dir.zip") as remote,
            Checkpoint(tmp_path / "dir.zip") as local,
        ):
            assert _own(remote) == _own(local)
            assert_same(remote.load(POLICY), local.load(POLICY), storage=False)
        with (
            Checkpoint(f"{server.url}/tdz.zip") as remote,
            Checkpoint(tmp_path / "tdz.zip") as local,
        ):
            member = "components/0001-policy/state.tdz"
            assert_same(remote.load(member), local.load(member), storage=False)
    finally:
        server.stop()


@pytest.mark.parametrize("tdz", [False, True])
def test_the_load_code_of_a_member_loads_it(tmp_path: Path, tdz: bool) -> None:
    """The widget's code line for a member of a zip names it ``<zip>::<key>`` (it has no
    path of its own), which load_memmap and Checkpoint open: the line loads the same."""
    from tdview.protocol import Session, handle

    zipped = _save(tmp_path / "ckpt.zip", kind="archive", tdz=tdz)
    member = ["components", "0001-policy", "state.tdz" if tdz else "state"]
    namespace: dict = {}
    with Checkpoint(zipped) as archive:
        session = Session(archive, str(zipped), namespace=namespace)
        for path, name in ((member, "sub"), ([*member, "tensor_00000001"], "leaf")):
            params = {"path": path, "variable": name, "device": "cpu", "mode": "r"}
            message = {"kind": "tdview:request", "v": 1, "id": 1, "method": "load"}
            reply, _ = handle(session, {**message, "params": {**params, "allow_pickle": False}})
            assert reply is not None and reply["ok"], reply["error"]
            code = reply["result"]["code"]
            assert f"{zipped}::{'/'.join(member)}" in code, code
            mine: dict = {"tdview": tdview}
            exec(code, mine)  # noqa: S102 - our own generated line, as a user pastes it
            got, bound = mine[name], namespace[name]
            if isinstance(bound, torch.Tensor):
                assert torch.equal(got, bound)
            else:
                assert_same(got, bound, storage=False)
