"""The storage contract, run against every kind of store, and foreign archives.

Each case is the same small checkpoint, written by tensordict as a directory, as a
``.tdz``, packed with each compression, and re-zipped by Python's ``zipfile`` and by the
``zip`` command line tool. Every store must agree with the files of the directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, pack_memmap

import tdview
from tdview.errors import ArchiveError, LimitExceededError, UnsafeCheckpointError
from tdview.storage import (
    WINDOWS_PATHS,
    ArchiveStore,
    DirectoryStore,
    EntryInfo,
    Store,
    is_archive,
    open_store,
)
from tdview.storage._key_safety import check_key, name_problem
from tdview.storage._probe import open_dir

from ._optional import require_tool
from .test_storage_zipcraft import craft_zip, zip_dir

LIMIT = 1 << 20


def make_td() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(3.0),
            "ключ": torch.ones(2),
            "nested": TensorDict(b=torch.ones(2, 2), batch_size=[]),
        },
        batch_size=[],
    )


def zip_cli(src: Path, dest: Path) -> None:
    """``cd src && zip -0 -r dest .`` (Info-ZIP: raw UTF-8 names without flag 0x800)."""
    subprocess.run(["zip", "-q", "-0", "-r", str(dest), "."], cwd=src, check=True)


def _write_case(kind: str, ref: Path, out: Path) -> Path:
    """Write the checkpoint ``ref`` as a store of ``kind`` under ``out``."""
    path = out / f"{kind}.tdz"
    if kind == "directory":
        return ref
    if kind == "tdz":
        make_td().save(str(path))
    elif kind in ("deflate", "bzip2", "lzma"):
        pack_memmap(ref, path, compression=kind)
    elif kind == "zipfile":
        path.write_bytes(zip_dir(ref, explicit_dirs=True, deflate_meta=True, comment=b"hi"))
    elif kind == "zipfile-stream":
        path.write_bytes(zip_dir(ref, stream=True))
    elif kind == "zipfile-prepended":
        path.write_bytes(b"#!/bin/sh\nexit 0\n" * 7 + zip_dir(ref))
    elif kind == "zipfile-zip64":
        path.write_bytes(zip_dir(ref, force_zip64=True))
    elif kind == "crafted-zip64":
        files = sorted(p for p in ref.rglob("*") if p.is_file())
        entries = [
            (p.relative_to(ref).as_posix(), p.read_bytes(), 8 if i % 2 else 0)
            for i, p in enumerate(files)
        ]
        path.write_bytes(craft_zip(entries, zip64=True, prepend=b"stub" * 9, comment=b"c"))
    elif kind == "zip-cli":
        zip_cli(ref, path)
    return path


KINDS = [
    "directory",
    "tdz",
    "deflate",
    "bzip2",
    "lzma",
    "zipfile",
    "zipfile-stream",
    "zipfile-prepended",
    "zipfile-zip64",
    "crafted-zip64",
    "zip-cli",
]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every case written once; ``"ref"`` is the directory written by ``memmap``."""
    out = tmp_path_factory.mktemp("storage")
    ref = out / "ref"
    make_td().memmap(ref)
    return {"ref": ref, **{kind: _write_case(kind, ref, out) for kind in KINDS}}


@pytest.fixture(params=KINDS)
def case(request: pytest.FixtureRequest, written: dict[str, Path]):
    """``(store, reference directory)`` for each kind of store."""
    if request.param == "zip-cli":
        require_tool("zip")
    store = open_store(written[request.param])
    yield store, written["ref"]
    store.close()


def disk_tree(ref: Path) -> tuple[list[str], list[str]]:
    """Relative keys of the files and directories under ``ref``."""
    files, dirs = [], [""]
    for p in sorted(ref.rglob("*")):
        (files if p.is_file() else dirs).append(p.relative_to(ref).as_posix())
    return files, dirs


# -- the contract, for every store ------------------------------------------------------


def test_kind_and_root(case) -> None:
    store, _ = case
    assert isinstance(store, Store)
    assert store.kind == ("directory" if isinstance(store, DirectoryStore) else "archive")
    assert os.path.isabs(store.root)
    assert store.display("") == store.root
    assert store.is_dir("") and not store.is_file("")


def test_directories_match_disk(case) -> None:
    store, ref = case
    files, dirs = disk_tree(ref)
    for key in dirs:
        assert store.is_dir(key) and not store.is_file(key), key
        assert store.list_dir(key) == sorted(os.listdir(ref / key)), key
    for key in files:
        assert not store.is_dir(key), key


