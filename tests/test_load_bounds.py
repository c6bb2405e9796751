"""What one load keeps while it runs (issue 18: a meta load of a million leaves peaks at no
more than tensordict's): the caches of a checkpoint opened for one load are bounded, and
leaf files are mapped without a probe first, with the same results and the same warnings
and errors as when they are probed.

The bounds are made small here (monkeypatched) so that a tree of a few dozen folders
passes them; the load is compared with tensordict's each time.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import tdview
from tdview.index import Checkpoint, _checkpoint
from tdview.loader import _api, _context
from tdview.storage import _names

from .compare import assert_same

BOUND = 6


def _modules(path: Path, layers: int = 12) -> Path:
    """A module-shaped tree: one folder per module, a few leaves each."""
    TensorDict(
        model=TensorDict(
            {
                str(i): TensorDict(
                    attn=TensorDict(q=torch.randn(3, i + 1), k=torch.randn(3, i + 1)),
                    norm=TensorDict(weight=torch.ones(i + 2)),
                )
                for i in range(layers)
            }
        )
    ).memmap(path)
    return path


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checkpoint, "_ONE_LOAD_METAS", BOUND)
    monkeypatch.setattr(_names, "_HELD_PROBES", BOUND)
    monkeypatch.setattr(_context, "_MAX_PREFIXES", BOUND)


@pytest.mark.parametrize("device", [None, "meta"])
def test_one_load_keeps_bounded_caches(
    tmp_path: Path, small_bounds: None, device: str | None
) -> None:
    path = _modules(tmp_path / "ckpt")
    seen: dict[str, int] = {"metas": 0, "dirs": 0, "probes": 0}
    real_build = _api.build

    def build(ctx: _context.LoadContext, *args: object, **kwargs: object) -> object:
        result = real_build(ctx, *args, **kwargs)  # type: ignore[arg-type]
        ckpt = ctx.ckpt
        seen["metas"] = max(seen["metas"], len(ckpt._metas))
        seen["dirs"] = max(seen["dirs"], len(ckpt.store._dirs))  # type: ignore[attr-defined]
        seen["probes"] = max(seen["probes"], len(ckpt.store._probes))  # type: ignore[attr-defined]
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_api, "build", build)
        loaded = tdview.load_memmap(path, device=device)
    assert 0 < seen["metas"] <= BOUND and seen["dirs"] <= BOUND and seen["probes"] <= BOUND
    reference = TensorDict.load_memmap(path, device=device)
    assert_same(loaded, reference, values=device is None)
    # the folder paths tensordict records, made again from the root after a drop
    for key in (("model", "0", "attn"), ("model", "11", "norm"), ("model",)):
        assert loaded.get(key)._memmap_prefix == reference.get(key)._memmap_prefix, key


def test_a_checkpoint_kept_open_keeps_every_meta(tmp_path: Path, small_bounds: None) -> None:
    """An index (``Checkpoint``, not opened for one load) keeps what it parsed: a second
    load of it reads no ``meta.json`` again."""
    path = _modules(tmp_path / "ckpt")
    with Checkpoint(path) as ckpt:
        ckpt.load()
        read = ckpt.meta_bytes_read
        assert len(ckpt._metas) > BOUND
        assert_same(ckpt.load(), TensorDict.load_memmap(path))
        assert ckpt.meta_bytes_read == read


def test_leaves_mapped_unprobed_keep_the_missing_leaf_warning(tmp_path: Path) -> None:
    """A leaf file removed: left out with the warning a probed load gives (the map tells
    it is absent, then its node says why)."""
    path = _modules(tmp_path / "ckpt", layers=2)
    os.remove(path / "model" / "1" / "attn" / "q.memmap")
    with pytest.warns(UserWarning, match=r"model/1/attn/q\.memmap is missing"):
        loaded = tdview.load_memmap(path)
    assert ("model", "1", "attn", "q") not in loaded.keys(True, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(loaded, TensorDict.load_memmap(path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_leaves_mapped_unprobed_refuse_a_fifo(tmp_path: Path) -> None:
    """A FIFO swapped in for a leaf file is refused without blocking, as when probed."""
    path = _modules(tmp_path / "ckpt", layers=2)
    leaf = path / "model" / "0" / "norm" / "weight.memmap"
    os.remove(leaf)
    os.mkfifo(leaf)
    with pytest.raises(tdview.errors.UnsafeCheckpointError, match=r"weight\.memmap"):
        tdview.load_memmap(path)


def test_a_terabyte_leaf_mapped_copy_on_write_says_why_it_cannot_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leaf of 1 TiB (a sparse file: its meta.json and file damaged to say so) loaded
    with ``mode="r"``: Linux refuses a copy-on-write mapping larger than the memory
    commit limit (ENOMEM); the error names the file, its size, and the shared modes that
    map it. Where this machine does not refuse it (overcommit allowed), the ENOMEM is
    simulated at the ``mmap`` call (monkeypatched), and the same error is asserted. The
    shared mapping (``mode="r+"``) loads it either way."""
    import ctypes
    import errno
    import json

    from tdview.loader import _fdmap

    path = tmp_path / "ckpt"
    TensorDict(a=torch.zeros(3), sub=TensorDict(x=torch.ones(4))).memmap(path)
    meta = json.loads((path / "sub" / "meta.json").read_text())
    meta["x"]["shape"] = [1 << 38]  # float32: 1 TiB
    (path / "sub" / "meta.json").write_text(json.dumps(meta))
    leaf = path / "sub" / "x.memmap"
    os.truncate(leaf, 1 << 40)
    shared = tdview.load_memmap(path, mode="r+")
    assert shared["sub", "x"].shape == (1 << 38,) and float(shared["sub", "x"][3]) == 1.0
    del shared
    try:
        loaded = tdview.load_memmap(path, mode="r")
    except tdview.errors.MapRefusedError as refused:
        error = refused
    else:  # this machine maps it: refuse as Linux does under its commit limit
        del loaded

        real_mmap = _fdmap._mmap

        def refuse(addr: object, length: int, *args: object) -> int | None:
            if length < 1 << 40:
                return real_mmap(addr, length, *args)
            ctypes.set_errno(errno.ENOMEM)
            return _fdmap._FAILED

        monkeypatch.setattr(_fdmap, "_mmap", refuse)
        with pytest.raises(tdview.errors.MapRefusedError) as caught:
            tdview.load_memmap(path, mode="r")
        error = caught.value
    assert isinstance(error, OSError) and error.errno == errno.ENOMEM
    message = str(error)
    assert str(leaf) in message and "1.10 TB" in message, message
    assert "copy-on-write" in message and "commit limit" in message, message
    assert "mode='r+'" in message and "shared" in message, message
