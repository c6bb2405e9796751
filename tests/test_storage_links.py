"""Checkpoints made of symlinks: content-addressed stores are read, other links refused.

The Hugging Face cache (``snapshot_download``), git-annex and DVC keep a checkpoint's
files as symlinks into a store next to it. These tests build each layout from a real
tensordict checkpoint and show that the store reads it through its links, says which
rule follows each, refuses links that only look like a store's and links to unrelated
files until their folder is trusted, and checks each file on the descriptor opened.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tensordict import NonTensorData, TensorDict

import tdview
from tdview.errors import UnsafeCheckpointError, UntrustedLinkError
from tdview.storage import TRUSTED_PATHS_ENV, DirectoryStore

REV = "0123456789abcdef0123456789abcdef01234567"


def _saved(path: Path) -> Path:
    """A tensordict checkpoint with leaves, a nested level, a nested tensor, a string and
    two leaves of the same bytes (one blob in a content store)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        nested = torch.nested.nested_tensor([torch.arange(2.0), torch.arange(3.0)])
    TensorDict(
        a=torch.arange(6.0).reshape(2, 3),
        same=torch.arange(6.0).reshape(2, 3),
        nt=nested,
        text=NonTensorData("hello", batch_size=[2]),
        sub=TensorDict(b=torch.ones(2, 4, dtype=torch.int16), batch_size=[2]),
        batch_size=[2],
    ).memmap(path)
    return path


def _files(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*") if p.is_file())


def _link(link: Path, target: Path, *, absolute: bool = False) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target if absolute else os.path.relpath(target, link.parent))


def _hf(tmp: Path, repo: str = "models--org--name", sub: str = "") -> tuple[Path, Path]:
    """``hub/<repo>/snapshots/<rev>/<sub>`` of symlinks into ``hub/<repo>/blobs/<sha256>``,
    as ``huggingface_hub.snapshot_download`` leaves it: (checkpoint root, blobs)."""
    src = _saved(tmp / f"src-{repo}")
    folder = tmp / "hub" / repo
    blobs, snapshot = folder / "blobs", folder / "snapshots" / REV
    blobs.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REV)
    root = snapshot / sub if sub else snapshot
    for file in _files(src):
        blob = blobs / hashlib.sha256(file.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.move(file, blob)
        _link(root / file.relative_to(src), blob)
    shutil.rmtree(src)
    return root, blobs


def _annex(tmp: Path) -> tuple[Path, Path]:
    """``repo/models/ckpt`` of symlinks into ``repo/.git/annex/objects/Xx/Yy/KEY/KEY``."""
    src = _saved(tmp / "src")
    repo = tmp / "repo"
    objects = repo / ".git" / "annex" / "objects"
    objects.mkdir(parents=True)
    root = repo / "models" / "ckpt"
    for file in _files(src):
        data = file.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        key = f"SHA256E-s{len(data)}--{sha}{file.suffix}"
        hashed = hashlib.md5(key.encode()).hexdigest()
        obj = objects / hashed[:2].upper() / hashed[2:4] / key / key
        if not obj.exists():
            obj.parent.mkdir(parents=True)
            shutil.move(file, obj)
        _link(root / file.relative_to(src), obj)
    shutil.rmtree(src)
    return root, objects


def _dvc(tmp: Path, *, configured: bool) -> tuple[Path, Path]:
    """``repo/data/ckpt`` of absolute symlinks into DVC's cache: ``.dvc/cache/files/md5``
    (DVC 3), or a cache folder that ``.dvc/config`` names, in the DVC 2 layout."""
    src = _saved(tmp / "src")
    repo = tmp / "repo"
    (repo / ".dvc").mkdir(parents=True)
    (repo / ".dvc" / ".gitignore").write_text("/cache\n")
    if configured:
        cache = tmp / "shared-dvc-cache"
        (repo / ".dvc" / "config").write_text(
            "[core]\n    remote = storage\n['remote \"storage\"']\n    url = /mnt/x\n"
            "[cache]\n    type = symlink\n    dir = ../../shared-dvc-cache\n")
        base = cache
    else:
        (repo / ".dvc" / "config").write_text("[cache]\n    type = symlink\n")
        cache = repo / ".dvc" / "cache"
        base = cache / "files" / "md5"
    root = repo / "data" / "ckpt"
    for file in _files(src):
        md5 = hashlib.md5(file.read_bytes()).hexdigest()
        obj = base / md5[:2] / md5[2:]
        if not obj.exists():
            obj.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(file, obj)
        _link(root / file.relative_to(src), obj, absolute=True)
    shutil.rmtree(src)
    return root, cache


def _layout(tmp: Path, name: str) -> tuple[Path, Path]:
    if name.startswith("hf"):
        return _hf(tmp, sub="ckpt/v1" if name == "hf-below" else "")
    if name == "annex":
        return _annex(tmp)
    return _dvc(tmp, configured=name == "dvc-config")


LAYOUTS = ["hf", "hf-below", "annex", "dvc", "dvc-config"]
RULES = {"hf": "a blob of the Hugging Face cache", "annex": "a git-annex object of",
         "dvc": "a file of the DVC cache"}


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in _files(folder)}


