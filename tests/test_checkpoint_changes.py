"""A checkpoint that changes after it was opened (issue 17): the index caches listings, and
the world moves on. Each file is checked again when it is opened, on the descriptor
opened, and mapped from that descriptor.

One test per case; each fails without its fix (a load that returns the outside file's
bytes, a load that never returns).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview import Checkpoint
from tdview.errors import UnsafeCheckpointError
from tdview.protocol._preview import preview

SECRET = torch.full((6,), 7.0)


def _saved(path: Path) -> Path:
    TensorDict(a=torch.arange(6.0), sub=TensorDict(b=torch.ones(3, dtype=torch.int32))
               ).memmap(path)
    return path


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(SECRET.numpy().tobytes())
    return secret


# -- a leaf file swapped for a symlink out of the root, after the index listed it ------


@pytest.mark.parametrize("mode", [None, "r", "r+"])
def test_a_leaf_swapped_for_a_symlink_out_of_the_root_is_refused(
        tmp_path: Path, mode: str | None) -> None:
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
        tmp_path: Path, mode: str | None) -> None:
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