def test_files_match_disk(case) -> None:
    store, ref = case
    files, _ = disk_tree(ref)
    assert "ключ.memmap" in files and "nested/b.memmap" in files
    for key in files:
        data = (ref / key).read_bytes()
        info = store.entry(key)
        assert store.is_file(key) and store.exists(key), key
        assert isinstance(info, EntryInfo) and info.key == key and not info.encrypted
        assert info.size == len(data)
        assert info.display == store.display(key) and info.display.endswith(key)
        assert info.compression in ("stored", "deflate", "bzip2", "lzma")
        assert store.read_bytes(key, limit=len(data)) == data
        if store.kind == "directory":
            assert info.file == os.path.realpath(ref / key) and info.crc32 is None
            assert info.stored_size == info.size
        else:
            assert info.file is None and info.crc32 == zlib.crc32(data)


def test_missing_keys(case) -> None:
    store, _ = case
    assert not store.is_file("nope.memmap") and not store.is_dir("nope")
    assert not store.exists("nested/nope")
    for call in (
        lambda: store.entry("nope.memmap"),
        lambda: store.list_dir("nope"),
        lambda: store.read_bytes("nested/nope", LIMIT),
    ):
        with pytest.raises(FileNotFoundError, match="nope"):
            call()
    with pytest.raises(FileNotFoundError) as info:
        store.entry("nested/x.memmap")
    assert info.value.filename == store.display("nested/x.memmap")


def test_wrong_kind_of_key(case) -> None:
    store, _ = case
    with pytest.raises(IsADirectoryError, match="nested"):
        store.entry("nested")
    with pytest.raises(NotADirectoryError, match="a.memmap"):
        store.list_dir("a.memmap")
    assert not store.is_file("a.memmap/x") and not store.is_dir("a.memmap/x")


UNSAFE_KEYS = [
    "../x",
    "nested/../../x",
    "/etc/passwd",
    "..",
    "a\x00b",
    "./meta.json",
    "nested//b.memmap",
    "nested/",
    ".",
]
# Unsafe where a backslash separates and a drive prefix escapes (Windows paths), plain
# characters elsewhere and in every archive.
WINDOWS_KEYS = ["a\\..\\x", "\\x", "C:/x", "c:x"]


@pytest.mark.parametrize("key", UNSAFE_KEYS)
def test_unsafe_keys_are_refused(case, key: str) -> None:
    store, _ = case
    calls = [
        store.is_file,
        store.is_dir,
        store.entry,
        store.list_dir,
        store.writable,
        lambda k: store.read_bytes(k, LIMIT),
    ]
    for call in calls:
        with pytest.raises(UnsafeCheckpointError) as info:
            call(key)
        assert repr(key) in str(info.value) and store.root in str(info.value)


@pytest.mark.parametrize("key", WINDOWS_KEYS)
def test_windows_keys_are_refused_for_windows_paths(key: str) -> None:
    assert name_problem(key) is None
    assert name_problem(key, windows=True) is not None
    with pytest.raises(UnsafeCheckpointError, match=re.escape(repr(key))):
        check_key(key, "/ckpt", windows=True)
    assert check_key(key, "/ckpt") == key


ODD_NAMES = ["a\\b.memmap", "\\lead.memmap", "c:x.memmap", "Z:"]


@pytest.mark.skipif(WINDOWS_PATHS, reason="such names cannot be files on Windows")
@pytest.mark.parametrize("kind", ["directory", "tdz"])
def test_backslash_and_drive_names_are_names(tmp_path: Path, kind: str) -> None:
    """Names with a backslash or a colon (tensordict writes them for keys such as "a:b"
    with robust_key=False) are read as they are: they cannot leave the root here."""
    files = {"meta.json": b"{}", **{name: name.encode() * 3 for name in ODD_NAMES}}
    if kind == "directory":
        path = tmp_path / "d"
        path.mkdir()
        for name, data in files.items():
            (path / name).write_bytes(data)
    else:
        path = tmp_path / "odd.tdz"
        path.write_bytes(craft_zip(list(files.items())))
    store = open_store(path)
    assert sorted(store.list_dir("")) == sorted(files)
    for name, data in files.items():
        assert store.is_file(name)
        assert store.read_bytes(name, LIMIT) == data


def test_read_bytes_limit_is_checked_first(case) -> None:
    store, ref = case
    size = (ref / "meta.json").stat().st_size
    with pytest.raises(LimitExceededError) as info:
        store.read_bytes("meta.json", limit=size - 1)
    msg = str(info.value)
    assert store.display("meta.json") in msg and str(size) in msg and str(size - 1) in msg


def test_writable_follows_os_access(case) -> None:
    store, _ = case
    assert store.writable() == os.access(store.root, os.W_OK)
    assert isinstance(store.writable("meta.json"), bool)