@pytest.fixture
def unchanged() -> Iterator[list[Path]]:
    """Folders whose files must hold the same bytes when the test ends."""
    folders: list[Path] = []
    before: list[dict[str, bytes]] = []

    class Watch(list):
        def append(self, folder: Path) -> None:  # type: ignore[override]
            folders.append(folder)
            before.append(_contents(folder))

    yield Watch()
    for folder, seen in zip(folders, before, strict=True):
        assert _contents(folder) == seen, f"{folder} changed"


@pytest.fixture(autouse=True)
def _no_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRUSTED_PATHS_ENV, raising=False)


# -- content-addressed stores -------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_content_store_layout_is_read_through_its_links(
        tmp_path: Path, layout: str, unchanged: list[Path]) -> None:
    root, folder = _layout(tmp_path, layout)
    unchanged.append(folder)
    store = DirectoryStore(root)
    for file in _files(root):
        key, real = file.relative_to(root).as_posix(), os.path.realpath(file)
        assert store.is_file(key) and not store.is_dir(key)
        assert store.read_bytes(key, 1 << 20) == Path(real).read_bytes()
        link = store.link(key)
        assert link is not None and link.real == real and link.target == os.readlink(file)
        assert link.reason.startswith(RULES[layout.partition("-")[0]]), link.reason
        assert store.entry(key).link == link and store.entry(key).file == real
        assert not store.writable(key)
    assert store.writable()


def test_the_store_says_which_rule_follows_a_link(tmp_path: Path) -> None:
    root, blobs = _hf(tmp_path)
    store = DirectoryStore(root)
    assert store.read_bytes("meta.json", 1 << 20).startswith(b"{")
    link = store.link("a.memmap")
    assert link is not None and link.reason == f"a blob of the Hugging Face cache {blobs.parent}"
    assert link.link == str(root / "a.memmap") and link.target == os.readlink(root / "a.memmap")
    assert link.real == os.path.realpath(root / "a.memmap")
    assert store.entry("a.memmap").link == link and not store.writable("a.memmap")
    plain = DirectoryStore(_saved(tmp_path / "plain"))
    assert plain.link("a.memmap") is None and plain.writable("a.memmap")


# -- links that are refused -----------------------------------------------------------------


def _hostile_hf(tmp: Path, kind: str) -> tuple[Path, str, Path]:
    """An HF snapshot whose ``a.memmap`` (or, when its blobs/ folder leads elsewhere,
    every file) leads somewhere the rules do not trust: (checkpoint root, the first key
    read that does, the file it leads to)."""
    root, blobs = _hf(tmp)
    real = Path(os.path.realpath(root / "a.memmap"))
    (root / "a.memmap").unlink()
    if kind == "another-repo":  # the blobs of a cache folder that does not hold it
        _, other = _hf(tmp, repo="models--org--other")
        target = other / real.name
    elif kind == "blob-links-out":  # a blob that is itself a link to an unrelated file
        target = tmp / "unrelated.bin"
        shutil.copy(real, target)
        _link(blobs / ("f" * 64), target)
        _link(root / "a.memmap", blobs / ("f" * 64))
        return root, "a.memmap", target
    elif kind == "not-a-hash":
        target = blobs / "secret.bin"
        shutil.copy(real, target)
    elif kind == "below-blobs":
        target = blobs / "sub" / real.name
        target.parent.mkdir()
        shutil.copy(real, target)
    else:  # "blobs-is-a-link": the cache folder's blobs/ leads elsewhere
        _link(root / "a.memmap", real)
        elsewhere = tmp / "elsewhere"
        shutil.move(blobs, elsewhere)
        blobs.symlink_to(elsewhere)
        return root, "meta.json", elsewhere / Path(os.readlink(root / "meta.json")).name
    _link(root / "a.memmap", target)
    return root, "a.memmap", target


@pytest.mark.parametrize("kind", ["another-repo", "blob-links-out", "not-a-hash", "below-blobs",
                                  "blobs-is-a-link"])
def test_a_link_that_only_looks_like_a_content_store_is_refused(
        tmp_path: Path, kind: str, unchanged: list[Path]) -> None:
    root, key, target = _hostile_hf(tmp_path, kind)
    unchanged.append(target.parent)
    with pytest.raises(UntrustedLinkError, match=f"resolves to {target}, outside the "
                       "checkpoint root") as raised:
        DirectoryStore(root).read_bytes(key, 1 << 20)
    assert f"refusing key {key!r}" in str(raised.value)
    assert f"tdview.trust_paths({str(target.parent)!r})" in str(raised.value)



def test_a_folder_linked_into_blobs_is_refused(tmp_path: Path) -> None:
    """A content store holds files: a folder of the checkpoint linked into one is not."""
    root, blobs = _hf(tmp_path)
    (root / "sub").rename(blobs / "sub")
    _link(root / "sub", blobs / "sub")
    with pytest.raises(UntrustedLinkError, match="'sub/meta.json'"):
        DirectoryStore(root).is_file("sub/meta.json")


