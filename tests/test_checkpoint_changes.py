"""A checkpoint that changes after it was opened (issue 17): the index caches listings and
the archive's mapping, and the world moves on. Each file is checked again when it is
opened, on the descriptor opened, and mapped from that descriptor; every read tdview makes
of an archive's mapping first checks that the file did not shrink.

One test per case; each fails without its fix (a load that returns the outside file's
bytes, a load that never returns, a process killed by SIGBUS).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict, pack_memmap

import tdview
from tdview import Checkpoint
from tdview.errors import ArchiveError, UnsafeCheckpointError
from tdview.protocol._preview import preview

SECRET = torch.full((6,), 7.0)


def _saved(path: Path) -> Path:
    TensorDict(a=torch.arange(6.0), sub=TensorDict(b=torch.ones(3, dtype=torch.int32))).memmap(path)
    return path


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(SECRET.numpy().tobytes())
    return secret


# -- a leaf file swapped for a symlink out of the root, after the index listed it ------


@pytest.mark.parametrize("mode", [None, "r", "r+"])
def test_a_leaf_swapped_for_a_symlink_out_of_the_root_is_refused(
    tmp_path: Path, mode: str | None
) -> None:
    root = _saved(tmp_path / "ck")
    secret = _secret(tmp_path)
    leaf = root / "a.memmap"
    with Checkpoint(root) as ckpt:
        assert ckpt.node("a").file == "a.memmap" and not ckpt.node("a").problems
        leaf.unlink()
        leaf.symlink_to(secret)
        with pytest.raises(UnsafeCheckpointError, match=str(leaf)):
            got = ckpt.load_leaf("a", mode=mode)
            got += 1  # the outside file mapped shared would change here
        with pytest.raises(UnsafeCheckpointError, match=str(leaf)):
            ckpt.load(mode=mode)
        with pytest.raises(UnsafeCheckpointError, match=str(leaf)):
            preview(ckpt, ("a",), 4)
    assert secret.read_bytes() == SECRET.numpy().tobytes()


# -- a leaf file swapped for a FIFO ---------------------------------------------------


def _returns(call, fifo: Path, seconds: float = 20.0) -> BaseException | None:
    """Run ``call`` in a thread; fail (after unblocking it) when it has not returned
    within ``seconds``. Returns what it raised."""
    raised: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            raised[0] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer: the blocked open returns
        os.close(fd)
        thread.join(seconds)
        pytest.fail(f"the load blocked on the FIFO {fifo}")
    return raised[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("mode", ["r", None])
def test_a_leaf_swapped_for_a_fifo_is_refused_without_blocking(
    tmp_path: Path, mode: str | None
) -> None:
    root = _saved(tmp_path / "ck")
    leaf = root / "sub" / "b.memmap"
    with Checkpoint(root) as ckpt:
        assert not ckpt.node(("sub", "b")).problems
        leaf.unlink()
        os.mkfifo(leaf)
        error = _returns(lambda: ckpt.load_leaf(("sub", "b"), mode=mode), leaf)
    assert isinstance(error, UnsafeCheckpointError), error
    assert str(leaf) in str(error) and "not a regular file" in str(error)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_linked_blob_swapped_for_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """A leaf read through a link out of the root (a trusted folder): its target becomes a
    FIFO after the index resolved the link."""
    root = _saved(tmp_path / "ck")
    shared = tmp_path / "shared"
    shared.mkdir()
    blob = shared / "a.bin"
    os.replace(root / "a.memmap", blob)
    (root / "a.memmap").symlink_to(blob)
    with tdview.trust_paths(shared), Checkpoint(root) as ckpt:
        assert ckpt.store.link("a.memmap") is not None and not ckpt.node("a").problems
        blob.unlink()
        os.mkfifo(blob)
        error = _returns(lambda: ckpt.load_leaf("a"), blob)
    assert isinstance(error, UnsafeCheckpointError), error
    assert "not a regular file" in str(error)


# -- an archive truncated by another process after it was opened ----------------------

_TRUNCATED = r"""
import os, sys, warnings
import tdview
from tdview.errors import ArchiveError
path = sys.argv[1]
warnings.simplefilter("ignore")
ckpt = tdview.Checkpoint(path)
loaded = ckpt.load()  # every local header read, the mapping made
del loaded
os.truncate(path, 4096)  # another process shrinks the file in place
reads = {
    "aligned leaf": lambda: ckpt.load_leaf("a"),
    "unaligned leaf": lambda: ckpt.load_leaf("odd"),
    "nested leaf": lambda: ckpt.load_leaf("nt"),
    "compressed leaf": lambda: ckpt.load_leaf("z"),
    "whole load": lambda: ckpt.load(),
}
import torch
if torch.cuda.is_available():  # a copy to a device reads the mapping
    reads["to cuda"] = lambda: ckpt.load_leaf("a", device="cuda")
