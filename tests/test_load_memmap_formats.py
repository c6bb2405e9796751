"""``tdview.load_memmap`` keeps tensordict's contract on the formats it does not read.

Given a safetensors file, a shard set (its folder or its index), a consolidated file, an
HDF5 file, a zarr store or a torchrl archive checkpoint, each written by its own writer,
it raises what ``TensorDict.load_memmap`` raises on the same path (the same class, or a
tdview subclass of it, with tensordict's words first), and its message names the call
that reads the path, ``tdview.Checkpoint(path).load(...)``: that call, run, loads it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tensordict import TensorDict
from torch import nn

import tdview
from tdview.errors import TDViewError

from ._optional import require_module
from .test_safetensors_shards import write_shards


def _td() -> TensorDict:
    return TensorDict(a=torch.arange(4.0), b={"c": torch.ones(3, 2)}, batch_size=[])


def _safetensors(root: Path) -> Path:
    save_file({"a": torch.arange(4.0), "b.c": torch.ones(3, 2)}, root / "model.safetensors")
    return root / "model.safetensors"


def _shards(root: Path) -> Path:
    return write_shards(
        root / "shards", {"a": torch.ones(2), "b.c": torch.zeros(3), "d": torch.ones(1)}
    )


def _index(root: Path) -> Path:
    return _shards(root) / "model.safetensors.index.json"


def _consolidated(root: Path) -> Path:
    _td().consolidate(filename=root / "c.td")
    return root / "c.td"


def _h5(root: Path) -> Path:
    require_module("h5py", "tdview[h5] reads HDF5 through it")
    _td().to_h5(root / "t.h5").close()
    return root / "t.h5"


def _zarr(root: Path) -> Path:
    require_module("zarr", "tdview[zarr] reads zarr through it")
    _td().to_zarr(root / "t.zarr")
    return root / "t.zarr"


def _torchrl(root: Path) -> Path:
    torchrl_checkpoint = pytest.importorskip("torchrl.checkpoint")
    ckpt = torchrl_checkpoint.Checkpoint(format="archive")
    ckpt.register("policy", nn.Linear(2, 3))
    ckpt.save(root / "ckpt.zip")
    return root / "ckpt.zip"


WRITERS: dict[str, Callable[[Path], Path]] = {
    "safetensors file": _safetensors,
    "shard folder": _shards,
    "shard index": _index,
    "consolidated file": _consolidated,
    "hdf5 file": _h5,
    "zarr store": _zarr,
    "torchrl archive": _torchrl,
}
_CALL = re.compile(r"tdview\.Checkpoint\((?:'[^']*'|\"[^\"]*\")\)\.load\((?:'[^']*')?\)")


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_load_memmap_raises_what_tensordict_raises_and_names_the_reading_call(
    tmp_path: Path, fmt: str
) -> None:
    path = WRITERS[fmt](tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as reference:
            TensorDict.load_memmap(path)
        with pytest.raises(Exception) as ours:
            tdview.load_memmap(path)
    want, got = reference.value, ours.value
    assert isinstance(got, type(want)) and isinstance(got, TDViewError), (fmt, got, want)
    assert str(got).startswith(str(want).rstrip(".")), (fmt, str(got), str(want))
    found = _CALL.search(str(got))
    assert found is not None, (fmt, str(got))
    assert str(path) in found.group(0)
    loaded = eval(found.group(0), {"tdview": tdview})  # the call the message names
    assert isinstance(loaded, TensorDict) and loaded.keys(), (fmt, loaded)
