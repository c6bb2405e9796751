"""A tensordict of every kind of entry that ``to_h5`` and ``to_zarr`` write, and the checks
that a tdview load of it (root, subtree, one leaf) is what the format's own reader gives.

``to_h5`` and ``to_zarr`` (tensordict 0.15) cannot write bfloat16: they go through numpy,
which has no such dtype (:func:`assert_bfloat16_is_refused_by` says so, and fails the day
a writer takes it, so that it is added to :func:`every_kind`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, tensorclass

from tdview.index import Checkpoint, walk

from .compare import assert_same

__all__ = [
    "SUBPATHS",
    "Pose",
    "assert_bfloat16_is_refused_by",
    "assert_each_leaf_loads_as",
    "assert_loads_as",
    "assert_options_keep_the_leaves",
    "every_kind",
    "in_order_of",
]

#: the subtrees loaded: the root, a nested tensordict, one nested deeper, a tensorclass,
#: non-tensor values alone (with their group's batch size, as the readers give them)
SUBPATHS = [None, "nested", "nested/deeper", "pose", "name", "step", "nested/note", "pose/tag"]
SUBPATHS += ["labels"]


@tensorclass
class Pose:
    """A tensorclass saved inside a tensordict (both readers give it as a TensorDict)."""

    pos: torch.Tensor
    tag: str


def every_kind() -> TensorDict:
    """Nested tensordicts, a tensorclass, non-tensor data and a stack, and each dtype both
    writers take (bool, signed and unsigned integers, floats, complex)."""
    g = torch.Generator().manual_seed(3535)
    td = TensorDict(
        f32=torch.randn(4, 3, generator=g),
        f16=torch.randn(4, 2, generator=g).to(torch.float16),
        f64=torch.randn(4, dtype=torch.float64, generator=g),
        mask=torch.rand(4, 3, generator=g) > 0.5,
        i8=torch.arange(4, dtype=torch.int8) - 2,
        i16=torch.arange(4, dtype=torch.int16) * 300,
        i32=torch.arange(4, dtype=torch.int32) - 7,
        i64=torch.arange(8).reshape(4, 2) << 40,
        u8=torch.arange(4, dtype=torch.uint8) + 250,
        c64=torch.randn(4, generator=g, dtype=torch.complex64),
        nested=TensorDict(
            x=torch.arange(8, dtype=torch.int64).reshape(4, 2),
            done=torch.tensor([True, False, False, True]),
            deeper=TensorDict(z=torch.randn(4, 2, 5, generator=g), batch_size=[4, 2]),
            batch_size=[4],
        ),
        pose=Pose(pos=torch.randn(4, 3, generator=g), tag="left", batch_size=[4]),
        batch_size=[4],
    )
    td["name"] = "every kind"
    td["step"] = NonTensorData(7)
    td["nested", "note"] = "inner"
    td["labels"] = NonTensorStack(*"abcd")
    return td


def assert_loads_as(ckpt: Checkpoint, reference: TensorDict, subpath: str | None) -> None:
    """A load of ``subpath`` is the reference's subtree: classes, keys, batch sizes,
    names, devices, the lock state, and each leaf's type (a plain ``torch.Tensor`` in
    memory where the reference gives one), dtype, shape and value, non-tensor values and
    their types (``tests/compare.py``), the keys' order apart (:func:`in_order_of`)."""
    got = ckpt.load(subpath=subpath)
    want = reference if subpath is None else reference.get(tuple(subpath.split("/")))
    assert_same(in_order_of(got, want), want)


def assert_options_keep_the_leaves(ckpt: Checkpoint, reference: TensorDict) -> None:
    """``mode="r"`` and ``device="cpu"`` load what the default does (the reference moved
    there); ``device="meta"`` reads nothing and gives the reference's classes, shapes and
    dtypes on meta; ``index=`` gives the reference's rows. (``mode="r+"`` is refused:
    each format's own test.)"""
    assert_same(in_order_of(ckpt.load(mode="r"), reference), reference)
    nested = reference["nested"]
    on_cpu, on_meta = nested.to("cpu"), nested.to("meta")
    assert_same(in_order_of(ckpt.load(subpath="nested", device="cpu"), on_cpu), on_cpu)
    meta = in_order_of(ckpt.load(subpath="nested", device="meta"), on_meta)
    assert_same(meta, on_meta, values=False, storage=False)
    rows = nested[1:3]  # an indexed load: the reference indexed
    assert_same(in_order_of(ckpt.load(subpath="nested", index=slice(1, 3)), rows), rows)


def in_order_of(got: Any, want: Any) -> Any:
    """``got`` with the same keys as ``want`` (asserted), nested tensordicts put in
    ``want``'s order: tdview gives ``load_memmap``'s (tensors first), ``from_h5`` and
    ``from_zarr`` the file's (by name), and tensordicts of both orders are equal."""
    if not isinstance(got, TensorDict):  # a non-tensor value, a stack: no keys to order
        return got
    assert sorted(got.keys()) == sorted(want.keys()), (list(got.keys()), list(want.keys()))
    entries = got._tensordict
    got._tensordict = {key: entries[key] for key in want.keys()}
    for key, value in got._tensordict.items():
        inner = want._get_str(key, None)
        in_order_of(value, inner)
    return got


def assert_each_leaf_loads_as(ckpt: Checkpoint, reference: TensorDict) -> int:
    """``load_leaf`` of every tensor leaf is the reference's leaf: its type (a plain
    ``torch.Tensor``), dtype, shape and value. Returns how many leaves were loaded."""
    count = 0
    for node in walk(ckpt, ckpt.root):
        if not node.is_leaf or node.record is None:
            continue
        got, want = ckpt.load_leaf("/".join(node.path)), reference.get(node.path)
        assert type(got) is type(want) is torch.Tensor, (node.path, type(got))
        assert got.dtype == want.dtype and got.shape == want.shape, node.path
        assert torch.equal(got, want), node.path
        count += 1
    return count


def assert_bfloat16_is_refused_by(write: Callable[[TensorDict], object]) -> None:
    """The writer refuses bfloat16 (numpy has no such dtype): no such file to load."""
    with pytest.raises(TypeError, match="BFloat16"):
        write(TensorDict(b=torch.ones(2, dtype=torch.bfloat16), batch_size=[2]))