def test_annex_and_dvc_stores_are_recognised_by_their_structure(tmp_path: Path) -> None:
    root, objects = _annex(tmp_path / "annex")
    real = Path(os.path.realpath(root / "a.memmap"))
    odd = real.parent / "another-name"  # objects/Xx/Yy/KEY/<not KEY>
    shutil.copy(real, odd)
    (root / "a.memmap").unlink()
    _link(root / "a.memmap", odd)
    with pytest.raises(UntrustedLinkError, match=f"resolves to {odd}"):
        DirectoryStore(root).is_file("a.memmap")
    root, cache = _dvc(tmp_path / "dvc", configured=False)
    odd = cache / "files" / "md5" / "zz" / "not-hex"
    odd.parent.mkdir()
    shutil.copy(os.path.realpath(root / "a.memmap"), odd)
    (root / "a.memmap").unlink()
    _link(root / "a.memmap", odd, absolute=True)
    with pytest.raises(UntrustedLinkError, match=f"resolves to {odd}"):
        DirectoryStore(root).is_file("a.memmap")



def test_a_store_the_checkpoint_itself_names_is_not_trusted(tmp_path: Path) -> None:
    """A ``.dvc/config`` inside the checkpoint is the checkpoint's word, not its owner's:
    the cache it names is not trusted (only folders above the root are)."""
    root = _saved(tmp_path / "ck")
    cache = tmp_path / "cache"
    md5 = hashlib.md5((root / "a.memmap").read_bytes()).hexdigest()
    (cache / md5[:2]).mkdir(parents=True)
    shutil.move(root / "a.memmap", cache / md5[:2] / md5[2:])
    _link(root / "a.memmap", cache / md5[:2] / md5[2:], absolute=True)
    (root / ".dvc").mkdir()
    (root / ".dvc" / "config").write_text(f"[cache]\n    dir = {cache}\n")
    with pytest.raises(UntrustedLinkError, match=f"resolves to {cache}"):
        DirectoryStore(root).is_file("a.memmap")



@pytest.fixture
def linked_out(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, Path]:
    """A plain checkpoint whose ``a.memmap`` (or ``sub/`` folder) is a symlink to an
    unrelated place: (root, the link, the folder to trust)."""
    root = _saved(tmp_path / "ck")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    name = "sub" if request.param == "folder" else "a.memmap"
    shutil.move(root / name, elsewhere / name)
    _link(root / name, elsewhere / name)
    return root, root / name, elsewhere


@pytest.mark.parametrize("linked_out", ["file"], indirect=True)
def test_trust_paths_is_a_context_manager_and_a_plain_call(
        linked_out: tuple[Path, Path, Path]) -> None:
    root, _, folder = linked_out
    from tdview.storage import trusted_paths

    before = trusted_paths()
    trust = tdview.trust_paths(folder, folder)
    try:
        assert trusted_paths() == (*before, str(folder))
        assert tdview.load_memmap(root)["a"].shape == (2, 3)
    finally:
        trust.__exit__(None, None, None)
    assert trusted_paths() == before


# -- checked on the descriptor opened -----------------------------------------------------


def _swap_after_resolving(store: DirectoryStore, swap: object,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``swap()`` right after the store resolves and stats a key, before it opens it
    (the window another process could use)."""
    resolved = store._stat  # noqa: SLF001 - test-only hook into the race window

    def stat_then_swap(key: str) -> tuple[str, os.stat_result]:
        found = resolved(key)
        swap()  # type: ignore[operator]
        return found

    monkeypatch.setattr(store, "_stat", stat_then_swap)


@pytest.mark.parametrize("when", ["before", "between"])
def test_a_blob_swapped_for_a_symlink_after_it_was_checked(
        tmp_path: Path, when: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = _hf(tmp_path)
    store = DirectoryStore(root)
    link = store.link("a.memmap")
    assert link is not None
    secret = tmp_path / "secret"
    shutil.copy(link.real, secret)

    def swap() -> None:
        os.rename(link.real, link.real + ".old")
        os.symlink(secret, link.real)

    if when == "before":  # resolved again when opened: refused as a link out
        swap()
        with pytest.raises(UntrustedLinkError, match=f"resolves to {secret}"):
            store.open_file("a.memmap")
    else:  # between the check and the open: refused on the descriptor
        _swap_after_resolving(store, swap, monkeypatch)
        with pytest.raises(UnsafeCheckpointError, match="became a symlink after it was checked"):
            store.open_file("a.memmap")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_folder_swapped_for_a_symlink_after_it_was_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, blobs = _hf(tmp_path)
    store = DirectoryStore(root)
    decoy = tmp_path / "decoy"
    shutil.copytree(blobs, decoy)

    def swap() -> None:
        os.rename(blobs, tmp_path / "blobs.old")
        blobs.symlink_to(decoy)

    _swap_after_resolving(store, swap, monkeypatch)
    with pytest.raises(UnsafeCheckpointError, match="a folder on its path changed"):
        store.read_bytes("meta.json", 1 << 20)