def test_key_must_be_a_string(case) -> None:
    store, _ = case
    with pytest.raises(TypeError):
        store.is_file(b"meta.json")  # type: ignore[arg-type]


# -- archives -----------------------------------------------------------------------------

ARCHIVES = [k for k in KINDS if k != "directory"]


@pytest.mark.parametrize("kind", ARCHIVES)
def test_archive_payloads_equal_files(written: dict[str, Path], kind: str) -> None:
    if kind == "zip-cli":
        require_tool("zip")
    ref = written["ref"]
    with ArchiveStore(written[kind]) as store:
        assert is_archive(written[kind])
        for key in disk_tree(ref)[0]:
            data = (ref / key).read_bytes()
            info = store.entry(key)
            assert bytes(store.decompress(key)) == data
            assert store.decompress(key).flags.writeable  # the loader's own copy
            store.verify(key)
            if info.compression == "stored":
                view = store.payload(key)
                assert view.readonly and bytes(view) == data
                offset = store.payload_offset(key)
                assert store.mapping[offset : offset + len(data)] == data
            else:
                with pytest.raises(ArchiveError, match=info.compression):
                    store.payload(key)
                raw = store.raw_payload(key)
                assert len(raw) == info.stored_size


def test_tensordict_stored_leaves_are_64_aligned(written: dict[str, Path]) -> None:
    with ArchiveStore(written["tdz"]) as store:
        leaves = [k for k in store.keys() if k.endswith(".memmap")]
        assert len(leaves) == 3
        for key in leaves:
            assert store.entry(key).compression == "stored"
            assert store.payload_offset(key) % 64 == 0, key


@pytest.mark.parametrize("kind", ["deflate", "bzip2", "lzma"])
def test_pack_memmap_compresses_leaves_only(written: dict[str, Path], kind: str) -> None:
    with ArchiveStore(written[kind]) as store:
        for key in store.keys():
            expected = kind if key.endswith(".memmap") else "stored"
            assert store.entry(key).compression == expected


def test_decompress_max_size(written: dict[str, Path]) -> None:
    with ArchiveStore(written["deflate"]) as store:
        with pytest.raises(LimitExceededError, match=r"a\.memmap.* 12 .* 11 bytes"):
            store.decompress("a.memmap", max_size=11)
        assert len(store.decompress("a.memmap", max_size=12)) == 12


def test_is_archive(written: dict[str, Path], tmp_path: Path) -> None:
    assert not is_archive(written["ref"])
    assert not is_archive(tmp_path / "missing.tdz")
    (tmp_path / "text.tdz").write_text("hello")
    assert not is_archive(tmp_path / "text.tdz")
    (tmp_path / "sub.zip").write_bytes(craft_zip([("data/meta.json", b"{}")]))
    assert not is_archive(tmp_path / "sub.zip")
    (tmp_path / "any.suffix").write_bytes(craft_zip([("meta.json", b"{}")]))
    assert is_archive(tmp_path / "any.suffix")


def test_close_keeps_handed_out_views_valid(written: dict[str, Path]) -> None:
    store = ArchiveStore(written["tdz"])
    view = store.payload("a.memmap")
    store.close()
    assert bytes(view) == (written["ref"] / "a.memmap").read_bytes()


# -- foreign archives ---------------------------------------------------------------------


def test_zip_cli_raw_utf8_name_is_found(written: dict[str, Path]) -> None:
    """Info-ZIP writes raw UTF-8 without flag 0x800; tdview still finds the real name."""
    require_tool("zip")
    path = written["zip-cli"]
    with zipfile.ZipFile(path) as zf:
        (info,) = [
            i
            for i in zf.infolist()
            if i.filename.endswith(".memmap") and "/" not in i.filename and i.filename != "a.memmap"
        ]
        assert not info.flag_bits & 0x800 and info.filename != "ключ.memmap"  # cp437
    with open_store(path) as store:
        assert store.is_file("ключ.memmap")
        assert "ключ.memmap" in store.list_dir("")
        assert store.is_dir("nested")  # an explicit directory entry


def test_cp437_name_without_flag(tmp_path: Path) -> None:
    path = tmp_path / "cp437.zip"
    path.write_bytes(craft_zip([("meta.json", b"{}"), (b"caf\x82.memmap", b"abc")]))
    with open_store(path) as store:
        assert store.list_dir("") == ["café.memmap", "meta.json"]
        assert store.read_bytes("café.memmap", LIMIT) == b"abc"
        with zipfile.ZipFile(path) as zf:  # the same name as Python's zipfile
            assert "café.memmap" in zf.namelist()


