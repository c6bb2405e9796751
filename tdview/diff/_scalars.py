"""The numbers of one-element leaves (``step``, ``epoch``, a loss scale), read so that a
scalar's change shows inline (``step 1000 → 2000``): a few bytes of one entry, decoded
with numpy (no torch), never more than :data:`MAX_SCALAR_BYTES` a leaf. Two numbers read
are a value comparison: a row the same by its metadata that holds two different numbers
is changed (``"content"``)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import TDViewError
from ..index import LeafFile, Node
from ._result import SAME, Row
from ._sides import Side
from ._walk import leaf_parts

#: The largest file read (a float64 or an int64; a longer file is not a scalar's).
MAX_SCALAR_BYTES = 8

# dtype name -> numpy dtype (little-endian, as tensordict writes); bfloat16 is its own
_NUMPY = {
    "bool": "?",
    "uint8": "u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "int8": "i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
}


def read_scalars(rows: list[Row], a: Side, b: Side) -> None:
    """Fill ``row.scalars`` of every row with a one-element leaf on a side (in place); a
    row the same by metadata whose two numbers differ becomes changed."""
    for row in rows:
        if row.problem or not (_one(row.item_a) or _one(row.item_b)):
            continue
        pair = (scalar_of(a.ckpt.store, row.item_a), scalar_of(b.ckpt.store, row.item_b))
        if pair == (None, None):
            continue
        row.scalars = pair
        if row.status == SAME and None not in pair and pair[0] != pair[1]:
            row.mark("content")


def _one(item: LeafFile | Node | None) -> bool:
    """A leaf of one element (its record says so: no facts made for a plain leaf)."""
    if isinstance(item, LeafFile):
        return item.record.numel == 1
    return (
        item is not None and item.is_leaf and item.record is not None and (item.record.numel == 1)
    )


def scalar_of(store: Any, item: LeafFile | Node | None) -> bool | int | float | str | None:
    """The value of a one-element leaf of a plain number dtype, or None (not such a
    leaf, or its bytes cannot be read: the row says no number rather than fail). A
    non-finite float comes as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (JSON)."""
    if item is None or (isinstance(item, Node) and not item.is_leaf):
        return None
    record, file, _ = leaf_parts(item)
    if file is None or record.numel != 1:
        return None
    name = record.dtype.torch_name
    if name not in _NUMPY and name != "bfloat16":
        return None
    size = record.dtype.itemsize
    try:
        data = store.read_bytes(file, MAX_SCALAR_BYTES)
    except (TDViewError, OSError):
        return None
    if len(data) < size:
        return None
    return _decode(bytes(data[:size]), name)


def _decode(data: bytes, name: str) -> bool | int | float | str:
    import numpy as np

    if name == "bfloat16":  # the high half of a float32
        value: Any = np.frombuffer(b"\0\0" + data, dtype="<f4")[0]
    else:
        value = np.frombuffer(data, dtype=_NUMPY[name])[0]
    out = value.item()
    if isinstance(out, float) and not math.isfinite(out):
        return "NaN" if math.isnan(out) else ("Infinity" if out > 0 else "-Infinity")
    return out
