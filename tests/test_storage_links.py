"""Checkpoints made of symlinks: content-addressed stores are read, other links refused.

The Hugging Face cache (``snapshot_download``), git-annex and DVC keep a checkpoint's
files as symlinks into a store next to it. These tests build each layout from a real
tensordict checkpoint and show that tdview loads it as tensordict does, that a link to
an unrelated file is an error (and a flagged node) until its folder is trusted, that
``mode="r+"`` is refused through every link out of the root, and that no file behind a
link ever changes.
"""

from __future__ import annotations

import gc
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
from tdview import Checkpoint
from tdview.errors import LinkWriteError, UnsafeCheckpointError, UntrustedLinkError
from tdview.index import leaf_storage
from tdview.storage import TRUSTED_PATHS_ENV, DirectoryStore
from tdview.storage._link_paths import up_to_blobs

from .compare import assert_same

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
            "[cache]\n    type = symlink\n    dir = ../../shared-dvc-cache\n"
        )
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
RULES = {
    "hf": "a blob of the Hugging Face cache",
    "annex": "a git-annex object of",
    "dvc": "a file of the DVC cache",
}


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
    tmp_path: Path, layout: str, unchanged: list[Path]
) -> None:
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


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_content_store_layout_loads_as_tensordict_loads_it(
    tmp_path: Path, layout: str, unchanged: list[Path]
) -> None:
    root, store = _layout(tmp_path, layout)
    assert all(p.is_symlink() for p in _files(root)) and _files(root)
    unchanged.append(store)
    for mode in ("r", None):
        got = tdview.load_memmap(root, mode=mode)
        # files behind a link out of the root are mapped copy-on-write whatever the mode:
        # the result is tensordict's mode="r" load, to the filename and mode of each leaf
        assert_same(got, TensorDict.load_memmap(root, mode="r"))
        ref = TensorDict.load_memmap(root, mode=mode)
        assert list(got.keys(True, True)) == list(ref.keys(True, True))
        assert got.batch_size == ref.batch_size and got["sub"].batch_size == ref["sub"].batch_size
        assert (got.exclude("nt", "text") == ref.exclude("nt", "text")).all()
        assert got["text"] == "hello" and got["a"]._mode == "r" and got._memmap_prefix is None
        assert got["sub"]._memmap_prefix is None  # its meta.json is a link out of the root too
        got["a"] += 1  # stays in memory
        got["sub", "b"].fill_(7)
    assert tdview.load_memmap(root)["a"][0].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_r_plus_is_refused_through_a_content_store_link(
    tmp_path: Path, layout: str, unchanged: list[Path]
) -> None:
    root, store = _layout(tmp_path, layout)
    unchanged.append(store)
    with pytest.raises(LinkWriteError) as raised:
        tdview.load_memmap(root, mode="r+")
    message = str(raised.value)
    assert isinstance(raised.value, PermissionError)
    assert f"Cannot open {root / 'a.memmap'} with mode='r+'" in message
    assert os.readlink(root / "a.memmap") in message and "never writes" in message
    with Checkpoint(root) as ckpt, pytest.raises(LinkWriteError):
        ckpt.load_leaf("sub/b", mode="r+")


def test_the_store_says_which_rule_follows_a_link(tmp_path: Path) -> None:
    root, blobs = _hf(tmp_path)
    store = DirectoryStore(root)
    assert store.read_bytes("meta.json", 1 << 20).startswith(b"{")
    link = store.link("a.memmap")
    assert link is not None and link.reason == f"a blob of the Hugging Face cache {blobs.parent}"
    assert link.link == str(root / "a.memmap") and link.target == os.readlink(root / "a.memmap")
    assert link.real == os.path.realpath(root / "a.memmap")
    assert store.entry("a.memmap").link == link and not store.writable("a.memmap")
    with Checkpoint(root) as ckpt:
        assert leaf_storage(ckpt.store, ckpt.node("a")).link == link
    plain = _saved(tmp_path / "plain")
    with Checkpoint(plain) as ckpt:
        assert leaf_storage(ckpt.store, ckpt.node("a")).link is None
        assert ckpt.store.link("a.memmap") is None and ckpt.store.writable("a.memmap")