for name, read in reads.items():
    try:
        got = read()
    except ArchiveError as error:
        print(name, "refused:", error, flush=True)
    except Exception as error:
        print(name, "raised", type(error).__name__, error, flush=True)
    else:
        print(name, "returned", float(got["a"].sum() if hasattr(got, "keys") else
                                       got.float().sum()), flush=True)
"""


def _archive(tmp_path: Path) -> Path:
    """A zip of stored entries, one unaligned (written by zipfile), a nested leaf, and a
    compressed one: every way tdview reads a leaf of an archive."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.arange(3000.0), torch.arange(2000.0)])
    src = tmp_path / "src"
    TensorDict(
        a=torch.arange(50_000.0),
        odd=torch.arange(3000, dtype=torch.float64),
        nt=nt,
        z=torch.zeros(20_000),
    ).memmap(src)
    path = tmp_path / "ck.zip"
    with zipfile.ZipFile(path, "w") as zf:  # no alignment: odd.memmap starts anywhere
        for file in sorted(src.rglob("*")):
            if file.is_file():
                method = zipfile.ZIP_DEFLATED if file.name == "z.memmap" else zipfile.ZIP_STORED
                zf.write(file, file.relative_to(src).as_posix(), compress_type=method)
    return path


def test_an_archive_truncated_after_it_was_opened_is_an_error_not_a_signal(tmp_path: Path) -> None:
    path = _archive(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", _TRUNCATED, str(path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, (
        f"killed by {signal.Signals(-run.returncode).name}"
        if run.returncode < 0
        else run.returncode,
        run.stdout,
        run.stderr[-3000:],
    )
    lines = run.stdout.splitlines()
    assert len(lines) == 5 + torch.cuda.is_available(), run.stdout
    for line in lines:
        assert "refused:" in line, line
        assert f"{path} changed since it was opened: it is now 4096 bytes" in line, line


def test_an_archive_replaced_after_it_was_opened_is_not_mapped(tmp_path: Path) -> None:
    """Another file of the same size renamed over the archive before its first load: the
    mapping is made from the file the index read, or refused, never from the new one."""
    src = _saved(tmp_path / "src")
    path, other = tmp_path / "a.tdz", tmp_path / "b.tdz"
    pack_memmap(src, path)
    shutil.copy(path, other)
    with Checkpoint(path) as ckpt:
        assert not ckpt.node("a").problems
        data = bytearray(other.read_bytes())
        offset = ckpt.store.stored_span("a.memmap")[0]  # type: ignore[attr-defined]
        data[offset : offset + 24] = SECRET.numpy().tobytes()
        other.write_bytes(bytes(data))
        os.replace(other, path)
        with pytest.raises(ArchiveError, match=f"{path} changed since it was opened"):
            ckpt.load_leaf("a")


# -- after a load returns: what the loader's docstring promises ------------------------