def test_explicit_directory_entries(written: dict[str, Path]) -> None:
    with open_store(written["zipfile"]) as store:
        assert store.is_dir("nested") and not store.is_file("nested")
        assert "nested" not in store.keys()
        assert store.entry("meta.json").compression == "deflate"
        assert store.comment == b"hi"


def test_data_descriptors(written: dict[str, Path]) -> None:
    with zipfile.ZipFile(written["zipfile-stream"]) as zf:
        assert all(i.flag_bits & 0x8 for i in zf.infolist())
    with open_store(written["zipfile-stream"]) as store:
        assert store.read_bytes("meta.json", LIMIT) == (written["ref"] / "meta.json").read_bytes()


def test_prepended_bytes_shift_offsets(written: dict[str, Path]) -> None:
    with (
        ArchiveStore(written["zipfile-prepended"]) as store,
        ArchiveStore(written["zipfile"]) as plain,
    ):
        assert store.file_size > plain.file_size
        offset = store.payload_offset("a.memmap")
        assert offset > len(b"#!/bin/sh\nexit 0\n" * 7)
        assert bytes(store.payload("a.memmap")) == (written["ref"] / "a.memmap").read_bytes()


def test_lzma_without_end_marker(tmp_path: Path) -> None:
    path = tmp_path / "lz.zip"
    path.write_bytes(
        craft_zip([("meta.json", b"{}"), ("a.memmap", b"q" * 1000, 14)], lzma_eos=False)
    )
    with open_store(path) as store:
        assert bytes(store.decompress("a.memmap")) == b"q" * 1000


def test_empty_entries(tmp_path: Path) -> None:
    path = tmp_path / "empty.zip"
    path.write_bytes(craft_zip([("meta.json", b"{}"), ("e.memmap", b"", 8), ("f.memmap", b"", 0)]))
    with open_store(path) as store:
        assert store.read_bytes("e.memmap", 0) == b"" and store.read_bytes("f.memmap", 0) == b""
        assert bytes(store.payload("f.memmap")) == b""


def test_many_entries(tmp_path: Path) -> None:
    """A 20,000-entry archive opens and lists; children are indexed once, lazily."""
    n = 20_000
    entries = [("meta.json", b"{}")] + [(f"d{i % 100}/k{i}.memmap", b"x") for i in range(n)]
    path = tmp_path / "big.tdz"
    path.write_bytes(craft_zip(entries))
    with ArchiveStore(path) as store:
        assert len(store.keys()) == n + 1
        assert len(store.list_dir("")) == 101
        assert len(store.list_dir("d7")) == n // 100
        assert store.read_bytes("d7/k7.memmap", 1) == b"x"