def test_a_link_to_a_missing_blob_is_a_missing_file(tmp_path: Path) -> None:
    """An interrupted download: the snapshot links to a blob not there yet. The key is
    left out with a warning, as a missing file is (tensordict leaves it out silently)."""
    root, _ = _hf(tmp_path)
    os.unlink(os.path.realpath(root / "sub" / "b.memmap"))
    with pytest.warns(UserWarning, match=r"leaf 'sub/b' .* is missing \(tensordict also"):
        loaded = tdview.load_memmap(root)
    assert "b" not in loaded["sub"].keys()


def test_a_file_missing_from_a_snapshot_is_looked_for_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leaf whose link is not in the snapshot (a partial download) is left out with a
    warning; mapping it unprobed found it absent, which its probe then knows (one
    ``readlink`` of the name, not two)."""
    root, _ = _hf(tmp_path)
    (root / "sub" / "b.memmap").unlink()
    read: list[str] = []
    readlink = os.readlink

    def counted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        read.append(os.fspath(path))
        return readlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "readlink", counted)
    with pytest.warns(UserWarning, match=r"leaf 'sub/b' .* is missing"):
        loaded = tdview.load_memmap(root)
    assert "b" not in loaded["sub"].keys() and loaded["a"].shape[0] > 0
    assert sum(path.endswith("b.memmap") for path in read) == 1


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


@pytest.mark.parametrize(
    "kind", ["another-repo", "blob-links-out", "not-a-hash", "below-blobs", "blobs-is-a-link"]
)
def test_a_link_that_only_looks_like_a_content_store_is_refused(
    tmp_path: Path, kind: str, unchanged: list[Path]
) -> None:
    root, key, target = _hostile_hf(tmp_path, kind)
    unchanged.append(target.parent)
    with pytest.raises(
        UntrustedLinkError, match=f"resolves to {target}, outside the checkpoint root"
    ) as raised:
        DirectoryStore(root).read_bytes(key, 1 << 20)
    assert f"refusing key {key!r}" in str(raised.value)
    assert f"tdview.trust_paths({str(target.parent)!r})" in str(raised.value)
    with pytest.raises(UntrustedLinkError, match=f"resolves to {target}, outside"):
        tdview.load_memmap(root)


def test_a_folder_linked_into_blobs_is_refused(tmp_path: Path) -> None:
    """A content store holds files: a folder of the checkpoint linked into one is not."""
    root, blobs = _hf(tmp_path)
    (root / "sub").rename(blobs / "sub")
    _link(root / "sub", blobs / "sub")
    with pytest.raises(UntrustedLinkError, match="'sub/meta.json'"):
        DirectoryStore(root).is_file("sub/meta.json")
    with pytest.raises(UntrustedLinkError, match=r"'sub' of .* its folder .* cannot be read"):
        tdview.load_memmap(root)


def test_annex_and_dvc_stores_are_recognised_by_their_structure(tmp_path: Path) -> None:
    root, objects = _annex(tmp_path / "annex")
    real = Path(os.path.realpath(root / "a.memmap"))
    odd = real.parent / "another-name"  # objects/Xx/Yy/KEY/<not KEY>
    shutil.copy(real, odd)
    (root / "a.memmap").unlink()
    _link(root / "a.memmap", odd)
    with pytest.raises(UntrustedLinkError, match=f"resolves to {odd}"):
        DirectoryStore(root).is_file("a.memmap")
    with pytest.raises(UntrustedLinkError, match="git-annex"):
        tdview.load_memmap(root)
    root, cache = _dvc(tmp_path / "dvc", configured=False)
    odd = cache / "files" / "md5" / "zz" / "not-hex"
    odd.parent.mkdir()
    shutil.copy(os.path.realpath(root / "a.memmap"), odd)
    (root / "a.memmap").unlink()
    _link(root / "a.memmap", odd, absolute=True)
    with pytest.raises(UntrustedLinkError, match=f"resolves to {odd}"):
        DirectoryStore(root).is_file("a.memmap")
    with pytest.raises(UntrustedLinkError, match="DVC"):
        tdview.load_memmap(root)


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
    with pytest.raises(UntrustedLinkError):
        tdview.load_memmap(root)


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


@pytest.mark.parametrize("linked_out", ["file", "folder"], indirect=True)
def test_a_link_out_of_the_root_is_an_error_and_a_flagged_node_until_trusted(
    linked_out: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, unchanged: list[Path]
) -> None:
    root, link, folder = linked_out
    unchanged.append(folder)
    target = os.readlink(link)
    with pytest.raises(UntrustedLinkError) as raised:
        tdview.load_memmap(root)
    message = str(raised.value)
    for said in (
        f"the symlink {link} -> {target!r}",
        f"resolves to {folder / link.name}",
        f"tdview.trust_paths({str(folder)!r})",
        f"{TRUSTED_PATHS_ENV}={folder}",
    ):
        assert said in message, said
    key = "a" if link.name == "a.memmap" else "sub"
    with Checkpoint(root) as ckpt:
        from tdview.protocol._summaries import summary

        problems = summary(ckpt, ckpt.node(key))["problems"]
        assert len(problems) == 1 and message.endswith(problems[0] + ".")
        assert f"the symlink {link}" in problems[0] and TRUSTED_PATHS_ENV in problems[0]
    with tdview.trust_paths(folder):
        assert_same(tdview.load_memmap(root, mode="r"), TensorDict.load_memmap(root, mode="r"))
        with pytest.raises(LinkWriteError):
            tdview.load_memmap(root, mode="r+")
    with pytest.raises(UntrustedLinkError):  # the block ended: not trusted any more
        tdview.load_memmap(root)
    monkeypatch.setenv(TRUSTED_PATHS_ENV, os.pathsep.join(["/nowhere", str(folder)]))
    with Checkpoint(root) as ckpt:
        assert ckpt.node(key).problems == []
    got = tdview.load_memmap(root)
    assert (got.exclude("nt", "text") == TensorDict.load_memmap(root).exclude("nt", "text")).all()
    got["sub", "b"].fill_(3)
    got["a"].fill_(3)


@pytest.mark.parametrize("linked_out", ["file"], indirect=True)
def test_trust_paths_is_a_context_manager_and_a_plain_call(
    linked_out: tuple[Path, Path, Path],
) -> None:
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


def _swap_after(store: object, step: str, swap: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``swap()`` once, right after ``step`` of ``store`` (the store's method that
    resolves or stats a key, or its held folders' ``fd``) returns: the window another
    process could use between a check and the open."""
    done = resolved = getattr(store, step)

    def step_then_swap(*args: object) -> object:
        nonlocal done
        found = resolved(*args)
        if done is not None:
            done = None
            swap()  # type: ignore[operator]
        return found

    monkeypatch.setattr(store, step, step_then_swap)