_AFTER_RETURN = r"""
import os, sys, warnings
import tdview
from tensordict import pack_memmap
path, src, how = sys.argv[1], sys.argv[2], sys.argv[3]
warnings.simplefilter("ignore")
loaded = tdview.load_memmap(path)  # views of the archive's mapping
kept = loaded["a"].clone()
if how == "replace":  # tensordict's archive writer: a new file renamed over the path
    pack_memmap(src, path)
else:  # another process shrinks the file in place
    os.truncate(path, 4096)
print("clone", float(kept[-1]), flush=True)
print("view", float(loaded["a"][-1]), flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's mmap semantics")
@pytest.mark.parametrize("how", ["replace", "truncate"])
def test_what_a_load_returned_outlives_a_replaced_archive_not_a_truncated_one(
    tmp_path: Path, how: str
) -> None:
    """The documented protection (a file replaced leaves the mapping whole, a clone never
    depends on the file) and the documented hazard (a view read past the end of a file
    truncated in place is a SIGBUS, which ``-X faulthandler`` names)."""
    src = tmp_path / "src"
    TensorDict(a=torch.arange(50_000.0)).memmap(src)
    path = tmp_path / "a.tdz"
    pack_memmap(src, path)
    run = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", _AFTER_RETURN, str(path), str(src), how],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.stdout.splitlines()[0] == "clone 49999.0", (run.stdout, run.stderr[-2000:])
    if how == "replace":
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.splitlines()[1] == "view 49999.0"
    else:
        assert run.returncode == -signal.SIGBUS, (run.returncode, run.stderr[-2000:])
        assert "Bus error" in run.stderr and "<string>" in run.stderr, run.stderr[-2000:]


_TRUNCATED_IN_PREVIEW = r"""
import os, sys, warnings
import tdview
from tdview.errors import ArchiveError
from tdview.protocol import _preview
path = sys.argv[1]
warnings.simplefilter("ignore")
ckpt = tdview.Checkpoint(path)
calls = []
def truncate_once():  # another process shrinks the file while statistics are read
    if not calls:
        os.truncate(path, 4096)
    calls.append(1)
try:
    _preview.preview(ckpt, ("a",), 4, truncate_once)
except ArchiveError as error:
    print("refused:", error, flush=True)
else:
    print("returned", flush=True)
"""


def test_an_archive_truncated_during_a_preview_is_an_error_not_a_signal(tmp_path: Path) -> None:
    """The preview reads its leaf's view of the mapping chunk by chunk, after the load
    checked the file: each chunk asks again."""
    path = _archive(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", _TRUNCATED_IN_PREVIEW, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, (
        f"killed by {signal.Signals(-run.returncode).name}"
        if run.returncode < 0
        else run.returncode,
        run.stdout,
        run.stderr[-3000:],
    )
    assert run.stdout.startswith("refused:"), run.stdout
    assert f"{path} changed since it was opened: it is now 4096 bytes" in run.stdout


# -- a folder on a leaf's path swapped for a symlink out of the root -------------------


@pytest.mark.parametrize("mode", [None, "r", "r+"])
def test_a_folder_swapped_for_a_symlink_out_of_the_root_is_refused(
    tmp_path: Path, mode: str | None
) -> None:
    """The leaf's own name is still a regular file (O_NOFOLLOW passes), but the folder
    holding it now leads out of the root: the descriptor's real name says so."""
    root = _saved(tmp_path / "ck")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.memmap").write_bytes(torch.full((3,), 7, dtype=torch.int32).numpy().tobytes())
    with Checkpoint(root) as ckpt:
        assert ckpt.node("sub/b").file == "sub/b.memmap" and not ckpt.node("sub/b").problems
        shutil.rmtree(root / "sub")
        (root / "sub").symlink_to(outside, target_is_directory=True)
        with pytest.raises(UnsafeCheckpointError, match="a folder on its path changed"):
            got = ckpt.load_leaf("sub/b", mode=mode)
            got += 1  # the outside file mapped shared would change here
    assert (outside / "b.memmap").read_bytes() == torch.full(
        (3,), 7, dtype=torch.int32
    ).numpy().tobytes()