@pytest.mark.parametrize("listed", [False, True])
def test_a_file_that_grows_while_it_is_read_is_read_up_to_the_limit(
    tmp_path: Path, monkeypatch, listed: bool
) -> None:
    """The size from ``fstat`` only sizes the first read: a file longer than it said is
    read on, whole when it stays within the limit, refused when it goes past it."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "meta.json").write_bytes(b"x" * 3000)
    store = DirectoryStore(tmp_path)
    if listed:
        store.list_dir("sub")
    real_fstat = os.fstat

    class Shorter:
        def __init__(self, st: os.stat_result) -> None:
            self.st_mode, self.st_size = st.st_mode, 10  # as it was before it grew

    monkeypatch.setattr(os, "fstat", lambda fd: Shorter(real_fstat(fd)))
    assert store.read_bytes("sub/meta.json", 5000) == b"x" * 3000
    with pytest.raises(LimitExceededError, match="above the limit of 2000 bytes"):
        store.read_bytes("sub/meta.json", 2000)


def test_plain_dirs_are_only_real_directories_with_plain_names(tmp_path: Path) -> None:
    """A walk trusts ``plain_dirs`` without probing: symlinks and names that need the
    per-key check (a leading dot) are left out, and are still answered by ``is_dir``."""
    (tmp_path / "a").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "c").write_bytes(b"x")
    (tmp_path / "b").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "a" / "inner").mkdir()
    store = DirectoryStore(tmp_path)
    assert store.plain_dirs("") == frozenset({"a"})
    assert store.plain_dirs("a") == frozenset({"inner"})
    assert store.is_dir("b") and store.is_dir(".hidden") and not store.is_dir("c")
    assert store.plain_entries("") == (frozenset({"c"}), frozenset({"a"}))
    fresh = DirectoryStore(tmp_path)
    assert fresh.plain_entries("a", 2) == (None, None)  # two names: probed, not listed
    assert fresh.plain_entries("a") == (frozenset(), frozenset({"inner"}))
    with ArchiveStore(_tiny_archive(tmp_path)) as archive:
        assert archive.plain_dirs("") is None  # archives answer per key
        assert archive.plain_entries("") == (None, None)


def _tiny_archive(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.tdz"
    TensorDict(a=torch.zeros(2), sub=TensorDict(b=torch.ones(1))).save(str(path))
    return path


@pytest.mark.skipif(
    open_dir(os.path.realpath("/")) is None, reason="folders open O_PATH on Linux only"
)
def test_a_root_path_that_leads_to_another_folder_is_opened_there(tmp_path: Path) -> None:
    """A root opened once at its real path is known again by its folder's identity
    (no readlink of /proc); when the same path later leads, through a symlink, to
    another folder, that folder is what opens, at its own real path."""
    path = tmp_path / "run" / "ckpt"
    TensorDict(a=torch.zeros(3)).memmap(path)
    first = open_dir(str(path))
    assert first is not None and first[0] == str(path) and first[1] >= 0
    os.close(first[1])
    again = open_dir(str(path))  # the same folder at the same path
    assert again is not None and again[0] == str(path) and again[1] >= 0
    os.close(again[1])
    (tmp_path / "run").rename(tmp_path / "old")
    other = tmp_path / "other" / "ckpt"
    TensorDict(a=torch.ones(3)).memmap(other)
    (tmp_path / "run").symlink_to(tmp_path / "other", target_is_directory=True)
    moved = open_dir(str(path))
    assert moved is not None and moved[0] == os.path.realpath(other) and moved[1] == -1
    store = DirectoryStore(path)
    assert store.read_bytes("a.memmap", 1 << 20) == torch.ones(3).numpy().tobytes()
    assert tdview.load_memmap(path)["a"].tolist() == [1.0, 1.0, 1.0]


def test_a_folder_and_its_meta_json_are_read_in_one_call_only_where_plain(
    tmp_path: Path,
) -> None:
    """``read_folder_meta``: the bytes of a plain sub-folder's ``meta.json`` (the folder
    then known as a probe knows it); None for whatever the general path must answer (a
    symlinked folder, a ``meta.json`` that is a symlink or absent, a file, an absent
    name), and the general path still answers for it. A parent not known yet is probed
    on the way, name by name."""
    root = tmp_path / "ckpt"
    for name in ("plain", "other", "linked_meta", "deep/er"):
        (root / name).mkdir(parents=True)
    (root / "plain" / "meta.json").write_bytes(b'{"a": 1}')
    (root / "other" / "meta.json").write_bytes(b'{"b": 2}')
    (root / "deep" / "er" / "meta.json").write_bytes(b'{"c": 3}')
    (root / "linked_meta" / "meta.json").symlink_to(root / "plain" / "meta.json")
    (root / "alias").symlink_to(root / "other", target_is_directory=True)
    (root / "file").write_bytes(b"x")
    store = DirectoryStore(root)
    try:
        assert store.read_folder_meta("plain", 1 << 20) == b'{"a": 1}'
        assert store.is_dir("plain") and store.is_file("plain/meta.json")
        assert store.read_folder_meta("deep/er", 1 << 20) == b'{"c": 3}'
        assert store.read_folder_meta("deep", 1 << 20) is None  # no meta.json in it
        assert store.is_dir("deep")
        for name in ("alias", "linked_meta", "file", "absent"):
            assert store.read_folder_meta(name, 1 << 20) is None, name
        assert not store.is_dir("file") and not store.is_dir("absent")
        assert store.is_dir("linked_meta")
        with pytest.raises(LimitExceededError, match="above the limit of 3 bytes"):
            store.read_folder_meta("other", 3)
        assert store.read_bytes("other/meta.json", 1 << 20) == b'{"b": 2}'
    finally:
        store.close()


def test_a_walk_past_the_bound_of_folders_held_keeps_their_parents(tmp_path: Path) -> None:
    """More sub-folders than a store keeps (dropped all at once beyond its bound): a load
    of such a tree reads every one as tensordict does."""
    from tdview.storage import _names

    count = _names._HELD_PROBES + 50
    tree = TensorDict(
        {"group": {f"m{index}": {"w": torch.full((2,), float(index))} for index in range(count)}}
    )
    tree.memmap(tmp_path / "ckpt", num_threads=8)
    loaded = tdview.load_memmap(tmp_path / "ckpt", device="meta")
    assert len(loaded["group"].keys()) == count
    mapped = tdview.load_memmap(tmp_path / "ckpt")
    assert float(mapped["group", f"m{count - 1}", "w"][1]) == count - 1