@pytest.mark.parametrize("when", ["before", "after the stat", "after resolving"])
def test_a_blob_swapped_for_a_symlink_after_it_was_checked(
    tmp_path: Path, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Swapped before the open: resolved again and refused as a link out. Swapped
    between the check and the open: the open (through the blob's folder held open, or by
    the path resolved, without following) meets the symlink and refuses it. Never are
    the secret's bytes read."""
    root, _ = _hf(tmp_path)
    store = DirectoryStore(root)
    link = store.link("a.memmap")
    assert link is not None
    secret = tmp_path / "secret"
    secret.write_bytes(b"secret" * 10)

    def swap() -> None:
        os.rename(link.real, link.real + ".old")
        os.symlink(secret, link.real)

    if when == "before":
        swap()
        with pytest.raises(UntrustedLinkError, match=f"resolves to {secret}"):
            store.open_file("a.memmap")
        return
    store = DirectoryStore(root)
    # the fast path stats the blob through its folder held open; the per-key path
    # resolves the key and stats it (a store where folders cannot be held takes that)
    _swap_after(store, "_probe_link" if when == "after the stat" else "_stat", swap, monkeypatch)
    if when == "after resolving":
        monkeypatch.setattr(store._folders, "fd", lambda where: -1)
    with pytest.raises(
        UnsafeCheckpointError, match=f"became a symlink after it was checked|resolves to {secret}"
    ):
        store.open_file("a.memmap")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("when", ["before it is held", "once held", "per key"])
def test_a_folder_swapped_for_a_symlink_after_it_was_checked(
    tmp_path: Path, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blobs folder swapped for a symlink to a decoy copy: before tdview holds it
    open, refused (the symlink is seen); once held, the file read is still the one
    checked, never the decoy's; on the per-key path, refused on the descriptor."""
    root, blobs = _hf(tmp_path)
    store = DirectoryStore(root)
    decoy = tmp_path / "decoy"
    shutil.copytree(blobs, decoy)
    for blob in decoy.iterdir():
        blob.write_bytes(b'{"decoy": 1}')
    original = (root / "meta.json").read_bytes()

    def swap() -> None:
        os.rename(blobs, tmp_path / "blobs.old")
        blobs.symlink_to(decoy)

    if when == "once held":
        _swap_after(store._folders, "fd", swap, monkeypatch)
        assert store.read_bytes("meta.json", 1 << 20) == original
        return
    if when == "before it is held":
        resolved = store._link_at  # test-only hook into the race window

        def swap_then_hold(
            folder: str, name: str, target: str | None = None, key: str | None = None
        ) -> object:
            swap()
            return resolved(folder, name, target, key)

        monkeypatch.setattr(store, "_link_at", swap_then_hold)
        with pytest.raises(UnsafeCheckpointError, match="outside|changed|symlink"):
            store.read_bytes("meta.json", 1 << 20)
        return
    monkeypatch.setattr(store._folders, "fd", lambda where: -1)
    _swap_after(store, "_stat", swap, monkeypatch)
    with pytest.raises(UnsafeCheckpointError, match="a folder on its path changed"):
        store.read_bytes("meta.json", 1 << 20)


def test_a_walked_checkpoint_whose_blob_is_swapped_before_the_load(tmp_path: Path) -> None:
    """The index found the file through a followed link; by the time the loader maps it,
    its blob is a symlink to an unrelated file: refused, not mapped."""
    root, _ = _hf(tmp_path)
    real = os.path.realpath(root / "a.memmap")
    with Checkpoint(root) as ckpt:
        assert ckpt.node("a").file == "a.memmap" and not ckpt.node("a").problems
        secret = tmp_path / "secret"
        shutil.copy(real, secret)
        os.rename(real, real + ".old")
        os.symlink(secret, real)
        with pytest.raises(UntrustedLinkError, match=f"resolves to {secret}"):
            ckpt.load_leaf("a")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_folders_held_open_are_closed_with_the_load(tmp_path: Path) -> None:
    """A load holds the folders of the files it opens (blobs/, the leaves' folders) for
    its length only: no descriptor is left open after it, loaded or refused."""
    root, _ = _hf(tmp_path)
    plain = _saved(tmp_path / "plain")

    def open_here() -> set[str]:
        # What this process holds open under tmp_path: other tests' objects collected or
        # closed meanwhile (other descriptors come and go) do not count.
        held = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(str(tmp_path.resolve())):
                held.add(target)
        return held

    gc.collect()
    assert open_here() == set()
    for path in (root, plain):
        for device in (None, "meta"):
            loaded = tdview.load_memmap(path, device=device)
            assert loaded["a"].shape == (2, 3)
            assert open_here() == set()  # mappings keep no descriptor, folders none
            del loaded
    store = DirectoryStore(root)
    assert store.link("a.memmap") is not None and store._folders.fds
    assert open_here()  # the store holds its folders open until closed
    store.close()
    assert open_here() == set()


def test_a_folder_tells_its_blob_prefix_for_the_repository_asked() -> None:
    """The prefix a snapshot's links say before a blob is remembered per folder, with
    the blobs/ folder it was worked out for: a snapshot nested in another's tree gets
    its own, not the outer repository's."""
    outer = "/c/models--a--b/blobs/"
    inner = "/c/models--a--b/snapshots/r/models--x--y/blobs/"
    folder = "/c/models--a--b/snapshots/r/models--x--y/snapshots/s/sub/"
    assert up_to_blobs(folder, outer) == "../" * 6 + "blobs/"
    assert up_to_blobs(folder, inner) == "../../../blobs/"
    assert up_to_blobs(folder, outer) == "../" * 6 + "blobs/"
    assert up_to_blobs("/elsewhere/", inner) == "\x00"  # no target says that
