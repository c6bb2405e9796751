"""``mode``: copy-on-write ("r"), shared ("r+"), and per file (None); files never change
unless "r+" (or None on a writable file) asked for it."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, pack_memmap, refresh_archive_checksums

import tdview


def rplus(path: object) -> str:
    """The regex of the start of an ``r+`` refusal for ``path``."""
    return re.escape(f"Cannot open {path} with mode='r+': ")


def sample() -> TensorDict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    return TensorDict(
        a=torch.arange(4.0), sub=TensorDict(b=torch.zeros(3, dtype=torch.int32)), nt=nt
    )


def plain() -> TensorDict:
    return TensorDict(a=torch.arange(4.0), sub=TensorDict(b=torch.zeros(3, dtype=torch.int32)))


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    sample().memmap(tmp_path / "d")
    return tmp_path / "d"


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    plain().memmap(tmp_path / "p")
    pack_memmap(tmp_path / "p", tmp_path / "a.tdz")
    return tmp_path / "a.tdz"


@pytest.fixture
def read_only(monkeypatch):
    """Make chosen paths look unwritable (tests run as root, where os.access always says
    yes and every open for writing succeeds): ``os.access`` says no, and an open for
    writing is refused as the system refuses it (EACCES), by path or in a folder opened
    (``dir_fd``)."""
    denied: set[str] = set()
    real_access, real_open = os.access, os.open

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and os.path.abspath(os.fspath(path)) in denied:
            return False
        return real_access(path, mode, *args, **kwargs)

    def open_(path, flags, *args, dir_fd=None, **kwargs):
        if flags & (os.O_RDWR | os.O_WRONLY):
            where = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else ""
            if os.path.abspath(os.path.join(where, os.fspath(path))) in denied:
                raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(os, "open", open_)
    return denied


# mode=None maps a writable directory file shared: see test_default_mode_is_per_file
@pytest.mark.parametrize("which, mode", [("directory", "r"), ("archive", "r"), ("archive", None)])
def test_copy_on_write_never_changes_the_files(request, which: str, mode) -> None:
    path = request.getfixturevalue(which)
    before = snapshot(path)
    loaded = tdview.load_memmap(path, mode=mode)
    loaded["a"] += 100
    loaded["sub", "b"].fill_(7)
    assert loaded["a"][0] == 100 and loaded["sub", "b"][0] == 7
    assert snapshot(path) == before
    assert tdview.load_memmap(path, mode=mode)["a"][0] == 0
    assert loaded._memmap_prefix is None


def test_r_plus_writes_reach_the_directory_files(directory: Path) -> None:
    loaded = tdview.load_memmap(directory, mode="r+")
    loaded["a"][1] = 42
    loaded["sub", "b"][2] = 5
    assert torch.equal(
        TensorDict.load_memmap(directory, mode="r")["a"], torch.tensor([0.0, 42.0, 2.0, 3.0])
    )
    assert (directory / "sub" / "b.memmap").read_bytes()[8:12] == (5).to_bytes(4, "little")
    assert loaded._memmap_prefix == directory and loaded["sub"]._memmap_prefix == directory / "sub"


def test_default_mode_is_per_file(directory: Path, read_only: set[str]) -> None:
    read_only.add(str(directory / "sub" / "b.memmap"))
    before = (directory / "sub" / "b.memmap").read_bytes()
    loaded = tdview.load_memmap(directory)
    loaded["a"][0] = 9  # writable file: shared mapping, the write reaches the file
    loaded["sub", "b"][0] = 9  # "read-only" file: private mapping
    assert (directory / "a.memmap").read_bytes()[:4] == torch.tensor([9.0]).numpy().tobytes()
    assert (directory / "sub" / "b.memmap").read_bytes() == before
    assert loaded["a"]._mode is None


def test_r_plus_refuses_a_file_it_cannot_write(directory: Path, read_only: set[str]) -> None:
    target = str(directory / "sub" / "b.memmap")
    read_only.add(target)
    with pytest.raises(PermissionError, match=rplus(target) + "the file is not"):
        tdview.load_memmap(directory, mode="r+")


def test_r_plus_archive_writes_reach_the_file_and_leave_crcs_stale(archive: Path) -> None:
    loaded = tdview.load_memmap(archive, mode="r+")
    loaded["a"][0] = 123
    loaded["sub", "b"].fill_(4)
    del loaded
    again = tdview.load_memmap(archive, mode="r")
    assert again["a"][0] == 123 and again["sub", "b"].tolist() == [4, 4, 4]
    assert subprocess.run(["unzip", "-tq", str(archive)], capture_output=True).returncode != 0
    refresh_archive_checksums(archive)
    result = subprocess.run(["unzip", "-tq", str(archive)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_r_plus_archive_must_be_writable(archive: Path, read_only: set[str]) -> None:
    read_only.add(str(archive))
    with pytest.raises(PermissionError, match="the file is not writable"):
        tdview.load_memmap(archive, mode="r+")


@pytest.mark.parametrize("compression", ["deflate", "bzip2", "lzma"])
def test_r_plus_refuses_compressed_entries(tmp_path: Path, compression: str) -> None:
    plain().memmap(tmp_path / "p")
    path = tmp_path / "c.zip"
    pack_memmap(tmp_path / "p", path, compression=compression)
    with pytest.raises(
        RuntimeError,
        match=rplus(path)
        + re.escape(
            "entry 'a.memmap' is compressed, so in-place writes cannot propagate to the file. "
            "Re-save the archive without compression to make it writable."
        ),
    ):
        tdview.load_memmap(path, mode="r+")
    tdview.load_memmap(path, mode="r+", device="meta")  # reads no entry: nothing to refuse


def test_r_plus_refuses_unaligned_entries(tmp_path: Path) -> None:
    TensorDict(x=torch.arange(3, dtype=torch.float64)).memmap(tmp_path / "p")
    path = tmp_path / "z.zip"
    with zipfile.ZipFile(path, "w") as zf:  # no alignment: x.memmap's data starts at 38
        zf.write(tmp_path / "p" / "x.memmap", "x.memmap")
        zf.write(tmp_path / "p" / "meta.json", "meta.json")
    offset = tdview.Checkpoint(path).store.payload_offset("x.memmap")  # type: ignore[attr-defined]
    assert offset % 8
    with pytest.raises(RuntimeError, match=r"the payload of entry 'x\.memmap' is not aligned"):
        tdview.load_memmap(path, mode="r+")
    assert torch.equal(tdview.load_memmap(path)["x"], torch.arange(3, dtype=torch.float64))


def test_r_plus_refuses_nested_entries(tmp_path: Path) -> None:
    sample().memmap(tmp_path / "p")
    pack_memmap(tmp_path / "p", tmp_path / "n.tdz")
    with pytest.raises(RuntimeError, match=r"entry 'nt\.memmap' is a nested tensor"):
        tdview.load_memmap(tmp_path / "n.tdz", mode="r+")


@pytest.mark.parametrize("mode", ["w", "rw", "R", 1, b"r"])
def test_bad_mode(directory: Path, mode) -> None:
    with pytest.raises(ValueError, match=rf"^mode must be 'r', 'r\+' or None, got {mode!r}\.$"):
        tdview.load_memmap(directory, mode=mode)
    with pytest.raises(ValueError, match="mode must be"):
        tdview.Checkpoint(directory).load_leaf("a", mode=mode)
