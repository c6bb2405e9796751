"""The walk through descriptors (``loader/_walk.py``, ``storage/_folder_walk.py``): a tree
of plain TensorDict folders is loaded folder by folder, with no probe by key, and
everything the walk does not take (a symlink, a missing, short or refused file, a nested
leaf, another kind of folder) goes the general way with its results, warnings and
errors. Each load is compared with tensordict's on the same files.
"""

from __future__ import annotations

import errno
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict, tensorclass

import tdview
from tdview.errors import LeafDataError, UntrustedLinkError
from tdview.loader import _walk
from tdview.storage import DirectoryStore, FolderWalk, _folder_walk

from .compare import assert_same

pytestmark = pytest.mark.skipif(
    not hasattr(os, "O_PATH") or not sys.platform.startswith("linux"),
    reason="the walk holds folders open with O_PATH (Linux)",
)


@tensorclass
class Pair:
    left: torch.Tensor
    right: torch.Tensor


def _tree(path: Path, layers: int = 4) -> Path:
    """A module-shaped tree: one folder per module, a leaf or two each, distinct shapes."""
    TensorDict(
        model=TensorDict(
            {
                str(i): TensorDict(
                    attn=TensorDict(q=torch.randn(3, i + 1), k=torch.arange(float(i + 2))),
                    norm=TensorDict(weight=torch.ones(i + 2), empty=torch.ones(0, 2)),
                )
                for i in range(layers)
            }
        ),
        step=torch.tensor(7),
    ).memmap(path)
    return path


