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
