"""Fuzz targets of tdview's own code for HDF5 and zarr (:mod:`tdview.storage._group_tree`):
the byte ranges of an array read through the library's slicing, the batch size a group
gets (against tensordict's ``_set_max_batch_size``), and damaged HDF5 files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict
from tensordict.utils import _set_max_batch_size

from tdview.errors import LeafDataError, TDViewError
from tdview.index import Checkpoint
from tdview.storage import GroupTreeStore
from tdview.storage._group_tree import Array, Group

from ._optional import require_module


class NumpyStore(GroupTreeStore):
    """A store over numpy arrays that records each block it is asked for."""

    kind = "numpy"

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        tree = Group("", "/")
        for name, data in arrays.items():
            tree.members.append(
                Array(name, f"/{name}", data.shape, data.dtype.name, "tensor", data)
            )
        self.asked: list[int] = []
        super().__init__("numpy", tree)

    def read_block(self, array: Array, index: tuple[Any, ...]) -> np.ndarray:
        block = np.asarray(array.ref[index])
        self.asked.append(block.size)
        return block

    def value_json(self, array: Array) -> str:
        raise AssertionError("no value here")


@settings(max_examples=300, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=0, max_size=4),
    dtype=st.sampled_from(["uint8", "int16", "float32", "float64", "bool"]),
    data=st.data(),
)
def test_a_byte_range_is_the_c_order_bytes(shape: list[int], dtype: str, data: Any) -> None:
    values = (np.arange(math.prod(shape)) % 7).astype(dtype).reshape(shape)
    store = NumpyStore({"a": values})
    whole = values.tobytes()
    start = data.draw(st.integers(0, len(whole) - 1))
    stop = data.draw(st.integers(start + 1, len(whole)))
    dest = bytearray(stop - start)
    store.read_into("a.memmap", start, dest)
    assert bytes(dest) == whole[start:stop]
    # the rows of one dim that hold the range, never more
    row = math.prod(shape[1:]) if shape else 1
    items = -(-stop // values.itemsize) - start // values.itemsize
    assert sum(store.asked) <= items + 2 * row


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=3), min_size=1, max_size=4))
def test_the_batch_size_is_tensordict_s(shapes: list[list[int]]) -> None:
    """Leaves of random shapes, in a nested group too: the batch size a group gets is
    the one tensordict's ``_set_max_batch_size`` gives."""
    leaves = {f"k{i}": torch.zeros(s) for i, s in enumerate(shapes)}
    td = TensorDict(leaves, batch_size=[])
    td["sub"] = TensorDict(dict(leaves), batch_size=[])
    _set_max_batch_size(td)
    sub = Group("sub", "/sub", [Array(k, k, tuple(v.shape), "float32", "tensor", None)
                                for k, v in leaves.items()])  # fmt: skip
    root = Group("", "/", [*sub.members, sub])
    assert root.shared_batch() == list(td.batch_size)
    assert sub.shared_batch() == list(td["sub"].batch_size)


def test_a_damaged_file_is_a_tdview_error(tmp_path: Path) -> None:
    h5py = require_module("h5py", "tdview[h5] reads HDF5 through it")
    path = tmp_path / "whole.h5"
    with h5py.File(path, "w") as f:
        f.create_group("g")["x"] = np.arange(100.0)
        f["y"] = np.ones((4, 4), dtype=np.int32)
    data = path.read_bytes()
    rng = np.random.default_rng(35)
    for trial in range(60):
        damaged = bytearray(data)
        if trial % 3 == 0:
            damaged = damaged[: int(rng.integers(8, len(data)))]  # truncated
        else:
            for at in rng.integers(0, len(data), size=8):
                damaged[int(at)] = int(rng.integers(0, 256))
        bad = tmp_path / f"bad{trial}.h5"
        bad.write_bytes(bytes(damaged))
        try:
            with Checkpoint(bad) as ckpt:
                ckpt.load()
        except TDViewError:
            pass  # refused with tdview's own error, naming the file
        except Exception as error:  # noqa: BLE001 - any other is the failure
            pytest.fail(f"{bad}: {type(error).__name__}: {error}")


def test_a_damaged_chunk_is_a_leaf_data_error_naming_it(tmp_path: Path) -> None:
    h5py = require_module("h5py", "tdview[h5] reads HDF5 through it")
    path = tmp_path / "gz.h5"
    TensorDict(x=torch.arange(4000.0), batch_size=[]).to_h5(path, compression="gzip").close()
    with h5py.File(path) as f:
        info = f["x"].id.get_chunk_info(0)
    data = bytearray(path.read_bytes())
    data[info.byte_offset : info.byte_offset + info.size] = b"\xff" * info.size
    path.write_bytes(bytes(data))
    with Checkpoint(path) as ckpt:
        with pytest.raises(LeafDataError, match=r"gz\.h5::/x: h5py cannot read it"):
            ckpt.load()