def _reference(path: Path, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TensorDict.load_memmap(path, **kwargs)


@pytest.fixture
def by_key(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of the store's per-key probes, folder reads and leaf opens."""
    counts = {"probe": 0, "read_folder_meta": 0, "open_leaf": 0}
    for name, method in (
        ("probe", "_probe_name"),
        ("read_folder_meta", "read_folder_meta"),
        ("open_leaf", "open_leaf"),
    ):
        real = getattr(DirectoryStore, method)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name) -> Any:
            counts[_name] += 1
            return _real(self, *args)

        monkeypatch.setattr(DirectoryStore, method, counted)
    return counts


@pytest.mark.parametrize("device", [None, "meta"])
def test_a_tree_of_plain_folders_is_walked_without_a_probe_by_key(
    tmp_path: Path, by_key: dict[str, int], device: str | None
) -> None:
    path = _tree(tmp_path / "ckpt")
    loaded = tdview.load_memmap(path, device=device)
    assert by_key == {"probe": 0, "read_folder_meta": 0, "open_leaf": 0}
    assert_same(loaded, _reference(path, device=device), values=device is None)
    attn = loaded["model", "3", "attn"]
    assert attn._memmap_prefix == path / "model" / "3" / "attn"
    if device is None:
        q = attn["q"]
        assert q.filename == str(path / "model" / "3" / "attn" / "q.memmap")
        assert torch.equal(q, _reference(path)["model", "3", "attn", "q"])


def test_a_walked_leaf_is_mapped_as_its_mode_asks(tmp_path: Path) -> None:
    """Shared (writes reach the file) by default and with ``"r+"``; copy-on-write with
    ``"r"``, which tensordict records as the leaf's mode."""
    path = _tree(tmp_path / "ckpt")
    file = path / "model" / "1" / "norm" / "weight.memmap"
    for mode, reaches in ((None, True), ("r+", True), ("r", False)):
        loaded = tdview.load_memmap(path, mode=mode)
        leaf = loaded["model", "1", "norm", "weight"]
        assert leaf._mode == mode
        leaf[0] = 5.0 + (mode == "r")
        on_disk = torch.from_file(str(file), size=3, dtype=torch.float32)
        assert bool(on_disk[0] == leaf[0]) is reaches, mode
        del leaf, loaded


def test_a_leaf_refused_for_writing_is_mapped_copy_on_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mode=None``: a file that cannot be opened for writing (read-only, a read-only
    file system: simulated, as root may write any file) is opened for reading and
    mapped copy-on-write; the file never changes."""
    path = _tree(tmp_path / "ckpt")
    real_open = os.open

    def no_writes(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_RDWR:
            raise PermissionError(errno.EROFS, "read-only file system", name)
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(_folder_walk.os, "open", no_writes)
    loaded = tdview.load_memmap(path)
    monkeypatch.undo()
    assert_same(loaded, _reference(path))
    leaf = loaded["model", "2", "attn", "k"]
    assert leaf._mode is None
    leaf[0] = 99.0
    file = path / "model" / "2" / "attn" / "k.memmap"
    assert torch.from_file(str(file), size=4, dtype=torch.float32)[0] == 0.0


def test_o_noatime_refused_is_dropped_for_the_rest_of_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a file's owner may open it with ``O_NOATIME``: refused once, the walk opens
    every file without it from then on."""
    noatime = getattr(os, "O_NOATIME", 0)
    if not noatime:
        pytest.skip("no O_NOATIME")
    path = _tree(tmp_path / "ckpt")
    real_open = os.open
    refused = []

    def not_owner(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & noatime and kwargs.get("dir_fd") is not None:  # the walk's opens
            refused.append(name)
            raise PermissionError(errno.EPERM, "not the owner", name)
        return real_open(name, flags, *args, **kwargs)

    walks: list[FolderWalk] = []
    started: list[int] = []
    real_walk = DirectoryStore.folder_walk

    def kept(self: DirectoryStore, dirkey: str) -> Any:
        found = real_walk(self, dirkey)
        if found is not None:
            walks.append(found[0])
            started.append(found[0].noatime)
        return found

    monkeypatch.setattr(DirectoryStore, "folder_walk", kept)
    monkeypatch.setattr(_folder_walk.os, "open", not_owner)
    loaded = tdview.load_memmap(path, mode="r")
    monkeypatch.undo()
    assert_same(loaded, _reference(path, mode="r"))
    assert started == [noatime]  # the walk opened its first file with it, refused
    assert len(refused) == 1 and walks[0].noatime == 0


def _symlinked_leaf(path: Path) -> None:
    leaf = path / "model" / "1" / "attn" / "q.memmap"
    leaf.unlink()
    leaf.symlink_to(path / "model" / "1" / "attn" / "k.memmap")
    # the same bytes as the saved leaf: tensordict follows the link too
    (path / "model" / "1" / "attn" / "k.memmap").write_bytes(bytes(4 * 3 * 2))


def _symlinked_folder(path: Path) -> None:
    folder = path / "model" / "2" / "norm"
    folder.rename(path / "model" / "2" / "norm_real")
    folder.symlink_to("norm_real")


def _symlinked_meta(path: Path) -> None:
    meta = path / "model" / "0" / "attn" / "meta.json"
    meta.rename(path / "model" / "0" / "attn" / "saved.json")
    meta.symlink_to("saved.json")


def _nested_leaf(path: Path) -> None:
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    TensorDict(ragged=nested, batch_size=[2]).memmap(path / "model" / "3" / "extra")
    meta = (path / "model" / "3" / "meta.json").read_text()
    (path / "model" / "3" / "meta.json").write_text(
        meta.replace('"norm": {', '"extra": {"type": "TensorDict"}, "norm": {')
    )


def _tensorclass_folder(path: Path) -> None:
    Pair(left=torch.ones(2), right=torch.zeros(2), batch_size=[2]).memmap(
        path / "model" / "3" / "pair"
    )
    meta = (path / "model" / "3" / "meta.json").read_text()
    (path / "model" / "3" / "meta.json").write_text(
        meta.replace('"norm": {', '"pair": {"type": "Pair"}, "norm": {')
    )


@pytest.mark.parametrize(
    "change",
    [_symlinked_leaf, _symlinked_folder, _symlinked_meta, _nested_leaf, _tensorclass_folder],
)
@pytest.mark.parametrize("device", [None, "meta"])
def test_what_the_walk_does_not_take_loads_as_tensordict_loads_it(
    tmp_path: Path, change: Any, device: str | None
) -> None:
    path = _tree(tmp_path / "ckpt")
    change(path)
    reference = _reference(path, device=device)
    assert_same(tdview.load_memmap(path, device=device), reference, values=device is None)


def test_a_missing_leaf_is_left_out_with_the_warning_naming_its_file(tmp_path: Path) -> None:
    path = _tree(tmp_path / "ckpt")
    os.remove(path / "model" / "2" / "attn" / "k.memmap")
    for device in (None, "meta"):
        with pytest.warns(UserWarning, match=r"model/2/attn/k\.memmap is missing"):
            loaded = tdview.load_memmap(path, device=device)
        assert ("model", "2", "attn", "k") not in loaded.keys(True, True)
        assert ("model", "2", "attn", "q") in loaded.keys(True, True)


def test_a_short_leaf_is_an_error_naming_the_file_and_both_sizes(tmp_path: Path) -> None:
    path = _tree(tmp_path / "ckpt")
    file = path / "model" / "3" / "attn" / "q.memmap"
    os.truncate(file, 8)
    with pytest.raises(LeafDataError, match=r"q\.memmap has 8 bytes.*needs 48 bytes"):
        tdview.load_memmap(path)
    assert file.stat().st_size == 8  # never grown


def test_a_leaf_linked_out_of_the_root_is_refused(tmp_path: Path) -> None:
    path = _tree(tmp_path / "ckpt")
    outside = tmp_path / "elsewhere.memmap"
    outside.write_bytes(bytes(4 * 3 * 1))
    leaf = path / "model" / "0" / "attn" / "q.memmap"
    leaf.unlink()
    leaf.symlink_to(outside)
    with pytest.raises(UntrustedLinkError, match=r"model/0/attn/q\.memmap"):
        tdview.load_memmap(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_a_fifo_for_a_meta_json_is_refused_without_blocking(tmp_path: Path) -> None:
    path = _tree(tmp_path / "ckpt")
    meta = path / "model" / "1" / "norm" / "meta.json"
    meta.unlink()
    os.mkfifo(meta)
    with pytest.raises(Exception, match=r"model/1/norm/meta\.json"):
        tdview.load_memmap(path, device="meta")


def test_a_shapes_only_load_lists_a_folder_of_many_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More leaves than ``PROBED_NAMES`` in one folder: one listing, not a ``stat`` each
    (a mapped load opens each anyway, and walks it)."""
    wide = _walk.PROBED_NAMES + 4
    path = tmp_path / "ckpt"
    TensorDict(
        wide=TensorDict({f"w{i}": torch.ones(i + 1) for i in range(wide)}),
        narrow=TensorDict(a=torch.ones(2)),
    ).memmap(path)
    stats: list[str] = []
    real = FolderWalk.file_size

    def counted(self: FolderWalk, fd: int, name: str) -> int:
        stats.append(name)
        return real(self, fd, name)

    monkeypatch.setattr(FolderWalk, "file_size", counted)
    assert_same(tdview.load_memmap(path, device="meta"), _reference(path, device="meta"),
                values=False)  # fmt: skip
    assert stats == ["a.memmap"]
    assert_same(tdview.load_memmap(path), _reference(path))


def test_a_deep_tree_is_walked_to_its_last_folder(tmp_path: Path) -> None:
    """Each level holds its folder open while the walk is below it: 150 levels."""
    path = tmp_path / "ckpt"
    td = TensorDict(leaf=torch.ones(1))
    for _ in range(150):
        td = TensorDict(down=td, here=torch.zeros(1))
    td.memmap(path)
    assert_same(tdview.load_memmap(path), _reference(path))


def test_a_meta_json_linked_out_of_the_root_records_no_prefix_there_only(
    tmp_path: Path,
) -> None:
    """The root's ``meta.json`` read through a trusted link out of the root: the root
    records no ``_memmap_prefix`` (``memmap_`` would write through the link), its
    sub-folders, walked inside the root, keep theirs."""
    path = _tree(tmp_path / "ckpt")
    shared = tmp_path / "shared"
    shared.mkdir()
    (path / "meta.json").rename(shared / "meta.json")
    (path / "meta.json").symlink_to(shared / "meta.json")
    with tdview.trust_paths(shared):
        loaded = tdview.load_memmap(path)
    assert loaded._memmap_prefix is None
    assert loaded["model"]._memmap_prefix == path / "model"
    assert loaded["model", "0", "attn"]._memmap_prefix == path / "model" / "0" / "attn"
    assert_same(loaded["model"], _reference(path)["model"])


@pytest.mark.parametrize("device", [None, "meta"])
def test_a_dtype_that_cannot_load_is_an_error_naming_the_leaf(
    tmp_path: Path, device: str | None
) -> None:
    path = _tree(tmp_path / "ckpt")
    meta = path / "model" / "1" / "attn" / "meta.json"
    meta.write_text(meta.read_text().replace('"torch.float32"', '"torch.qint8"', 1))
    with pytest.raises(LeafDataError, match=r"leaf 'model/1/attn/\w+' .*qint8 cannot be loaded"):
        tdview.load_memmap(path, device=device)
